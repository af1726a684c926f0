"""What a reload (SIGHUP, ``systemctl reload``) may change without a restart (issue 37).

Who may talk and approve changes while agents run: each project's ``auth`` tables
(allowlists, approvers), ``[people]``, ``[groups]`` and each project's ``policy`` rules.
Everything else (agents, their options, work dirs, platforms and tokens, the ledger, the
console) is held by running processes and connections: a reload that changes any of it is
refused as a whole, naming the first such key, and nothing is applied. Pure.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from gateway.config.model import Config
from gateway.errors import ConfigError

__all__ = ["RELOADABLE", "config_hash", "reloadable_changes"]

# per project, and at the top: the keys a reload applies
PROJECT_KEYS = ("auth", "policy")
TOP_KEYS = ("people", "groups")
RELOADABLE = "allowlists and approvers (projects.*.auth), [people], [groups], projects.*.policy"


def _dump(config: Config) -> dict[str, Any]:
    """The config as data; secrets masked (compared as models in :func:`reloadable_changes`),
    each platform's table by its own model."""
    dump = config.model_dump(mode="json", exclude={"platforms"}, by_alias=True)
    dump["platforms"] = {
        name: settings.model_dump(mode="json") for name, settings in config.platforms.items()
    }
    return dump


def _secret_changed(old: Config, new: Config) -> str | None:
    """The first section whose values differ where the dump could not tell (a secret is
    dumped masked): compared as models, field by field."""
    if old.gateway != new.gateway:
        return "gateway"
    if old.platforms != new.platforms:
        return "platforms"
    for name, project in old.projects.items():
        other = new.projects[name]
        for key in type(project).model_fields:
            if key not in PROJECT_KEYS and getattr(project, key) != getattr(other, key):
                return f"projects.{name}.{key}"
    return None


def _fixed(dump: dict[str, Any]) -> dict[str, Any]:
    """``dump`` without what a reload may change."""
    kept = {k: v for k, v in dump.items() if k not in TOP_KEYS}
    kept["projects"] = {
        name: {k: v for k, v in project.items() if k not in PROJECT_KEYS}
        for name, project in dump.get("projects", {}).items()
    }
    return kept


def _first_difference(old: Any, new: Any, path: str) -> str | None:
    if isinstance(old, dict) and isinstance(new, dict):
        for key in [*old, *(k for k in new if k not in old)]:
            if key not in old or key not in new:
                return f"{path}.{key}" if path else str(key)
            found = _first_difference(old[key], new[key], f"{path}.{key}" if path else str(key))
            if found is not None:
                return found
        return None
    return None if old == new else path


def reloadable_changes(old: Config, new: Config) -> list[str]:
    """The keys a reload from ``old`` to ``new`` changes (empty: nothing); ConfigError,
    naming the key, when it changes one that needs a restart."""
    before, after = _dump(old), _dump(new)
    fixed = _first_difference(_fixed(before), _fixed(after), "")
    if fixed is None:
        fixed = _secret_changed(old, new)
    if fixed is not None:
        # a project's agent options are written flat (projects.web.argv): named so
        fixed = re.sub(r"^(projects\.[^.]+)\.agent_options\.", r"\1.", fixed)
        raise ConfigError(f"{fixed} changed: that needs a restart (a reload applies {RELOADABLE})")
    changed = [key for key in TOP_KEYS if before.get(key) != after.get(key)]
    for name, project in after.get("projects", {}).items():
        for key in PROJECT_KEYS:
            if before["projects"][name].get(key) != project.get(key):
                changed.append(f"projects.{name}.{key}")
    return changed


def config_hash(config: Config) -> str:
    """A short hash of what a config says (the hosts of one ledger compare theirs)."""
    text = json.dumps(_dump(config), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:12]
