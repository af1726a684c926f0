"""Installing the project: what ``scripts/setup.sh`` (``pip install -e .``) shows a newcomer.

pip relays every warning of the build backend, even under ``--quiet``: a deprecated
``project.license`` table printed three boxed warnings, and the meta-path-finder editable
mode one more. The editable wheel is built here as pip builds it (setuptools' PEP 517 hook),
with setuptools' warnings turned into errors.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.wheel_build import build_wheel
from tests.wheel_build import run as _run

pytestmark = pytest.mark.timeout(60)

ROOT = Path(__file__).resolve().parents[1]

_BUILD = """
import sys, warnings
from setuptools import build_meta
from setuptools.warnings import SetuptoolsWarning

warnings.simplefilter("error", SetuptoolsWarning)
print(build_meta.build_editable(sys.argv[1]))
"""


def test_the_editable_install_builds_without_a_setuptools_warning(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _BUILD, str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    [wheel] = tmp_path.glob("*.whl")
    assert wheel.name == done.stdout.strip().splitlines()[-1]


def test_the_wheel_carries_the_license_and_runs_from_where_it_is_installed(
    tmp_path: Path,
) -> None:
    wheel = build_wheel(tmp_path)
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    license_file = next(n for n in names if n.endswith(".dist-info/licenses/LICENSE"))
    with zipfile.ZipFile(wheel) as archive:
        assert b"Apache License" in archive.read(license_file)
    packages = {n.rsplit("/", 1)[0] for n in names if n.endswith("/__init__.py")}
    on_disk = {
        p.parent.relative_to(ROOT).as_posix()
        for top in ("gateway", "platforms", "adapters")
        for p in (ROOT / top).rglob("__init__.py")
    }
    assert packages == on_disk  # every package of the map, and nothing from tests/

    # installed apart from the checkout, run from elsewhere: the modules are the wheel's
    site = tmp_path / "site"
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index"]
    _run([*pip, "--target", str(site), str(wheel)], cwd=tmp_path)
    env = {**os.environ, "PYTHONPATH": str(site)}
    python = [sys.executable, "-P"]  # -P: not the working directory either
    where = _run(
        [*python, "-c", "import gateway.app.cli as m; print(m.__file__)"], cwd=tmp_path, env=env
    )
    assert Path(where.strip()).is_relative_to(site)
    assert _run([*python, "-m", "gateway", "--version"], cwd=tmp_path, env=env).startswith(
        "agent-gateway "
    )
    assert "--pace" in _run(
        [*python, "-m", "gateway.app.demo.agent", "--help"], cwd=tmp_path, env=env
    )
