"""Which project and which session a conversation belongs to (pure)."""

from __future__ import annotations

from gateway.config.model import Config, SessionScope
from gateway.domain import Actor, ConversationRef

__all__ = ["project_for", "route_key"]

_ANY = "*"


def project_for(config: Config, conversation: ConversationRef, auth_platform: str) -> str | None:
    """The first project (in file order) whose ``channels`` for this platform match."""
    for name, project in config.projects.items():
        rules = project.auth.get(auth_platform)
        if rules is None:
            continue
        if _ANY in rules.channels or conversation.channel in rules.channels:
            return name
    return None


def route_key(scope: SessionScope, conversation: ConversationRef, actor: Actor) -> ConversationRef:
    """The key a session is routed by, given the project's scope (a route, not a place
    where anything is shown: the session is shown in the conversations bound to it).

    thread: the conversation itself; channel: the channel, whatever the thread; user: the
    person, on that platform.
    """
    if scope is SessionScope.CHANNEL:
        return ConversationRef(
            platform=conversation.platform, space=conversation.space, channel=conversation.channel
        )
    if scope is SessionScope.USER:
        return ConversationRef(platform=conversation.platform, space=None, channel=actor.user_id)
    return conversation
