"""The console's grants page (issue 17): what ``/grants`` lists, with a button where the
gateway can take a grant back (gateway/sessions/grant_desk.py says what each does)."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from gateway.sessions.grant_desk import ENDS_PROCESS, GrantLine
from platforms.console.cards_html import PostContext
from platforms.console.pages import Frame

__all__ = ["grants_page"]

_WHAT_IT_DOES = {
    "confirm": f"Revoking it: {ENDS_PROCESS}.",
    "remove": "Revoking it removes that line; the agent process, which holds the rule too, is "
    "ended, and your next message resumes the conversation without it.",
}


def _grant_html(session_id: str, line: GrantLine, ctx: PostContext) -> str:
    head = (
        f'<li class="grant" data-key="g-{line.id}" data-version="0">'
        f"<strong>{line.id}. {escape(line.description)}</strong>"
        f'<p class="meta">by {escape(line.by)}, {escape(line.when)} · {escape(line.where)}</p>'
    )
    if line.then is None:
        return head + "</li>"
    return (
        f"{head}<p>{escape(_WHAT_IT_DOES[line.then])}</p>"
        f'<form method="post" action="/s/{escape(session_id)}/revoke">{ctx.hidden()}'
        f'<input type="hidden" name="grant" value="{line.id}">'
        f'<input type="hidden" name="then" value="{escape(line.then)}">'
        f'<button type="submit">{escape(line.button)}</button></form></li>'
    )


def grants_page(
    frame: Frame, session_id: str, title: str, lines: Sequence[GrantLine], ctx: PostContext
) -> str:
    if lines:
        body = "".join(_grant_html(session_id, line, ctx) for line in lines)
        listed = f'<ul class="grants">{body}</ul>'
    else:
        listed = '<p class="empty">No grant is in force.</p>'
    back = f'<p class="meta"><a href="/s/{escape(session_id)}">back to the conversation</a></p>'
    return frame.page(
        f"Grants · {title}",
        f"/s/{session_id}/grants",
        f"<h1>Grants in force</h1>{back}{listed}",
    )
