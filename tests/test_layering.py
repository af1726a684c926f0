"""Dependencies point downward only (DESIGN.md, "Layers"), checked on the source.

- the core (``gateway/``) imports neither ``platforms`` nor ``adapters``, nor a chat platform's
  SDK: it is handed its platforms and its launcher;
- a platform (``platforms/``) never imports ``adapters`` (it never sees an agent's wire);
- an adapter (``adapters/``) never imports ``platforms`` (it never sees a chat message), nor
  a chat platform's SDK;
- a module shared by the platforms (``platforms/*.py``: the outbox, the form drafts, the
  registry) imports no SDK and no platform's package.

The only exemptions are the composition root (``gateway/cli.py``, ``gateway/__main__.py``),
which builds the platforms and the launcher, and the demo (``gateway/demo/``), an
application of the core with its own agent (docs/decisions.md, "Demo").

:func:`crossings` reads every ``.py`` file with :mod:`ast`: ``import x``, ``from x import y``,
relative imports (resolved to the package they name), imports inside functions and under
``TYPE_CHECKING``, and ``importlib.import_module("x")`` / ``__import__("x")`` with a literal
name. It is tested on a synthetic tree first, so that it cannot pass by seeing nothing.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PLATFORM_SDKS = frozenset({"telegram", "aiohttp", "slack_sdk", "slack_bolt", "discord"})
# the applications at the top: nothing below them imports them
APPLICATIONS = frozenset({"gateway.cli", "gateway.__main__", "gateway.demo"})
FORBIDDEN: Mapping[str, frozenset[str]] = {  # by layer: module names, or their packages
    "gateway": frozenset({"platforms", "adapters"}) | PLATFORM_SDKS | APPLICATIONS,
    "platforms": frozenset({"adapters"}) | APPLICATIONS,
    # aiohttp is OpenCode's transport (HTTP + SSE to `opencode serve`), not a platform there
    "adapters": frozenset({"platforms"}) | (PLATFORM_SDKS - {"aiohttp"}) | APPLICATIONS,
}
EXEMPT = ("gateway/cli.py", "gateway/__main__.py", "gateway/demo/")
SHARED = "platforms"  # its modules, not its packages: shared by every platform


@dataclass(frozen=True, kw_only=True, slots=True)
class Crossing:
    path: str  # relative to the root, with "/"
    line: int
    imported: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: imports {self.imported}"


def _exempt(relative: str) -> bool:
    return any(
        relative.startswith(rule) if rule.endswith("/") else relative == rule for rule in EXEMPT
    )


def _package_of(relative: str) -> list[str]:
    """The package a module belongs to: ``gateway/store/x.py`` -> gateway.store."""
    return relative.removesuffix(".py").split("/")[:-1]


def _imported(node: ast.AST, relative: str) -> Iterator[str]:
    """The absolute names a node imports (none if it imports nothing)."""
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names)
    elif isinstance(node, ast.ImportFrom):
        if node.level == 0:
            assert node.module is not None
            base = node.module.split(".")
        else:
            package = _package_of(relative)
            base = package[: len(package) - (node.level - 1)]
            if node.module is not None:
                base = [*base, *node.module.split(".")]
        if base:
            yield ".".join(base)
        # from x import y: y may be a module of the package x
        yield from (".".join([*base, alias.name]) for alias in node.names)
    elif isinstance(node, ast.Call) and node.args:
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        first = node.args[0]
        if name in ("import_module", "__import__") and isinstance(first, ast.Constant):
            if isinstance(first.value, str):
                yield first.value


def _forbidden(root: Path, relative: str) -> frozenset[str]:
    """What the module at ``relative`` may not import."""
    layer, *inside = relative.split("/")
    forbidden = FORBIDDEN[layer]
    if layer == SHARED and len(inside) == 1:
        packages = {p.parent.name for p in (root / SHARED).glob("*/__init__.py")}
        forbidden |= PLATFORM_SDKS | {f"{SHARED}.{name}" for name in packages}
    return forbidden


def crossings(root: Path) -> tuple[list[Crossing], int]:
    """Every import that crosses a layer under ``root``, and how many files were read."""
    found: list[Crossing] = []
    read = 0
    for layer in FORBIDDEN:
        for path in sorted((root / layer).rglob("*.py")):
            relative = path.relative_to(root).as_posix()
            if _exempt(relative):
                continue
            forbidden = _forbidden(root, relative)
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=relative)
            read += 1
            for node in ast.walk(tree):
                name = next((n for n in _imported(node, relative) if _in(n, forbidden)), None)
                if name is not None:
                    line = getattr(node, "lineno", 0)
                    found.append(Crossing(path=relative, line=line, imported=name))
    return found, read


def _in(name: str, modules: frozenset[str]) -> bool:
    """``name`` is one of ``modules`` or inside one of them."""
    parts = name.split(".")
    return any(".".join(parts[:n]) in modules for n in range(1, len(parts) + 1))


# --- the checker itself, on a synthetic tree -----------------------------------------------


def _write(root: Path, relative: str, text: str) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def test_the_checker_finds_every_kind_of_crossing(tmp_path: Path) -> None:
    _write(tmp_path, "gateway/__init__.py", "")
    _write(tmp_path, "gateway/plain.py", "import platforms.console\nimport os\n")
    _write(tmp_path, "gateway/fromimport.py", "from adapters.launch import probe_version\n")
    _write(
        tmp_path,
        "gateway/store/inner.py",
        "def later():\n    from adapters import stdio\n    return stdio\n",
    )
    _write(
        tmp_path,
        "gateway/typing_only.py",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import platforms\n",
    )
    _write(tmp_path, "gateway/relative.py", "from ..adapters import codec\nfrom . import domain\n")
    _write(tmp_path, "gateway/dotted.py", "from .. import platforms\n")
    _write(
        tmp_path, "gateway/dynamic.py", "import importlib\nimportlib.import_module('adapters')\n"
    )
    _write(tmp_path, "gateway/sdk.py", "import telegram\n")
    _write(tmp_path, "platforms/chat.py", "import adapters.stdio\nfrom gateway import domain\n")
    _write(tmp_path, "adapters/agent.py", "from platforms.memory import MemoryPlatform\n")
    _write(tmp_path, "adapters/fine.py", "from gateway.events import AgentEvent\n")
    _write(tmp_path, "platforms/app.py", "from gateway import demo\n")
    # a platform's package may import its SDK; a module shared by the platforms may not
    _write(tmp_path, "platforms/chatty/__init__.py", "")
    _write(tmp_path, "platforms/chatty/platform.py", "import discord\nfrom platforms import app\n")
    _write(tmp_path, "platforms/shared.py", "import discord\nimport platforms.chatty.platform\n")
    _write(tmp_path, "gateway/root.py", "def main():\n    import gateway.cli\n")
    # the composition root and the demo may import anything
    _write(tmp_path, "gateway/cli.py", "from platforms.console import ConsolePlatform\n")
    _write(tmp_path, "gateway/__main__.py", "import adapters.launch\n")
    _write(tmp_path, "gateway/demo/command.py", "from adapters.launch import ConfiguredLauncher\n")

    found, read = crossings(tmp_path)

    assert sorted(map(str, found)) == [
        "adapters/agent.py:1: imports platforms.memory",
        "gateway/dotted.py:1: imports platforms",
        "gateway/dynamic.py:2: imports adapters",
        "gateway/fromimport.py:1: imports adapters.launch",
        "gateway/plain.py:1: imports platforms.console",
        "gateway/relative.py:1: imports adapters",
        "gateway/root.py:2: imports gateway.cli",
        "gateway/sdk.py:1: imports telegram",
        "gateway/store/inner.py:2: imports adapters",
        "gateway/typing_only.py:3: imports platforms",
        "platforms/app.py:1: imports gateway.demo",
        "platforms/chat.py:1: imports adapters.stdio",
        "platforms/shared.py:1: imports discord",
        "platforms/shared.py:2: imports platforms.chatty.platform",
    ]
    assert read == 17  # every file but the three exempt ones


# --- the project -------------------------------------------------------------------------------


def test_no_layer_imports_upward_or_sideways() -> None:
    found, read = crossings(ROOT)
    assert read > 50, f"only {read} source files read: is ROOT right?"
    assert found == [], "layer crossings:\n" + "\n".join(map(str, found))


def test_every_exemption_names_something_that_exists() -> None:
    for rule in EXEMPT:
        assert (ROOT / rule).exists(), f"stale exemption {rule}"
