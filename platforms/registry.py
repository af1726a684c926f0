"""Every platform the gateway knows: its name, its ``config`` module and its factory.

The core validates a config against this table (``gateway.config.model.parse_config`` takes it as
``platforms=``; :func:`parse_config` and :func:`load_config` here pass it) and never imports a
platform itself (DESIGN.md, Layers). Nothing of a platform is imported by importing this
module: a platform's ``config`` module (pydantic and ``gateway`` only) when a config has its
``[platforms.<name>]`` table, and its factory, with its SDK, only when the platform is built
(``agent-gateway run``: :meth:`Registry.build`).

A new platform is one :class:`PlatformEntry` here, a ``platforms/<name>/config.py`` that
exports ``TABLE`` (a :class:`~gateway.config.platform_tables.PlatformTable`: its model and help),
its help in ``config.example.toml``, and the factory that builds it from its settings.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gateway.config.model import Config
from gateway.config.model import load_config as load_with
from gateway.config.model import parse_config as parse_with
from gateway.config.platform_tables import PlatformConfig, PlatformTable
from gateway.errors import ConfigError
from gateway.platform import Platform

__all__ = ["PLATFORMS", "PlatformEntry", "Registry", "load_config", "parse_config"]


@dataclass(frozen=True, kw_only=True, slots=True)
class PlatformEntry:
    name: str  # the name of its [platforms.<name>] table
    config: str  # the module that exports TABLE
    # "module:callable" that builds the platform from its settings; None: not started by
    # `agent-gateway run` (tests and embeddings build it themselves)
    factory: str | None
    # the [projects.<p>.auth.<name>] table that lists this platform's user ids
    auth_table: str
    # "module:callable" that `agent-gateway check` awaits with the settings: asks the
    # platform's servers what the config may do, (OK, lines to print); None: nothing asked
    probe: str | None = None
    # the package extra that installs its SDK (`pip install 'agent-gateway[<extra>]'`), and
    # the SDK's top-level modules; None and (): nothing beyond the core
    extra: str | None = None
    sdk: tuple[str, ...] = ()


class Registry:
    """Platforms by name (a :class:`~gateway.config.platform_tables.PlatformRegistry`)."""

    def __init__(self, entries: Iterable[PlatformEntry]) -> None:
        self._entries = {entry.name: entry for entry in entries}

    def names(self) -> tuple[str, ...]:
        return tuple(self._entries)

    def auth_tables(self) -> tuple[str, ...]:
        return tuple(entry.auth_table for entry in self._entries.values())

    def entry(self, name: str) -> PlatformEntry:
        try:
            return self._entries[name]
        except KeyError:
            known = ", ".join(self._entries)
            raise ConfigError(f"unknown platform {name!r}; one of {known}") from None

    def table(self, name: str) -> PlatformTable:
        """The platform's model and help: imports its config module, nothing else of it."""
        module = self.entry(name).config
        table = getattr(importlib.import_module(module), "TABLE", None)
        if not isinstance(table, PlatformTable):
            raise TypeError(f"{module} exports no TABLE (a PlatformTable)")
        return table

    def runs(self, name: str) -> bool:
        """Whether ``agent-gateway run`` starts this platform."""
        return self.entry(name).factory is not None

    def build(self, name: str, settings: PlatformConfig) -> Platform:
        """The platform, unstarted, from its settings: imports its factory (and its SDK)."""
        factory = self.entry(name).factory
        if factory is None:
            raise ConfigError(f"platform {name} is not started by agent-gateway run")
        module, _, attribute = factory.partition(":")
        make: Callable[[Any], Platform] = getattr(self._import(name, module), attribute)
        return make(settings)

    async def probe(self, name: str, settings: PlatformConfig) -> tuple[bool, list[str]] | None:
        """What the platform's servers say of ``settings`` (``agent-gateway check``): OK and
        the lines to print; None for a platform that asks nothing. Imports only its probe."""
        probe = self.entry(name).probe
        if probe is None:
            return None
        module, _, attribute = probe.partition(":")
        ask: Callable[[Any], Awaitable[tuple[bool, list[str]]]] = getattr(
            self._import(name, module), attribute
        )
        return await ask(settings)

    def require_sdk(self, name: str) -> None:
        """A ConfigError naming the extra to install if the platform's SDK is not installed
        (the core installs no platform's SDK). Found, not imported: ``check`` loads none."""
        entry = self.entry(name)
        missing = [module for module in entry.sdk if importlib.util.find_spec(module) is None]
        if missing:
            raise ConfigError(
                f"platform {name} is configured, but its SDK is not installed (no module "
                f"{missing[0]!r}): pip install 'agent-gateway[{entry.extra}]' (or [all])"
            )

    def _import(self, name: str, module: str) -> Any:
        self.require_sdk(name)
        return importlib.import_module(module)


# the order in which `agent-gateway run` builds and starts them
PLATFORMS = Registry(
    [
        PlatformEntry(
            name="console",
            config="platforms.console.config",
            factory="platforms.console.platform:ConsolePlatform",
            auth_table="local",  # people without a chat account: identity = "local:<name>"
        ),
        PlatformEntry(
            name="telegram",
            config="platforms.telegram.config",
            factory="platforms.telegram.platform:TelegramPlatform",
            auth_table="telegram",
            extra="telegram",
            sdk=("telegram",),
            probe="platforms.telegram.probe:check",
        ),
        PlatformEntry(
            name="slack",
            config="platforms.slack.config",
            factory="platforms.slack.platform:SlackPlatform",
            auth_table="slack",
            extra="slack",
            sdk=("slack_bolt", "slack_sdk"),
            probe="platforms.slack.probe:check",
        ),
        PlatformEntry(
            name="discord",
            config="platforms.discord.config",
            factory="platforms.discord.platform:DiscordPlatform",
            auth_table="discord",
            extra="discord",
            sdk=("discord",),
            probe="platforms.discord.probe:check",
        ),
        PlatformEntry(
            name="memory",
            config="platforms.memory.config",
            factory=None,
            auth_table="memory",
        ),
    ]
)


def parse_config(
    text: str,
    source_name: str = "<config>",
    *,
    env: Mapping[str, str] | None = None,
    base_dir: Path | None = None,
) -> Config:
    """:func:`gateway.config.model.parse_config` against the gateway's platforms."""
    return parse_with(text, source_name, platforms=PLATFORMS, env=env, base_dir=base_dir)


def load_config(path: Path | str, *, env: Mapping[str, str] | None = None) -> Config:
    """:func:`gateway.config.model.load_config` against the gateway's platforms."""
    return load_with(path, platforms=PLATFORMS, env=env)
