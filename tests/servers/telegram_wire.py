"""What the Bot API accepts: its request parameters, its HTML parse mode and its limits.

Telegram's HTML parse mode (https://core.telegram.org/bots/api#html-style) is checked as the
Bot API checks it.

Only the tags the Bot API supports are allowed, every ``<`` and ``&`` outside a tag or one of
the four named entities (or a numeric one) is an error ("can't parse entities"), tags must
nest properly, and the length limits apply to the text *after* the entities are parsed:
:func:`visible_text` is what a person sees.
"""

from __future__ import annotations

import html
import json
import re
from typing import Any

from aiohttp import web

__all__ = [
    "HtmlError",
    "Refused",
    "chat_id_of",
    "check_markup",
    "check_text",
    "error",
    "params_of",
    "visible_text",
]

_JSON_FIELDS = frozenset(
    "reply_markup reply_parameters link_preview_options commands allowed_updates entities"
    " scope".split()
)

_TAGS = frozenset(
    "b strong i em u ins s strike del code pre a tg-spoiler span blockquote tg-emoji".split()
)
_TOKEN = re.compile(
    r"<(?P<close>/)?(?P<tag>[a-z-]+)(?P<attrs>\s[^<>]*)?>"
    r"|&(?P<entity>lt|gt|amp|quot|#[0-9]{1,7}|#x[0-9a-fA-F]{1,6});"
    r"|(?P<bad>[<&])"
)


class HtmlError(ValueError):
    pass


def visible_text(text: str) -> str:
    """The text a person sees; HtmlError where the Bot API would refuse to parse it."""
    out: list[str] = []
    stack: list[str] = []
    position = 0
    for match in _TOKEN.finditer(text):
        out.append(text[position : match.start()])
        position = match.end()
        if match["bad"] is not None:
            raise HtmlError(
                f"Bad Request: can't parse entities: unsupported start tag or unescaped "
                f"{match['bad']!r} at byte offset {match.start()}"
            )
        if match["entity"] is not None:
            out.append(html.unescape(match.group(0)))
            continue
        tag = match["tag"]
        if tag not in _TAGS:
            raise HtmlError(f'Bad Request: can\'t parse entities: unsupported start tag "{tag}"')
        if match["close"]:
            if not stack or stack[-1] != tag:
                raise HtmlError(f"Bad Request: can't parse entities: unexpected end tag {tag}")
            stack.pop()
        else:
            stack.append(tag)
    if stack:
        raise HtmlError(f"Bad Request: can't parse entities: unclosed start tag {stack[-1]}")
    out.append(text[position:])
    return "".join(out)


class Refused(Exception):
    """The Bot API refuses the request: its status, description and retry_after."""

    def __init__(self, status: int, description: str, retry_after: int | None = None) -> None:
        super().__init__(description)
        self.status, self.description, self.retry_after = status, description, retry_after


# --- requests ----------------------------------------------------------------------------


async def params_of(request: web.Request) -> dict[str, Any]:
    if request.content_type == "application/json":
        body = await request.json()
        return dict(body) if isinstance(body, dict) else {}
    if request.method == "GET":
        raw: dict[str, Any] = dict(request.query)
    else:
        raw = {}
        for key, value in (await request.post()).items():
            if isinstance(value, web.FileField):
                raw[key] = (value.filename, value.file.read())
            else:
                raw[key] = value
    for key in _JSON_FIELDS & raw.keys():
        if isinstance(raw[key], str):
            raw[key] = json.loads(raw[key])
    # a file sent by PTB as attach://name arrives as its own part
    for key, value in list(raw.items()):
        if isinstance(value, str) and value.startswith("attach://"):
            raw[key] = raw.pop(value.removeprefix("attach://"), value)
    return raw


def chat_id_of(p: dict[str, Any]) -> int:
    try:
        return int(p.get("chat_id") or 0)
    except ValueError:
        raise Refused(400, "Bad Request: chat not found") from None


def check_text(text: str, parse_mode: str | None) -> str:
    try:
        visible = visible_text(text) if parse_mode == "HTML" else text
    except HtmlError as exc:
        raise Refused(400, str(exc)) from None
    if not visible.strip():
        raise Refused(400, "Bad Request: message text is empty")
    if len(visible) > 4096:
        raise Refused(400, "Bad Request: message is too long")
    return visible


def check_markup(markup: Any) -> None:
    if markup is None:
        return
    for row in markup.get("inline_keyboard", []):
        for button in row:
            data = button.get("callback_data")
            if data is not None and not 1 <= len(data.encode()) <= 64:
                raise Refused(400, "Bad Request: BUTTON_DATA_INVALID")
            if not button.get("text"):
                raise Refused(400, "Bad Request: text buttons are unallowed in the inline keyboard")


def error(status: int, description: str, retry_after: int | None = None) -> web.Response:
    body: dict[str, Any] = {"ok": False, "error_code": status, "description": description}
    if retry_after is not None:
        body["parameters"] = {"retry_after": retry_after}
    return web.json_response(body, status=status)
