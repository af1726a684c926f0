"""The project's wheel, built as pip builds it, from a copy of the sources; and a fresh venv
that gets a chosen extra's dependencies from this venv, so that installing the wheel into it
needs no index (the machine may have none) and holds nothing the extra does not bring."""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
from importlib.metadata import Distribution, PackageNotFoundError, distribution
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
TOPS = ("gateway", "platforms", "adapters")

_BUILD_WHEEL = """
import sys
from setuptools import build_meta

print(build_meta.build_wheel(sys.argv[1]))
"""


def run(argv: list[str], *, cwd: Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, f"{argv}: {done.stdout[-2000:]}{done.stderr[-3000:]}"
    return done.stdout


def build_wheel(tmp_path: Path) -> Path:
    source = tmp_path / "source"  # a copy: the build writes its build/ beside the sources
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, source / name)
    for top in TOPS:
        shutil.copytree(ROOT / top, source / top, ignore=shutil.ignore_patterns("__pycache__"))
    built = tmp_path / "dist"
    name = run([sys.executable, "-c", _BUILD_WHEEL, str(built)], cwd=source).splitlines()[-1]
    return built / name


def _requirements(extras: set[str]) -> list[Requirement]:
    """The project's own requirements with ``extras``, read from its pyproject (not from an
    editable install's metadata, which may be older than the file)."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    found = [Requirement(text) for text in project["dependencies"]]
    optional = project["optional-dependencies"]
    for extra in extras:
        for text in optional[extra]:
            requirement = Requirement(text)
            if requirement.name == project["name"]:  # all = ["agent-gateway[telegram,...]"]
                found += _requirements(set(requirement.extras))
            else:
                found.append(requirement)
    return found


def closure(extras: set[str]) -> dict[str, Distribution]:
    """Every distribution the project with ``extras`` needs, as installed here."""
    found: dict[str, Distribution] = {}
    todo = [(requirement, "") for requirement in _requirements(extras)]
    while todo:
        requirement, extra = todo.pop()
        if requirement.marker and not requirement.marker.evaluate({"extra": extra}):
            continue
        try:
            dist = distribution(requirement.name)
        except PackageNotFoundError:
            raise AssertionError(f"{requirement.name} is not installed here") from None
        key = dist.metadata["Name"].lower().replace("_", "-")
        wanted = {""} | set(requirement.extras)
        if key in found and not requirement.extras:
            continue
        found[key] = dist
        for text in dist.requires or ():
            sub = Requirement(text)
            for each in wanted:
                if sub.marker is None or sub.marker.evaluate({"extra": each}):
                    todo.append((sub, each))
                    break
    return found


def fresh_venv(where: Path, extras: set[str]) -> Path:
    """A venv without pip whose site-packages links in the distributions of ``closure``;
    returns its python."""
    run([sys.executable, "-m", "venv", "--without-pip", str(where)], cwd=where.parent)
    python = where / "bin" / "python"
    site = Path(
        run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            cwd=where,
        ).strip()
    )
    here = Path(sysconfig.get_paths()["purelib"])
    for dist in closure(extras).values():
        tops = {Path(str(file)).parts[0] for file in dist.files or ()}
        for top in sorted(tops - {".."}):
            if not (site / top).exists() and (here / top).exists():
                (site / top).symlink_to(here / top)
    return python
