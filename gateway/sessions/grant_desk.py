"""``/grants`` and ``/revoke ID`` (issue 17): what people granted beyond one request, who
granted it and when, and taking it back where it lives (gateway/sessions/grant_kinds.py).

- ``/grants``: the session's grants in force and the project's lasting ones.
- ``/revoke ID``: says what revoking does and asks to confirm where it ends the agent
  process (``/revoke ID confirm``) or edits Codex's rules file (``/revoke ID remove``: that
  line goes, and the process that holds the rule in memory is ended too). An OpenCode
  "always" is confirmed the same way: any saved permission for its patterns is deleted
  (``DELETE /api/permission/saved/{id}``), then the server, which holds it in memory, ends.

Who may revoke: whoever may decide the session's requests (auth.may_decide).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from gateway.config.access import may_decide
from gateway.config.model import Config
from gateway.domain import Actor
from gateway.errors import AgentError
from gateway.interactions.setting_change import SettingChange, change_of
from gateway.session_record import SessionRecord
from gateway.sessions.agents import SavesPermissions
from gateway.sessions.grant_kinds import (
    GrantKind,
    RuleLine,
    codex_rules_file,
    find_rule_line,
    grant_kind,
    opencode_permission,
    remove_rule_line,
    rule_words,
    settings_place,
)
from gateway.sessions.runner import SessionRunner
from gateway.store.grants import ProjectGrant
from gateway.store.store import Store
from gateway.wording import quoted

__all__ = ["GrantDesk", "GrantLine"]

log = logging.getLogger(__name__)

ENDS_PROCESS = (
    "the agent process is ended (there is no call to take it back); your next message "
    "resumes the conversation without it"
)

ENDS_SERVER = (
    "the OpenCode server, which holds it in its memory, is ended; your next message starts "
    "a new one without it"
)
# grants that live as long as the agent process (or server) of the epoch they were given in
_EPOCH_BOUND = frozenset({GrantKind.PROCESS, GrantKind.OPENCODE_SERVER})


@dataclass(frozen=True, kw_only=True, slots=True)
class GrantLine:
    """One grant in force, as /grants and the console list it."""

    id: int
    description: str
    by: str
    when: str
    where: str  # where it lives
    then: str | None  # the word /revoke ID takes to go on ("confirm", "remove"); None: by hand
    button: str  # what the console's button says


def _when(at: datetime) -> str:
    return f"{at.astimezone(UTC):%Y-%m-%d %H:%M} UTC"


class GrantDesk:
    def __init__(
        self,
        config: Config,
        store: Store,
        runner_of: Callable[[str], SessionRunner | None],
    ) -> None:
        self._config = config
        self._store = store
        self._runner_of = runner_of

    def reload(self, config: Config) -> None:
        """Who may revoke, from a reloaded config (gateway/config/reload.py)."""
        self._config = config

    async def in_force(self, session: SessionRecord) -> list[ProjectGrant]:
        """Not revoked, and (those living in the agent process) given in its live epoch."""
        runner = self._runner_of(session.id)
        live = runner.epoch if runner is not None and runner.agent is not None else None
        if runner is None and session.host is not None and session.current_epoch:
            # run by another host, perhaps: its agent's live epoch is the ledger's
            epoch = await self._store.sessions.get_epoch(session.id, session.current_epoch)
            live = epoch.epoch if epoch is not None and epoch.is_live else None
        kept = []
        for entry in await self._store.grants.for_session(session.id, session.project):
            if entry.revoked is not None:
                continue
            change = await self._change(entry)
            if change is not None:  # a looser /mode: in force while the session keeps it
                chosen = await self._store.settings.of(session.id)
                if getattr(chosen, change.setting) == change.value:
                    kept.append(entry)
                continue
            kind = grant_kind(session.agent_kind, entry.grant)
            if kind in _EPOCH_BOUND and (
                entry.grant.session_id != session.id or entry.runtime_epoch != live
            ):
                continue  # its process has ended: it went with it
            kept.append(entry)
        return kept

    async def listing(self, session: SessionRecord) -> list[GrantLine]:
        lines = []
        for entry in await self.in_force(session):
            grant = entry.grant
            change = await self._change(entry)
            if change is not None:
                lines.append(
                    GrantLine(
                        id=grant.id,
                        description=grant.description,
                        by=await self._granted_by(entry),
                        when=_when(grant.granted_at),
                        where="a setting of this session, kept by the gateway across restarts",
                        then="confirm",
                        button=f"Revoke: back to {change.before}",
                    )
                )
                continue
            kind = grant_kind(session.agent_kind, grant)
            then, button = {
                GrantKind.PROCESS: ("confirm", "Revoke: end the agent process"),
                GrantKind.CODEX_RULE: ("remove", "Revoke: remove the line"),
                GrantKind.OPENCODE_SERVER: ("confirm", "Revoke: end the OpenCode server"),
                GrantKind.AGENT_SETTINGS: (None, ""),
            }[kind]
            lines.append(
                GrantLine(
                    id=grant.id,
                    description=grant.description,
                    by=await self._granted_by(entry),
                    when=_when(grant.granted_at),
                    where=await self._where(session, entry),
                    then=then,
                    button=button,
                )
            )
        return lines

    async def _granted_by(self, entry: ProjectGrant) -> str:
        """Who granted it: the decider, or every voter where a rule asked several people."""
        interaction = await self._store.interactions.get(entry.grant.interaction_id)
        voters = [
            str(vote.actor)
            for vote in (interaction.votes if interaction is not None else ())
            if vote.action_id == entry.grant.action_id
        ]
        if len(voters) < 2:
            return str(entry.grant.actor)
        return f"{', '.join(voters[:-1])} and {voters[-1]}"

    async def list_text(self, session: SessionRecord) -> str:
        grants = await self.listing(session)
        if not grants:
            return "Grants in force: none."
        lines = ["Grants in force:"]
        lines += [f"{g.id}. {g.description} — by {g.by}, {g.when} · {g.where}" for g in grants]
        lines.append("/revoke ID takes one back.")
        return "\n".join(lines)

    async def _where(self, session: SessionRecord, entry: ProjectGrant) -> str:
        kind = grant_kind(session.agent_kind, entry.grant)
        if kind is GrantKind.PROCESS:
            return "held by the agent process, until it ends"
        if kind is GrantKind.OPENCODE_SERVER:
            return "held by the OpenCode server, until it stops"
        if kind is GrantKind.CODEX_RULE:
            line = await self._rule_line(session, entry)
            if line is None:
                return f"a rule in {self._rules_path(session)} (its line was not found)"
            return f"line {line.number} of {line.path}"
        return self._settings_place(session)

    def _settings_place(self, session: SessionRecord) -> str:
        return settings_place(session.agent_kind, self._config.projects[session.project])

    def _rules_path(self, session: SessionRecord) -> str:
        return str(codex_rules_file(self._config.projects[session.project]))

    async def _rule_line(self, session: SessionRecord, entry: ProjectGrant) -> RuleLine | None:
        interaction = await self._store.interactions.get(entry.grant.interaction_id)
        words = rule_words(interaction, entry.grant.action_id) if interaction else None
        if not words:
            return None
        return find_rule_line(codex_rules_file(self._config.projects[session.project]), words)

    async def revoke(self, session: SessionRecord, args: str, actor: Actor) -> str:
        """``/revoke ID [confirm|remove]``: the reply."""
        words = args.split()
        if not words or not words[0].isdigit():
            return "Usage: /revoke ID (the number /grants shows)."
        if not may_decide(self._config, session.project, actor, session.initiator):
            return "Only an approver of this project may revoke a grant."
        grant_id, then = int(words[0]), words[1].lower() if len(words) > 1 else ""
        in_force = {entry.grant.id: entry for entry in await self.in_force(session)}
        entry = in_force.get(grant_id)
        if entry is None:
            found = await self._store.grants.get(grant_id)
            if found is not None and found.revoked is not None:
                return (
                    f"Grant {grant_id} was revoked by {found.revoked.by}, "
                    f"{_when(found.revoked.at)}."
                )
            return f"No grant {grant_id} is in force here: /grants lists them."
        grant = entry.grant
        change = await self._change(entry)
        if change is not None:
            return await self._revoke_setting(session, entry, change, actor)
        kind = grant_kind(session.agent_kind, grant)
        if kind is GrantKind.PROCESS:
            if then != "confirm":
                return (
                    f"Revoking {quoted(grant.description)}: {ENDS_PROCESS}. "
                    f"To go on: /revoke {grant_id} confirm"
                )
            await self._store.grants.revoke(grant, actor, how="agent process ended")
            await self._end_process(session)
            return f"Grant {grant_id} revoked: {ENDS_PROCESS}."
        if kind is GrantKind.OPENCODE_SERVER:
            return await self._revoke_opencode(session, entry, actor, then)
        if kind is GrantKind.CODEX_RULE:
            line = await self._rule_line(session, entry)
            if line is None:
                return (
                    f"Grant {grant_id} is a rule Codex keeps in {self._rules_path(session)}, "
                    "but no line there allows that command any more: it may have been "
                    "removed by hand."
                )
            if then != "remove":
                return (
                    f"Grant {grant_id} is line {line.number} of {line.path}:\n{line.text}\n"
                    f"/revoke {grant_id} remove deletes that line; the agent process, which "
                    "holds the rule too, is ended, and your next message resumes the "
                    "conversation without it."
                )
            if not remove_rule_line(line):
                return f"{line.path} changed meanwhile: nothing was removed. /revoke {grant_id}"
            await self._store.grants.revoke(
                grant, actor, how=f"line {line.number} removed from {line.path}"
            )
            await self._end_process(session)
            return (
                f"Grant {grant_id} revoked: line {line.number} removed from {line.path}; "
                f"{ENDS_PROCESS}."
            )
        return f"Grant {grant_id} is kept in {self._settings_place(session)}."

    async def _change(self, entry: ProjectGrant) -> SettingChange | None:
        """The setting change (a looser /mode) the grant is, or None for an agent's grant."""
        interaction = await self._store.interactions.get(entry.grant.interaction_id)
        return change_of(interaction) if interaction is not None else None

    async def _revoke_setting(
        self, session: SessionRecord, entry: ProjectGrant, change: SettingChange, actor: Actor
    ) -> str:
        """A looser mode taken back: the setting is what it was before it was granted, from
        the agent's next turn (tightening needs no confirmation, and ends no process)."""
        words = change.setting.replace("_", " ")
        await self._store.settings.choose(session.id, change.setting, change.before or None)
        await self._store.grants.revoke(entry.grant, actor, how=f"{words} back to {change.before}")
        return (
            f"Grant {entry.grant.id} revoked: the {words} is {change.before} again from the "
            "agent's next turn."
        )

    async def _revoke_opencode(
        self, session: SessionRecord, entry: ProjectGrant, actor: Actor, then: str
    ) -> str:
        """An OpenCode "always": its saved permissions are deleted, and the server, which
        holds the grant in its memory too, is ended; a server the gateway only attaches to
        (``url``) is not the gateway's to end, which is said before and after."""
        grant = entry.grant
        url = self._config.projects[session.project].agent_options.url
        stays = (
            f"the OpenCode server at {url} is not the gateway's to end, and it holds the "
            "grant in its memory until it is restarted"
        )
        if then != "confirm":
            ends = f", but {stays}" if url is not None else f" and {ENDS_SERVER}"
            return (
                f"Revoking {quoted(grant.description)}: any permission OpenCode saved for it "
                f"is deleted{ends}. To go on: /revoke {grant.id} confirm"
            )
        try:
            deleted = await self._remove_saved(session, entry)
        except AgentError as exc:  # its saved permissions could outlive the server
            log.warning("revoking grant %s: %s", grant.id, exc)
            return f"OpenCode's saved permissions could not be read: nothing was revoked ({exc})."
        ids = ", ".join(deleted)
        if url is not None:
            how = f"saved permission {ids or 'none'} deleted; attached server not ended"
            await self._store.grants.revoke(grant, actor, how=how)
            return (
                f"Grant {grant.id} revoked in the ledger (saved permissions deleted: "
                f"{ids or 'none'}); {stays}."
            )
        how, said = "OpenCode server ended", ENDS_SERVER
        if deleted:
            how = f"saved permission {ids} deleted; {how}"
            said = f"OpenCode's saved permission {ids} is deleted, and {ENDS_SERVER}"
        await self._store.grants.revoke(grant, actor, how=how)
        await self._end_process(session)
        return f"Grant {grant.id} revoked: {said}."

    async def _remove_saved(self, session: SessionRecord, entry: ProjectGrant) -> list[str]:
        """Delete what the OpenCode server saved for the grant; the ids deleted."""
        runner = self._runner_of(session.id)
        agent = runner.agent if runner is not None else None
        interaction = await self._store.interactions.get(entry.grant.interaction_id)
        if not isinstance(agent, SavesPermissions) or interaction is None:
            return []
        permission, patterns = opencode_permission(interaction, entry.grant.action_id)
        if not patterns:
            return []
        return await agent.remove_saved_permissions(permission, patterns)

    async def _end_process(self, session: SessionRecord) -> None:
        runner = self._runner_of(session.id)
        agent = runner.agent if runner is not None else None
        if agent is not None:
            await agent.stop()
