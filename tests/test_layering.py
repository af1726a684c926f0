"""The map of the code (docs/architecture.md, "The map"), checked on the source with ``ast``.

``gateway/`` is the top (its own modules: the contract every package reads) and six packages
in one order; a module imports only from its own package or those before it::

    top < config < interactions < store < render < sessions < app

- only ``app/`` (and ``gateway/__main__.py``, which must sit at the root for ``python -m
  gateway``) imports ``platforms`` or ``adapters``; the rest of ``gateway/`` imports no chat
  platform's SDK;
- a platform imports the top and ``render/`` only, but where :data:`PLATFORM_EXTRAS` says
  why it needs more; a module shared by the platforms (``platforms/*.py``) imports no SDK and
  no platform's package;
- an adapter imports the top, ``config/``, ``interactions/`` and the agent protocol
  (``gateway.sessions.agents``), never a platform nor a chat platform's SDK;
- no two modules import each other, in any form, anywhere in the product or ``bench/``:
  deferred into a function or under ``TYPE_CHECKING`` included (in fact no import cycle of
  any length).

:func:`imports_of` reads every form of import: ``import x``, ``from x import y`` (``y`` a
module of ``x`` when it is one), relative imports, imports inside functions and under
``TYPE_CHECKING``, and ``importlib.import_module("x")`` / ``__import__("x")`` with a literal
name. The checks run on a synthetic tree first, so that they cannot pass by seeing nothing.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOPS = ("gateway", "platforms", "adapters", "bench")  # the trees whose modules are read

ORDER = ("top", "config", "interactions", "store", "render", "sessions", "app")
ROOT_MODULE_PACKAGE = {"gateway/__main__.py": "app"}  # `python -m gateway` needs it at the root
PLATFORM_SDKS = frozenset({"telegram", "aiohttp", "slack_sdk", "slack_bolt", "discord"})
# What a platform needs beyond the top and render/, by module path prefix, and why
# (docs/decisions.md, "The map"):
PLATFORM_EXTRAS: Mapping[str, frozenset[str]] = {
    # a platform's config table is part of the configuration, read by config/'s model
    "platforms/registry.py": frozenset({"config"}),
    **{
        f"platforms/{name}/config.py": frozenset({"config"})
        for name in ("console", "discord", "memory", "slack", "telegram")
    },
    # form drafts keep each person's answers in the shared ledger, in the ledger's codec
    "platforms/form_drafts.py": frozenset({"store"}),
    # the console is a view of the ledger and the engine: its pages read sessions, turns and
    # requests, and its grants page revokes through the grant desk
    "platforms/console/": frozenset({"config", "interactions", "store", "sessions"}),
}
ADAPTER_ALLOWED = frozenset({"top", "config", "interactions"})
ADAPTER_MODULES = frozenset({"gateway.sessions.agents"})  # the protocol an agent meets


@dataclass(frozen=True, kw_only=True, slots=True)
class Found:
    path: str  # relative to the root, with "/"
    line: int
    imported: str
    why: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: imports {self.imported} ({self.why})"


# --- reading the source ---------------------------------------------------------------------


def module_name(relative: str) -> str:
    """``gateway/store/x.py`` -> gateway.store.x; ``gateway/store/__init__.py`` -> gateway.store."""
    parts = relative.removesuffix(".py").split("/")
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported(node: ast.AST, relative: str) -> Iterator[str]:
    """The absolute names a node imports (none if it imports nothing)."""
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names)
    elif isinstance(node, ast.ImportFrom):
        if node.level == 0:
            assert node.module is not None
            base = node.module.split(".")
        else:
            package = relative.removesuffix(".py").split("/")[:-1]
            base = package[: len(package) - (node.level - 1)]
            if node.module is not None:
                base = [*base, *node.module.split(".")]
        # from x import y: y may be a module of the package x, else a name in x
        yield from (".".join([*base, alias.name]) for alias in node.names)
    elif isinstance(node, ast.Call) and node.args:
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        first = node.args[0]
        if name in ("import_module", "__import__") and isinstance(first, ast.Constant):
            if isinstance(first.value, str):
                yield first.value


@dataclass(frozen=True, kw_only=True, slots=True)
class Import:
    line: int
    name: str  # as written, made absolute
    module: str | None  # the module of the tree it resolves to (None: outside the tree)


@dataclass(frozen=True, kw_only=True, slots=True)
class Tree:
    modules: Mapping[str, str]  # module name -> relative path
    imports: Mapping[str, tuple[Import, ...]]  # module name -> what it imports

    def resolve(self, name: str) -> str | None:
        """The deepest module of the tree that ``name`` is or is inside."""
        parts = name.split(".")
        for n in range(len(parts), 0, -1):
            candidate = ".".join(parts[:n])
            if candidate in self.modules:
                return candidate
        return None


def read_tree(root: Path) -> Tree:
    modules: dict[str, str] = {}
    for top in TOPS:
        for path in sorted((root / top).rglob("*.py")):
            relative = path.relative_to(root).as_posix()
            modules[module_name(relative)] = relative
    partial = Tree(modules=modules, imports={})
    imports: dict[str, tuple[Import, ...]] = {}
    for module, relative in modules.items():
        tree = ast.parse((root / relative).read_text(encoding="utf-8"), filename=relative)
        found = [
            Import(line=getattr(node, "lineno", 0), name=name, module=partial.resolve(name))
            for node in ast.walk(tree)
            for name in _imported(node, relative)
        ]
        imports[module] = tuple(found)
    return Tree(modules=modules, imports=imports)


def package_of(relative: str) -> str | None:
    """The package of the map a file of ``gateway/`` belongs to; None if it has none."""
    parts = relative.split("/")
    if parts[0] != "gateway":
        return None
    if relative in ROOT_MODULE_PACKAGE:
        return ROOT_MODULE_PACKAGE[relative]
    if len(parts) == 2:
        return "top"
    return parts[1] if parts[1] in ORDER[1:] else None


def _in(name: str, packages: frozenset[str]) -> bool:
    parts = name.split(".")
    return any(".".join(parts[:n]) in packages for n in range(1, len(parts) + 1))


# --- the rules -------------------------------------------------------------------------------


def unmapped(tree: Tree) -> list[str]:
    """Modules of ``gateway/`` in no package of the map."""
    return sorted(
        path
        for path in tree.modules.values()
        if path.startswith("gateway/") and package_of(path) is None
    )


def _platform_allowed(relative: str) -> frozenset[str]:
    allowed = {"top", "render"}
    for prefix, extra in PLATFORM_EXTRAS.items():
        if relative == prefix or (prefix.endswith("/") and relative.startswith(prefix)):
            allowed |= extra
    return frozenset(allowed)


def _broken_rule(
    tree: Tree, relative: str, item: Import, platform_packages: frozenset[str]
) -> str | None:
    """The rule that ``item``, imported by the file at ``relative``, breaks; None if none."""
    name, target = item.name, item.module
    top = relative.split("/")[0]
    mine = package_of(relative)
    theirs = package_of(tree.modules[target]) if target is not None else None
    if top == "gateway":
        assert mine is not None  # unmapped modules are reported apart
        if _in(name, frozenset({"platforms", "adapters"})) and mine != "app":
            return "only app/ imports platforms and adapters"
        if _in(name, PLATFORM_SDKS) and mine != "app":
            return "the core imports no chat platform's SDK"
        if theirs is not None and ORDER.index(theirs) > ORDER.index(mine):
            return f"{mine} comes before {theirs}"
    elif top == "platforms":
        if _in(name, frozenset({"adapters"})):
            return "a platform never sees an agent's wire"
        if theirs is not None and theirs not in _platform_allowed(relative):
            return f"a platform imports the top and render/, not {theirs}/"
        if relative.count("/") == 1 and (_in(name, PLATFORM_SDKS) or _in(name, platform_packages)):
            return "a module shared by the platforms imports no SDK nor platform"
    elif top == "adapters":
        if _in(name, frozenset({"platforms"})) or _in(name, PLATFORM_SDKS - {"aiohttp"}):
            return "an adapter never sees a chat platform"
        if theirs is not None and theirs not in ADAPTER_ALLOWED and target not in ADAPTER_MODULES:
            return f"an adapter imports the top, config/ and interactions/, not {theirs}/"
    return None


def crossings(root: Path) -> list[Found]:
    """Every import against the map's order or its layers, with the rule it breaks."""
    tree = read_tree(root)
    platform_packages = frozenset(
        f"platforms.{p.parent.name}" for p in (root / "platforms").glob("*/__init__.py")
    )
    found: list[Found] = []
    for module, relative in tree.modules.items():
        for item in tree.imports[module]:
            why = _broken_rule(tree, relative, item, platform_packages)
            if why is not None:
                gateway_module = item.module is not None and item.module.startswith("gateway")
                shown = item.module if gateway_module else item.name
                found.append(Found(path=relative, line=item.line, imported=shown, why=why))
    return sorted(found, key=str)


def cycles(root: Path) -> list[list[str]]:
    """The import cycles between modules of the product and bench/: each a strongly connected
    set of two or more modules (a package's ``__init__`` is a module like any other)."""
    tree = read_tree(root)
    edges = {
        module: {
            item.module for item in imports if item.module is not None and item.module != module
        }
        for module, imports in tree.imports.items()
    }
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for after in sorted(edges[node]):
            if after not in index:
                visit(after)
                low[node] = min(low[node], low[after])
            elif after in on_stack:
                low[node] = min(low[node], index[after])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return sorted(found)


# --- the checks themselves, on a synthetic tree ---------------------------------------------


def _write(root: Path, relative: str, text: str = "") -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def _synthetic(root: Path) -> None:
    for package in ("gateway", "platforms", "adapters", "bench"):
        _write(root, f"{package}/__init__.py")
    for package in ORDER[1:]:
        _write(root, f"gateway/{package}/__init__.py")
    _write(root, "gateway/domain.py")
    _write(root, "gateway/config/model.py", "from gateway.domain import X\n")
    _write(root, "gateway/interactions/machine.py", "from gateway.config.model import Config\n")
    _write(root, "gateway/render/cards.py", "from gateway.interactions import machine\n")
    _write(root, "gateway/sessions/agents.py", "from gateway.render.cards import render\n")
    _write(root, "gateway/app/cli.py", "import platforms.console\nimport adapters.launch\n")
    _write(root, "gateway/__main__.py", "from gateway.app.cli import main\n")


def test_a_tree_that_follows_the_map_passes(tmp_path: Path) -> None:
    _synthetic(tmp_path)
    assert unmapped(read_tree(tmp_path)) == []
    assert crossings(tmp_path) == []
    assert cycles(tmp_path) == []


def test_the_checker_finds_every_kind_of_crossing(tmp_path: Path) -> None:
    _synthetic(tmp_path)
    _write(tmp_path, "gateway/config/upward.py", "from gateway.store import ledger\n")
    _write(tmp_path, "gateway/store/__init__.py")
    _write(tmp_path, "gateway/store/ledger.py")
    _write(
        tmp_path, "gateway/render/deferred.py", "def later():\n    import gateway.sessions.agents\n"
    )
    _write(
        tmp_path,
        "gateway/interactions/typing_only.py",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..render import cards\n",
    )
    _write(tmp_path, "gateway/sessions/engine.py", "import platforms.console\n")
    _write(
        tmp_path,
        "gateway/store/dynamic.py",
        "import importlib\nimportlib.import_module('adapters')\n",
    )
    _write(tmp_path, "gateway/sdk.py", "import telegram\n")
    _write(tmp_path, "gateway/app/fine.py", "import discord\nfrom gateway.sessions import agents\n")
    _write(tmp_path, "platforms/chat.py", "import adapters.stdio\nfrom gateway import domain\n")
    _write(tmp_path, "platforms/upward.py", "from gateway.sessions.agents import RunningAgent\n")
    _write(tmp_path, "platforms/form_drafts.py", "from gateway.store.ledger import codec\n")
    _write(tmp_path, "platforms/chatty/__init__.py")
    _write(
        tmp_path,
        "platforms/chatty/platform.py",
        "import discord\nfrom gateway.render import cards\n",
    )
    _write(tmp_path, "platforms/shared.py", "import discord\nimport platforms.chatty.platform\n")
    _write(tmp_path, "adapters/agent.py", "from platforms.chatty import platform\n")
    _write(tmp_path, "adapters/fine.py", "from gateway.sessions.agents import RunningAgent\n")
    _write(tmp_path, "adapters/upward.py", "from gateway.sessions import engine\n")
    _write(tmp_path, "gateway/stray/__init__.py")
    _write(tmp_path, "gateway/stray/thing.py")

    assert unmapped(read_tree(tmp_path)) == ["gateway/stray/__init__.py", "gateway/stray/thing.py"]
    assert [str(found) for found in crossings(tmp_path)] == sorted(
        [
            "adapters/agent.py:1: imports platforms.chatty.platform"
            " (an adapter never sees a chat platform)",
            "adapters/upward.py:1: imports gateway.sessions.engine"
            " (an adapter imports the top, config/ and interactions/, not sessions/)",
            "gateway/config/upward.py:1: imports gateway.store.ledger (config comes before store)",
            "gateway/interactions/typing_only.py:3: imports gateway.render.cards"
            " (interactions comes before render)",
            "gateway/render/deferred.py:2: imports gateway.sessions.agents"
            " (render comes before sessions)",
            "gateway/sdk.py:1: imports telegram (the core imports no chat platform's SDK)",
            "gateway/sessions/engine.py:1: imports platforms.console"
            " (only app/ imports platforms and adapters)",
            "gateway/store/dynamic.py:2: imports adapters"
            " (only app/ imports platforms and adapters)",
            "platforms/chat.py:1: imports adapters.stdio (a platform never sees an agent's wire)",
            "platforms/shared.py:1: imports discord"
            " (a module shared by the platforms imports no SDK nor platform)",
            "platforms/shared.py:2: imports platforms.chatty.platform"
            " (a module shared by the platforms imports no SDK nor platform)",
            "platforms/upward.py:1: imports gateway.sessions.agents"
            " (a platform imports the top and render/, not sessions/)",
        ]
    )


def test_the_checker_finds_modules_that_import_each_other(tmp_path: Path) -> None:
    _synthetic(tmp_path)
    _write(tmp_path, "gateway/sessions/engine.py", "from gateway.sessions.control import Control\n")
    _write(
        tmp_path,
        "gateway/sessions/control.py",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import engine\n",
    )
    _write(tmp_path, "bench/a.py", "def later():\n    from bench import b\n")
    _write(tmp_path, "bench/b.py", "import bench.c\n")
    _write(tmp_path, "bench/c.py", "from bench.a import x\n")
    # a package that re-exports a module which imports it back; a module importing its
    # package's other module (not the package) is no cycle
    _write(tmp_path, "gateway/store/__init__.py", "from gateway.store.ledger import Ledger\n")
    _write(tmp_path, "gateway/store/ledger.py", "from gateway.store import SECRET, codec\n")
    _write(tmp_path, "gateway/store/codec.py")

    assert cycles(tmp_path) == [
        ["bench.a", "bench.b", "bench.c"],
        ["gateway.sessions.control", "gateway.sessions.engine"],
        ["gateway.store", "gateway.store.ledger"],
    ]


# --- the project -------------------------------------------------------------------------------


def test_every_module_of_the_core_has_a_package_of_the_map() -> None:
    tree = read_tree(ROOT)
    assert sum(m.startswith("gateway.") for m in tree.modules) > 50, "is ROOT right?"
    assert unmapped(tree) == []
    root_modules = {p.stem for p in (ROOT / "gateway").glob("*.py")} - {"__init__"}
    packages = {p.parent.name for p in (ROOT / "gateway").glob("*/__init__.py")}
    assert packages == set(ORDER[1:]), "a package of gateway/ that the map does not name"
    assert "__main__" in root_modules  # python -m gateway


def test_imports_follow_the_order_and_the_layers() -> None:
    found = crossings(ROOT)
    assert found == [], "imports against the map:\n" + "\n".join(map(str, found))


def test_no_two_modules_import_each_other() -> None:
    found = cycles(ROOT)
    assert found == [], "import cycles:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_every_platform_exception_names_something_that_exists() -> None:
    for prefix in PLATFORM_EXTRAS:
        assert (ROOT / prefix).exists(), f"stale exception {prefix}"
