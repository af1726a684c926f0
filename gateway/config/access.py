"""Who may talk and who may decide, read off the configuration (DESIGN.md, Authorization).

Pure functions on plain data; fail closed: a person not listed for a project on their
platform may do nothing. The buttons' tokens are :mod:`gateway.action_tokens`.
"""

from __future__ import annotations

from collections.abc import Collection

from gateway.action_tokens import ActionToken, Rejection, check_token_current
from gateway.config.model import Config, PlatformAuth
from gateway.config.people import People
from gateway.config.policy_rules import resolve_approvers
from gateway.domain import Actor, InteractionState

__all__ = [
    "ROLE_PREFIX",
    "approver_ids",
    "check_click",
    "may_decide",
    "may_schedule",
    "may_talk",
    "stranger_refusal",
]

_ANYONE = "*"
ROLE_PREFIX = "role:"  # an auth entry naming a role (Discord): everyone who holds it


def _rules(config: Config, project: str, actor: Actor) -> PlatformAuth | None:
    settings = config.projects.get(project)
    return None if settings is None else settings.auth.get(actor.platform)


def _listed(entries: Collection[str], actor: Actor) -> bool:
    """``actor`` is in ``entries``: by user id, or by a role they hold (``role:<id>``).

    Roles fail closed: an actor seen without a member (a DM) holds none, and a user id
    that looks like a role entry never matches one."""
    if _ANYONE in entries:
        return True
    if not actor.user_id.startswith(ROLE_PREFIX) and actor.user_id in entries:
        return True
    return any(f"{ROLE_PREFIX}{role}" in entries for role in actor.roles if role)


def may_talk(config: Config, project: str, actor: Actor) -> bool:
    """Fail closed: only people listed in the project's allow_from for their platform
    (by user id, or ``role:<id>`` for a role they hold)."""
    rules = _rules(config, project, actor)
    if rules is None:
        return False
    return _listed(rules.allow_from, actor)


def stranger_refusal(actor: Actor) -> str:
    """What a person who may not talk is told in their private conversation with the bot:
    their id on that platform, which is what ``allow_from`` takes and what they have no
    other way to find (no project name: a stranger learns nothing of the config). In a
    shared conversation they are told nothing (gateway/sessions/control.py)."""
    platform = actor.platform.capitalize()
    return (
        f"You are not allowed to use this bot. Your {platform} id is {actor.user_id}: ask its "
        f'owner to add "{actor.user_id}" to allow_from in the project\'s auth.{actor.platform} '
        "settings."
    )


def may_decide(config: Config, project: str, actor: Actor, session_initiator: Actor | None) -> bool:
    """May talk, and is an approver: listed (by id or role), or ``"*"``, or (by default)
    the initiator."""
    if not may_talk(config, project, actor):
        return False
    rules = _rules(config, project, actor)
    if rules is None:  # pragma: no cover - may_talk already said no
        return False
    if rules.approvers is None:
        return session_initiator is not None and session_initiator.key() == actor.key()
    return _listed(rules.approvers, actor)


def may_schedule(config: Config, project: str, actor: Actor, creator: Actor) -> bool:
    """May make, change or delete a schedule of ``creator``'s in ``project`` (issue 35): an
    approver of the project (where it names none: the creator), or one of its
    ``schedulers`` (accounts, people, groups) who may talk to it."""
    if may_decide(config, project, actor, creator):
        return True
    settings = config.projects.get(project)
    if settings is None or not settings.schedulers or not may_talk(config, project, actor):
        return False
    people = People(config.people)
    return people.of(actor) in resolve_approvers(settings.schedulers, config.groups, people)


def approver_ids(
    config: Config, project: str, platform: str, session_initiator: Actor | None
) -> tuple[str, ...]:
    """Who may decide the session's requests on ``platform`` (its auth table's name), by
    their ids there: the listed approvers who may talk, else (none listed) the initiator;
    nobody for ``"*"`` (anyone: a platform mentions nobody then). A listed role stays as
    ``role:<id>`` when allow_from lets it talk (``"*"`` or the same role): the platform
    mentions the role."""
    settings = config.projects.get(project)
    rules = None if settings is None else settings.auth.get(platform)
    if rules is None:
        return ()
    if rules.approvers is None:
        if session_initiator is None or session_initiator.platform != platform:
            return ()
        listed: tuple[str, ...] = (session_initiator.user_id,)
    elif _ANYONE in rules.approvers:
        return ()
    else:
        listed = tuple(dict.fromkeys(rules.approvers))
    return tuple(
        user
        for user in listed
        if (
            _ANYONE in rules.allow_from or user in rules.allow_from
            if user.startswith(ROLE_PREFIX)
            else may_talk(config, project, Actor(platform=platform, user_id=user, display=user))
        )
    )


def check_click(
    config: Config,
    *,
    token: ActionToken,
    actor: Actor,
    project: str,
    session_id: str,
    sessions_shown: Collection[str],
    session_initiator: Actor | None,
    interaction_epoch: int,
    interaction_state: InteractionState,
) -> Rejection | None:
    """Everything a verified click must pass, in order; None when it may be decided.

    ``sessions_shown`` are the sessions bound to the conversation the click came from.
    Who-may checks come before state so that a stranger learns nothing about the request.
    """
    if session_id not in sessions_shown:
        return Rejection.FOREIGN
    if not may_talk(config, project, actor):
        return Rejection.NOT_ALLOWED
    if not may_decide(config, project, actor, session_initiator):
        return Rejection.NOT_APPROVER
    return check_token_current(token, interaction_epoch, interaction_state)
