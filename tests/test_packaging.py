"""Installing the project: what ``scripts/setup.sh`` (``pip install -e .``) shows a newcomer.

pip relays every warning of the build backend, even under ``--quiet``: a deprecated
``project.license`` table printed three boxed warnings, and the meta-path-finder editable
mode one more. The editable wheel is built here as pip builds it (setuptools' PEP 517 hook),
with setuptools' warnings turned into errors.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

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
