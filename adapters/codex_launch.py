"""The command line of ``codex app-server``.

    codex_app_server_argv(["npx", "codex"], enable=["default_mode_request_user_input"],
                          config={"model": "gpt-5.5", "features.plugins": False})
    == ["npx", "codex", "app-server", "--enable", "default_mode_request_user_input",
        "-c", 'model="gpt-5.5"', "-c", "features.plugins=false",
        "-c", "suppress_unstable_features_warning=true"]

``command`` is the configured binary or argv prefix (DESIGN.md: every agent takes an argv
prefix). ``--enable`` / ``--disable FEATURE`` and ``-c key=value`` are the app-server's own
options (``codex app-server --help``, 0.171: "The value portion is parsed as TOML"), so every
value is written as TOML here: a string is always quoted, never left to Codex's fallback of
reading an unparsable value as a raw string.

A feature the gateway enables may be one Codex calls under development: Codex then warns
("Under-development features enabled … set `suppress_unstable_features_warning = true` in
<CODEX_HOME>/config.toml"), a warning the person would read in their chat, about a file they
never chose. Whoever enables features here silences that warning too
(:data:`QUIET_UNSTABLE_FEATURES`, unless the caller's config says otherwise).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TypeAlias

from gateway.errors import ConfigError

__all__ = [
    "QUIET_UNSTABLE_FEATURES",
    "ConfigValue",
    "codex_app_server_argv",
    "config_args",
    "quieted",
    "toml_value",
]

ConfigValue: TypeAlias = str | int | float | bool | Sequence["ConfigValue"]

_FEATURE = re.compile(r"^[a-z0-9_]+$")
_CONFIG_KEY = re.compile(r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$")


# codex 0.171: the config key that silences the warning about under-development features
QUIET_UNSTABLE_FEATURES = "suppress_unstable_features_warning"


def quieted(
    enable: Sequence[str], config: Mapping[str, ConfigValue] | None
) -> dict[str, ConfigValue]:
    """``config`` with :data:`QUIET_UNSTABLE_FEATURES` set when features are enabled: the
    gateway does not make Codex warn the person about features the gateway itself enabled."""
    overrides = dict(config or {})
    if enable:
        overrides.setdefault(QUIET_UNSTABLE_FEATURES, True)
    return overrides


def toml_value(value: ConfigValue) -> str:
    """``value`` as a TOML value (a string is a basic string; JSON escapes are TOML's)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ConfigError(f"a config override must be a finite number, not {value}")
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return "[" + ", ".join(toml_value(item) for item in value) + "]"


def codex_app_server_argv(
    command: Sequence[str],
    *,
    enable: Iterable[str] = (),
    disable: Iterable[str] = (),
    config: Mapping[str, ConfigValue] | None = None,
) -> list[str]:
    """``[*command, "app-server", --enable F..., --disable F..., -c key=value...]``, with
    Codex's warning about enabled features silenced (:func:`quieted`)."""
    if isinstance(command, str) or not command:
        raise ConfigError("the codex command must be a non-empty list of arguments")
    enable = list(enable)
    argv = [*command, "app-server"]
    for flag, features in (("--enable", enable), ("--disable", disable)):
        for feature in features:
            if not _FEATURE.fullmatch(feature):
                raise ConfigError(f"not a codex feature name: {feature!r}")
            argv += [flag, feature]
    return [*argv, *config_args(quieted(enable, config))]


def config_args(config: Mapping[str, ConfigValue]) -> list[str]:
    """``-c key=value`` for each override, the value as TOML (Codex's own ``-c``, which
    codex-acp takes too)."""
    argv: list[str] = []
    for key, value in config.items():
        if not _CONFIG_KEY.fullmatch(key):
            raise ConfigError(f"not a codex config key: {key!r}")
        argv += ["-c", f"{key}={toml_value(value)}"]
    return argv
