"""What the core knows of a platform's configuration, without knowing any platform.

Each platform owns its ``[platforms.<name>]`` table: its package has a ``config`` module
(pydantic and ``gateway`` only, never the platform's SDK) that exports a
:class:`PlatformTable`: the model of the table (a :class:`PlatformConfig`) and its help (the
table as ``config.example.toml`` documents it). The core is handed a
:class:`PlatformRegistry` (the table of platforms lives outside it, in
``platforms/registry.py``) and asks it three things: which platforms exist, which ``auth``
tables their people may be listed in, and the :class:`PlatformTable` of a platform that the
config names (importing that platform's ``config`` module, and nothing else of it).

Validators that need the registry read it from the pydantic validation context
(:data:`AUTH_TABLES`): the names an ``auth`` table, or a console's ``identity``, may have.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, SecretStr, StringConstraints, ValidationInfo

from gateway.config.sources import Loc

__all__ = [
    "AUTH_TABLES",
    "HttpUrl",
    "NonEmpty",
    "PlatformConfig",
    "PlatformRegistry",
    "PlatformTable",
    "PlatformsSection",
    "known_auth_tables",
    "non_empty_secret",
]

# the validation context's key for the registry's auth table names (a tuple of str)
AUTH_TABLES = "auth_tables"

NonEmpty = Annotated[str, StringConstraints(min_length=1)]
HttpUrl = Annotated[str, StringConstraints(pattern=r"^https?://[^\s/]+(/\S*)?$")]


def non_empty_secret(value: SecretStr | None) -> SecretStr | None:
    """A field validator for secrets: blank is refused (an unset variable, an empty file)."""
    if value is not None and not value.get_secret_value().strip():
        raise ValueError("is empty")
    return value


def known_auth_tables(info: ValidationInfo) -> tuple[str, ...]:
    """The names an ``auth`` table may have, from the validation context.

    Fails closed: a model validated without a registry accepts no name at all.
    """
    known = info.context.get(AUTH_TABLES) if isinstance(info.context, dict) else None
    if not isinstance(known, tuple):
        raise ValueError("no platform registry to check it against")
    return known


class PlatformConfig(BaseModel):
    """The base of every platform's config model: unknown keys are errors, values frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    def auth_table(self, platform: str) -> str:
        """The ``[projects.<p>.auth.<name>]`` table that lists who may act through this
        platform (``platform`` is the name its table has): its own, unless it acts as
        someone of another platform (the console's ``identity``)."""
        return platform

    def problems(self) -> list[tuple[Loc, str]]:
        """Rules across this table's keys, each at the key it is about (a path inside the
        table). Run once the whole config is valid in shape."""
        return []


@dataclass(frozen=True, kw_only=True, slots=True)
class PlatformTable:
    """What a platform's ``config`` module exports as ``TABLE``."""

    model: type[PlatformConfig]
    help: str  # the table as config.example.toml shows it, comments and defaults included


class PlatformRegistry(Protocol):
    """The platforms a config may name. The core never imports a platform: it asks this."""

    def names(self) -> tuple[str, ...]:
        """Every platform, by the name of its ``[platforms.<name>]`` table, in start order."""
        ...

    def auth_tables(self) -> tuple[str, ...]:
        """Every name a ``[projects.<p>.auth.<name>]`` table may have."""
        ...

    def table(self, name: str) -> PlatformTable:
        """The model and help of one platform (imports its ``config`` module only)."""
        ...


P = TypeVar("P", bound=PlatformConfig)


class PlatformsSection:
    """The ``[platforms.<name>]`` tables of a config, each validated by its platform's model.

    A platform is enabled when its table is present; they are kept in the registry's order.
    """

    __slots__ = ("_settings",)

    def __init__(self, settings: Mapping[str, PlatformConfig] | None = None) -> None:
        self._settings: dict[str, PlatformConfig] = dict(settings or {})

    def enabled(self) -> tuple[str, ...]:
        return tuple(self._settings)

    def items(self) -> tuple[tuple[str, PlatformConfig], ...]:
        return tuple(self._settings.items())

    def get(self, name: str, model: type[P]) -> P | None:
        """The settings of platform ``name``, None when its table is absent.

        Raises TypeError when they are not a ``model`` (a caller asking for the wrong one).
        """
        settings = self._settings.get(name)
        if settings is None:
            return None
        if not isinstance(settings, model):
            raise TypeError(
                f"platforms.{name} is a {type(settings).__name__}, not {model.__name__}"
            )
        return settings

    def auth_platforms(self) -> dict[str, str]:
        """Enabled platform → the ``auth`` table its people are checked against."""
        return {name: settings.auth_table(name) for name, settings in self._settings.items()}

    __hash__ = None  # type: ignore[assignment]  # holds dicts, like the Config around it

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PlatformsSection) and other._settings == self._settings

    def __repr__(self) -> str:
        return f"PlatformsSection({self._settings!r})"
