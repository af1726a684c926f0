"""The console's pages as HTML (pure): sessions, the pending center, one conversation.

Each page has the same frame: a top bar with live counts, a notice line, and the live
regions (``data-live``) whose children carry ``data-key``/``data-version`` so that the
script can merge a fresh copy of the page into the open one (see ``assets.py``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from html import escape
from urllib.parse import quote

from gateway.domain import Command, InteractionState, RunState
from gateway.interactions.machine import run_state_words
from gateway.render.markdown import console_html
from gateway.session_record import SessionRecord
from gateway.sessions.platform_problems import PlatformProblem
from gateway.wording import file_size
from platforms.console.assets import SCRIPT, STYLE
from platforms.console.cards_html import (
    PostContext,
    card_html,
    clock,
    notice_html,
    state_class,
)
from platforms.console.highlight import highlight_code
from platforms.console.security import Notice
from platforms.console.views import (
    CardView,
    NoticeItem,
    SessionRow,
    TextItem,
    agent_name,
    person_name,
    platform_name,
)

__all__ = [
    "GATEWAY_LABEL",
    "Frame",
    "Notices",
    "agent_where",
    "conversation_page",
    "message_html",
    "pending_page",
    "refused_page",
    "sessions_page",
]


class Notices:
    """What the POSTs of a browser without script answered, shown once: each refusal next to
    the form it concerns (taken by the part of the page that draws that form), the rest at
    the top of the page (successes as a status, refusals as an alert)."""

    def __init__(self, notices: Sequence[Notice] = ()) -> None:
        self._left = list(notices)

    def take(self, about: str) -> list[str]:
        """The refusals about ``about`` (a card's ``i-<id>``, or ``say``), now placed."""
        taken = [n.text for n in self._left if n.refused and n.about == about]
        self._left = [n for n in self._left if not (n.refused and n.about == about)]
        return taken

    def html(self) -> str:
        return "".join(
            f'<div class="refused" role="alert">{escape(n.text)}</div>'
            if n.refused
            else f"<div>{escape(n.text)}</div>"
            for n in self._left
        )


def refusals_html(texts: Sequence[str]) -> str:
    return "".join(f'<p class="refusal" role="alert">{escape(text)}</p>' for text in texts)


class Frame:
    """What every page shows around its content."""

    def __init__(
        self,
        *,
        identity: str,
        pending: int,
        sessions: int,
        notices: Sequence[Notice] = (),
        problems: Sequence[PlatformProblem] = (),
    ) -> None:
        self.identity = identity
        self.pending = pending
        self.sessions = sessions
        self.notices = Notices(notices)
        self.problems = tuple(problems)

    def page(self, title: str, here: str, body: str) -> str:
        def link(href: str, label: str, count: int, hot: bool = False) -> str:
            css = ' class="here"' if href == here else ""
            badge = f'<span class="count{" hot" if hot and count else ""}">{count}</span>'
            return f'<a href="{href}"{css}>{label}{badge}</a>'

        counts = (
            f'<span data-key="nav" data-version="{self.sessions}-{self.pending}">'
            f"{link('/', 'Sessions', self.sessions)} &nbsp; "
            f"{link('/pending', 'Pending', self.pending, hot=True)}</span>"
        )
        notice = self.notices.html()  # after the body took the refusals it places
        # the tab says how many requests wait, read from another tab (the script keeps it)
        waiting = f"({self.pending}) " if self.pending else ""
        return (
            "<!doctype html><html lang=en><head><meta charset=utf-8>"
            '<meta name="viewport" content="width=device-width,initial-scale=1">'
            f'<link rel="icon" href="data:,"><title>{waiting}{escape(title)} · agent-gateway'
            f"</title><style>{STYLE}</style></head><body>"
            '<header class="top"><strong class="brand">agent-gateway</strong>'
            f'<nav id="nav" data-live>{counts}</nav>'
            f'<span class="who">acting as {escape(person_name(self.identity))}</span></header>'
            f'<main>{problems_html(self.problems)}<div id="notice" role="status">{notice}</div>'
            f"{body}</main>"
            f"<script>{SCRIPT}</script></body></html>"
        )


def problems_html(problems: Sequence[PlatformProblem]) -> str:
    """What the platforms refused for good (platform_problems.py), on every page until the
    gateway restarts, and on pages already open as it happens: a person at the console
    learns why a chat shows nothing new."""
    section = ""
    if problems:
        items = "".join(f"<li>{clock(p.at)} {escape(p.text)}</li>" for p in problems)
        # the list only changes by a new problem at its end (the oldest may go first)
        version = f"{len(problems)}-{problems[0].at.timestamp()}-{problems[-1].at.timestamp()}"
        section = (
            f'<section class="problems" role="alert" data-key="problems" data-version="{version}">'
            f"<strong>A platform refused for good</strong><ul>{items}</ul></section>"
        )
    # always there, even empty: a live page shows the first problem without a reload
    return f'<div id="problems" data-live>{section}</div>'


def refused_page(status: int, text: str) -> str:
    return (
        f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{status}</title>"
        f"<style>{STYLE}</style></head><body><main><h1>{status}: {escape(text)}</h1>"
        "<p>Open the console with the address printed in the terminal where the gateway "
        "started (it ends in <code>?token=…</code>).</p></main></body></html>"
    )


# --- sessions ------------------------------------------------------------------------------


def _session_row(row: SessionRow) -> str:
    session = row.session
    state = escape(row.state)
    waiting = f"{row.open_count} open" if row.open_count else ""
    # the chats that show it besides this console (a person's words, not the config's)
    shown = ", ".join(escape(platform_name(p)) for p in row.shown_on if p != "console") or "—"
    version = f"{row.state}-{row.open_count}-{len(row.shown_on)}"
    return (
        f'<tr data-key="s-{escape(session.id)}" data-version="{escape(version)}">'
        f'<td><a href="/s/{escape(session.id)}" title="session {escape(session.id)}">'
        f"{escape(row.title)}</a></td>"
        f'<td class="wide">{escape(agent_where(session))}</td>'
        f'<td><span class="state {state_class(row.state)}">{state}</span> {waiting}</td>'
        f'<td class="wide">{shown}</td><td>{clock(session.created_at)}</td></tr>'
    )


def agent_where(session: SessionRecord) -> str:
    """Its agent, and the host it runs on where several hosts share the ledger."""
    kind = agent_name(session.agent_kind)
    return kind if session.host is None else f"{kind} on host {session.host}"


def _suggestions(words: Sequence[tuple[str, str]]) -> str:
    """Words the agent answers to (the demo's scenarios), each a button that starts the
    conversation with it: a newcomer sees what to type, and can just click."""
    if not words:
        return ""
    buttons = "".join(
        f'<button type="submit" name="word" value="{escape(word)}" formnovalidate'
        f' title="{escape(about)}">{escape(word)}</button>'
        for word, about in words
    )
    told = "; ".join(f"<b>{escape(word)}</b>: {escape(about)}" for word, about in words)
    return (
        f'<div class="try"><span>Try one of the agent\'s words:</span> {buttons}</div>'
        f'<p class="meta">{told}. Anything else shows its menu.</p>'
    )


def _new_form(
    projects: Sequence[str], ctx: PostContext, words: Sequence[tuple[str, str]], refused: str
) -> str:
    if not projects:
        return (
            '<p class="empty">No project takes messages from the console: list its identity '
            "in a project's allow_from.</p>"
        )
    options = "".join(f"<option>{escape(p)}</option>" for p in projects)
    return (
        '<h2>Start a conversation</h2><form class="say start" id="say" method="post"'
        ' action="/new" enctype="multipart/form-data"'
        f' data-enhance>{ctx.hidden()}<select name="project" aria-label="project">{options}'
        '</select><textarea name="text" aria-label="first message"'
        ' placeholder="What should the agent do?"></textarea>'
        '<input type="file" name="files" multiple aria-label="files for the agent">'
        f'<button type="submit" class="primary">Start</button>{_suggestions(words)}</form>'
        f"{refused}"
    )


def sessions_page(
    frame: Frame,
    rows: Sequence[SessionRow],
    projects: Sequence[str],
    ctx: PostContext,
    *,
    words: Sequence[tuple[str, str]] = (),
) -> str:
    body = "".join(_session_row(row) for row in rows)
    if not rows:
        body = '<tr data-key="none" data-version="0"><td colspan=5 class="empty">No sessions yet.'
        body += "</td></tr>"
    table = (
        '<table class="sessions"><thead><tr><th>Session</th><th class="wide">Agent</th>'
        '<th>State</th><th class="wide">Also in</th><th>Started</th></tr></thead>'
        f'<tbody id="rows" data-live>{body}</tbody></table>'
    )
    start = _new_form(projects, ctx, words, refusals_html(frame.notices.take("say")))
    listed = "<h2>Every session</h2>" if projects else ""
    return frame.page("Sessions", "/", f"<h1>Sessions</h1>{start}{listed}{table}")


# --- pending -------------------------------------------------------------------------------


def pending_page(
    frame: Frame, views: Sequence[CardView], closed: Sequence[CardView], ctx: PostContext
) -> str:
    def card(view: CardView) -> str:
        refused = frame.notices.take(f"i-{view.interaction.id}")
        return card_html(view, ctx, with_session=True, refusals=refused)

    cards = "".join(card(view) for view in views)
    if not views:
        cards = '<p class="empty" data-key="none" data-version="0">Nothing waits for anyone.</p>'
    if closed:
        cards += '<h2 data-key="closed" data-version="0">Recently closed</h2>'
        cards += "".join(card(view) for view in closed)
    intro = (
        '<p class="meta">Every open request of every session, on every platform. A decision '
        "taken here is the same decision everywhere: the first one counts.</p>"
    )
    return frame.page(
        "Pending", "/pending", f'<h1>Pending</h1>{intro}<div id="live" data-live>{cards}</div>'
    )


# --- one conversation ----------------------------------------------------------------------

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")  # terminal colours
GATEWAY_LABEL = "agent-gateway"  # over the gateway's own messages
# Marks the gateway writes that only an emoji font draws (without one, a box): the console
# writes each as a character every text font has.
_TEXT_MARKS = str.maketrans({"\u23f9": "\u25a0"})  # ⏹ (stop button) → ■


def _text_marks(text: str) -> str:
    return text.translate(_TEXT_MARKS)


def _file_html(item: TextItem) -> str:
    """A file the agent sent: a picture inline, and always a link to download it."""
    assert item.file is not None
    name, media_type, size = item.file
    url = f"/f/{quote(item.id)}"
    picture = (
        f'<img class="sent-file" src="{escape(url)}" alt="{escape(name)}">'
        if media_type in ("image/png", "image/jpeg", "image/gif", "image/webp")
        else ""
    )
    link = (
        f'<a class="sent-file" href="{escape(url)}?download=1" download="{escape(name)}">'
        f"📎 {escape(name)}</a> ({escape(file_size(size))})"
    )
    return f"{picture}<div>{link}</div>"


def message_html(item: TextItem) -> str:
    """A message: the agent's (its text, tool lines, notices) drawn from its Markdown by
    the shared renderer, the person's own as they typed it."""
    text = _ANSI.sub("", item.text)
    if item.from_gateway:
        # the gateway's own words (notices, /status, /help): labelled and drawn apart, so
        # that they are never taken for the agent's
        css, who = "msg md gateway", f'<span class="who">{GATEWAY_LABEL}</span>'
        body = console_html(_text_marks(text.strip()), highlight_code)
    elif item.author is None:
        css, who, body = "msg md", "", console_html(_text_marks(text.strip()), highlight_code)
    else:
        css, who = "msg mine", f'<span class="who">{escape(item.author)}</span>'
        body = escape(text.strip())
    if item.file is not None:
        body = _file_html(item) + body
    return (
        f'<div class="{css}" data-key="t-{escape(item.id)}" data-version="{item.version}">'
        f"{who}{body}</div>"
    )


def without_waiting_tool_lines(
    items: Sequence[TextItem | NoticeItem | CardView],
) -> list[TextItem | NoticeItem | CardView]:
    """The conversation without the running tool line ("▸ `command`") of a command whose
    card waits just below it: the card shows the command, and the line said it again
    (once the card is answered the line comes back, with how the command ended). A message
    left with nothing is left out; one that lost a line changes its version, so that a live
    page draws it again when the line comes back."""
    shown: list[TextItem | NoticeItem | CardView] = []
    for at, item in enumerate(items):
        after = items[at + 1] if at + 1 < len(items) else None
        if not isinstance(item, TextItem) or item.author is not None or item.from_gateway:
            shown.append(item)
            continue
        if (
            not isinstance(after, CardView)
            or after.interaction.state is not InteractionState.PENDING
        ):
            shown.append(item)
            continue
        detail = after.interaction.detail
        if not isinstance(detail, Command):
            shown.append(item)
            continue
        line = f"▸ `{detail.command}`"
        kept = [row for row in item.text.split("\n") if row.strip() != line]
        if len(kept) == len(item.text.split("\n")):
            shown.append(item)
        elif "".join(kept).strip():
            text = "\n".join(kept)
            shown.append(replace(item, text=text, version=f"{item.version}-waiting"))
    return shown


# the run states in which a turn runs (its agent may wait on a card): what Stop stops
_TURN_RUNS = frozenset(
    run_state_words(state)
    for state in (RunState.RUNNING, RunState.WAITING_APPROVAL, RunState.WAITING_INPUT)
)


def _stop_button(session: SessionRecord, ctx: PostContext) -> str:
    """/stop as a button, beside the session's state while a turn runs: what a person
    looks for to stop it, where typing /stop is a thing to know."""
    return (
        f' <form class="stop" data-key="stop" data-version="0" method="post"'
        f' action="/s/{escape(session.id)}/say" data-enhance>{ctx.hidden()}'
        '<input type="hidden" name="text" value="/stop">'
        '<button type="submit" class="danger" title="Stop the turn (/stop)">'
        "Stop</button></form>"
    )


def conversation_page(
    frame: Frame,
    session: SessionRecord,
    title: str,
    state: str,
    items: Sequence[TextItem | NoticeItem | CardView],
    ctx: PostContext,
    *,
    typing_refused: str | None,
    usage: str | None = None,
    start_failure: str | None = None,
) -> str:
    def card(view: CardView) -> str:
        return card_html(view, ctx, refusals=frame.notices.take(f"i-{view.interaction.id}"))

    def drawn(item: TextItem | NoticeItem | CardView) -> str:
        if isinstance(item, TextItem):
            return message_html(item)
        if isinstance(item, NoticeItem):
            refusals = frame.notices.take(f"m-{item.id}")
            return notice_html(item.id, item.card, item.version, ctx, refusals)
        return card(item)

    feed = "".join(drawn(item) for item in without_waiting_tool_lines(items))
    if not items:
        feed = '<p class="empty" data-key="none" data-version="0">Nothing here yet.</p>'
    head = (
        f'<span data-key="state" data-version="{escape(state)}" class="state '
        f'{state_class(state)}">{escape(state)}</span>'
    )
    if start_failure is not None:  # the agent did not start: why, and what to do
        head += (
            f' <span data-key="start-failure" data-version="{escape(start_failure)}" '
            f'class="start-failure meta">{escape(start_failure)}</span>'
        )
    if usage is not None:  # tokens in and out, the context used (gateway/sessions/usage.py)
        head += (
            f' <span data-key="usage" data-version="{escape(usage)}" class="usage meta">'
            f"{escape(usage)}</span>"
        )
    if typing_refused is None and state in _TURN_RUNS:
        head += _stop_button(session, ctx)
    # the session's id is for commands and logs: on the page only where a pointer rests
    heading = (
        f'<h1>{escape(title)} <span id="head" data-live>{head}</span></h1>'
        f'<p class="meta">project {escape(session.project)} · '
        f"{escape(agent_where(session))} · "
        f'<span title="session {escape(session.id)}">started {clock(session.created_at)}</span>'
        f' · <a href="/s/{escape(session.id)}/grants">grants</a></p>'
    )
    if typing_refused is None:
        # the placeholder stays short: on a phone it shares a line with nothing else
        box = (
            f'<form class="say" id="say" method="post" action="/s/{escape(session.id)}/say"'
            ' enctype="multipart/form-data" data-enhance>'
            f'{ctx.hidden()}<textarea name="text" aria-label="message"'
            ' aria-describedby="say-note" placeholder="A message for the agent"></textarea>'
            # files for the agent (issue 32): a picture goes as an image where it takes one
            '<input type="file" name="files" multiple aria-label="files for the agent">'
            '<button type="submit" class="primary">Send</button></form>'
            f"{refusals_html(frame.notices.take('say'))}"
            '<p class="meta" id="say-note">A message is never a decision: use the buttons on'
            " a card for that.</p>"
        )
    else:
        box = f'<p class="meta">{escape(typing_refused)}</p>'
    return frame.page(
        title, f"/s/{session.id}", f'{heading}<div id="live" data-live>{feed}</div>{box}'
    )
