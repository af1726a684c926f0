"""What the Bot API accepts: its request parameters, its HTML parse mode and its limits.

Telegram's HTML parse mode (https://core.telegram.org/bots/api#html-style) is parsed as the
Bot API parses it (tdlib's ``parse_html``, td/telegram/MessageEntity.cpp), with its errors:
an unsupported tag, an end tag that does not match, a start tag never closed, a ``<`` that
does not start a tag. :func:`parse_html` gives what a person sees and the message entities.

Stricter than the real server where it would silently change the message, so that
everything the gateway sends reads exactly as meant (each refusal says "strict"):

- a ``&`` that is not one of the documented entities (``&lt; &gt; &amp; &quot;`` and numeric
  ones; the server shows it as written, the documentation says to escape it);
- an attribute Telegram ignores, or a language on a ``<code>`` that is not a ``<pre>``'s;
- a link to anything but http(s) or tg:// (the server drops the link);
- entities nested as Telegram does not allow ("Formatting options", tdlib's
  ``are_entities_valid``; the server drops or splits them): nothing inside ``<code>`` or
  ``<pre>`` but the ``<code class="language-…">`` spanning a ``<pre>``; ``<code>`` and
  ``<pre>`` inside nothing but a blockquote; no link in a link; no blockquote in a blockquote
  or a link; no entity inside another of its own kind;
- a ``<tg-time>`` (the ``date_time`` entity, Bot API 9.5) without a ``unix`` time, or with a
  ``format`` that is not ``r`` or ``w?[dD]?[tT]?`` ("Date-time entity formatting").

The limits apply to the text *after* the entities are parsed, its surrounding white space
trimmed: :func:`visible_text` is what a person sees.
"""

from __future__ import annotations

import json
import re
from typing import Any

from aiohttp import web

__all__ = [
    "HtmlError",
    "Refused",
    "chat_id_of",
    "check_entities",
    "check_markup",
    "check_text",
    "error",
    "params_of",
    "parse_html",
    "visible_text",
]

_JSON_FIELDS = frozenset(
    "reply_markup reply_parameters link_preview_options commands allowed_updates entities"
    " scope".split()
)

_ENTITY_OF_TAG = {
    "b": "bold",
    "strong": "bold",
    "i": "italic",
    "em": "italic",
    "u": "underline",
    "ins": "underline",
    "s": "strikethrough",
    "strike": "strikethrough",
    "del": "strikethrough",
    "tg-spoiler": "spoiler",
    "span": "spoiler",
    "tg-emoji": "custom_emoji",
    "code": "code",
    "pre": "pre",
    "a": "text_link",
    "blockquote": "blockquote",
    "tg-time": "date_time",
}
_ATTRIBUTES = {
    "a": {"href"},
    "code": {"class"},
    "span": {"class"},
    "tg-emoji": {"emoji-id"},
    "blockquote": {"expandable"},
    "tg-time": {"unix", "format"},
}
_TIME_FORMAT = re.compile(r"^(?:r|w?[dD]?[tT]?)$")
_CHAR_ENTITY = re.compile(r"&(?:(lt|gt|amp|quot)|#([0-9]{1,7})|#x([0-9a-fA-F]{1,6}));")
_NAMED = {"lt": "<", "gt": ">", "amp": "&", "quot": '"'}
_LINK = re.compile(r"(?i)^(https?://[^\s]+|tg://[^\s]+)$")
_SPACE = " \t\n\r\f\v"


class HtmlError(ValueError):
    pass


def _refuse(why: str) -> HtmlError:
    return HtmlError(f"Bad Request: can't parse entities: {why}")


def _utf16(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


class _Open:
    __slots__ = ("argument", "kind", "start", "tag", "text_at")

    def __init__(self, tag: str, argument: str, start: int, text_at: int) -> None:
        self.tag, self.kind, self.argument = tag, _ENTITY_OF_TAG[tag], argument
        self.start, self.text_at = start, text_at


def _decode_entity(text: str, at: int) -> tuple[str, int] | None:
    match = _CHAR_ENTITY.match(text, at)
    if match is None:
        return None
    if match[1]:
        return _NAMED[match[1]], match.end()
    code = int(match[2]) if match[2] else int(match[3], 16)
    if code == 0 or code >= 0x10FFFF:
        return None
    return chr(code), match.end()


def _attributes(text: str, i: int, tag: str, begin: int) -> tuple[dict[str, str], int]:
    """The attributes of a start tag from ``i`` (tdlib's reading), and where its ``>`` is."""
    found: dict[str, str] = {}
    while text[i : i + 1] != ">":
        while i < len(text) and text[i] in _SPACE:
            i += 1
        if text[i : i + 1] == ">":
            break
        name_at = i
        while i < len(text) and text[i] not in _SPACE + "=>/\"'":
            i += 1
        name = text[name_at:i]
        if not name:
            raise _refuse(f'Empty attribute name in the tag "{tag}" at byte offset {begin}')
        while i < len(text) and text[i] in _SPACE:
            i += 1
        if text[i : i + 1] != "=":
            if i >= len(text):
                raise _refuse(f'Unclosed start tag "{tag}" at byte offset {begin}')
            found[name] = ""
            continue
        i += 1
        while i < len(text) and text[i] in _SPACE:
            i += 1
        if i >= len(text):
            raise _refuse(f'Unclosed start tag "{tag}" at byte offset {begin}')
        if text[i] not in "\"'":
            value_at = i
            while i < len(text) and (text[i].isalnum() or text[i] in ".-"):
                i += 1
            value = text[value_at:i].lower()
            if i >= len(text) or (text[i] not in _SPACE and text[i] != ">"):
                raise _refuse(f"Unexpected end of name token at byte offset {value_at}")
        else:
            end_character = text[i]
            i += 1
            value_chars = []
            while i < len(text) and text[i] != end_character:
                decoded = _decode_entity(text, i) if text[i] == "&" else None
                if decoded is not None:
                    value_chars.append(decoded[0])
                    i = decoded[1]
                else:
                    value_chars.append(text[i])
                    i += 1
            i += 1  # the closing quote
            value = "".join(value_chars)
        if i >= len(text):
            raise _refuse(f"Unclosed start tag at byte offset {begin}")
        found[name] = value
    return found, i


def _check_start(tag: str, attributes: dict[str, str], stack: list[_Open], text_at: int) -> str:
    """The entity's argument; the strict checks of a start tag against what is open."""
    allowed = _ATTRIBUTES.get(tag, set())
    unknown = set(attributes) - allowed
    if unknown:
        raise _refuse(f"(strict) attribute {sorted(unknown)[0]!r} of <{tag}> is ignored")
    argument = ""
    if tag == "a":
        argument = attributes.get("href", "")
        if not _LINK.match(argument):
            raise _refuse(f"(strict) the link {argument!r} would be dropped")
    elif tag == "code" and "class" in attributes:
        css = attributes["class"]
        if not css.startswith("language-"):
            raise _refuse(f"(strict) class {css!r} of <code> is ignored")
        argument = css.removeprefix("language-")
    elif tag == "span":
        if attributes.get("class") != "tg-spoiler":
            raise _refuse('Tag "span" must have class "tg-spoiler"')
    elif tag == "tg-time":
        unix, fmt = attributes.get("unix", ""), attributes.get("format", "")
        if not unix.isdigit():
            raise _refuse('Tag "tg-time" must have attribute "unix" with a Unix time')
        if not _TIME_FORMAT.match(fmt):
            raise _refuse(f'Invalid date-time format {fmt!r} of tag "tg-time"')
        argument = f"{unix} {fmt}"
    kind = _ENTITY_OF_TAG[tag]
    parent = stack[-1] if stack else None
    in_pre = parent is not None and parent.kind == "pre" and parent.text_at == text_at
    if tag == "code" and argument and not in_pre:
        raise _refuse("(strict) a language is only given to a <code> spanning a <pre>")
    for outer in stack:
        if outer.kind in ("code", "pre") and not (tag == "code" and in_pre and outer is parent):
            raise _refuse(f"(strict) <{tag}> inside <{outer.tag}> would be dropped")
        if kind in ("code", "pre") and outer.kind != "blockquote" and not in_pre:
            raise _refuse(f"(strict) <{tag}> may be inside a blockquote only, not <{outer.tag}>")
        if outer.kind == kind:
            raise _refuse(f"(strict) <{tag}> inside <{outer.tag}>: the same entity twice")
        if kind == "blockquote" and outer.kind == "text_link":
            raise _refuse("(strict) a blockquote inside a link would be dropped")
    return argument


def parse_html(text: str) -> tuple[str, list[dict[str, Any]]]:
    """What a person sees of an HTML message, and its entities (offsets in UTF-16 units);
    HtmlError where the Bot API (or the strict checks above) refuse it."""
    out: list[str] = []
    entities: list[dict[str, Any]] = []
    stack: list[_Open] = []
    offset = 0  # UTF-16 units of visible text so far
    seen = 0  # characters of visible text so far
    i, size = 0, len(text)
    while i < size:
        char = text[i]
        if char == "&":
            decoded = _decode_entity(text, i)
            if decoded is None:
                raise _refuse(f"(strict) an unescaped '&' at byte offset {i}")
            out.append(decoded[0])
            offset += _utf16(decoded[0])
            seen += 1
            i = decoded[1]
            continue
        if char != "<":
            out.append(char)
            offset += _utf16(char)
            seen += 1
            i += 1
            continue
        begin = i
        i += 1
        if text[i : i + 1] != "/":
            name_at = i
            while i < size and text[i] not in _SPACE and text[i] != ">":
                i += 1
            if i >= size:
                raise _refuse(f"Unclosed start tag at byte offset {begin}")
            tag = text[name_at:i].lower()
            if tag not in _ENTITY_OF_TAG:
                raise _refuse(f'Unsupported start tag "{tag}" at byte offset {begin}')
            attributes, i = _attributes(text, i, tag, begin)
            argument = _check_start(tag, attributes, stack, seen)
            stack.append(_Open(tag, argument, offset, seen))
            i += 1  # the ">"
            continue
        if not stack:
            raise _refuse(f"Unexpected end tag at byte offset {begin}")
        name_at = i + 1
        while i < size and text[i] not in _SPACE and text[i] != ">":
            i += 1
        end_tag = text[name_at:i].lower()
        while i < size and text[i] in _SPACE:
            i += 1
        if i >= size or text[i] != ">":
            raise _refuse(f"Unclosed end tag at byte offset {begin}")
        i += 1
        opened = stack.pop()
        if end_tag and end_tag != opened.tag:
            raise _refuse(
                f'Unmatched end tag at byte offset {begin}, expected "</{opened.tag}>", '
                f'found "</{end_tag}>"'
            )
        if offset > opened.start:
            entity: dict[str, Any] = {
                "type": opened.kind,
                "offset": opened.start,
                "length": offset - opened.start,
            }
            if opened.kind == "text_link":
                entity["url"] = opened.argument
            if opened.kind == "date_time":
                unix, fmt = opened.argument.split(" ")
                entity["unix_time"] = int(unix)
                if fmt:
                    entity["date_time_format"] = fmt
            last = entities[-1] if entities else None
            same_span = (
                last is not None
                and last["offset"] == entity["offset"]
                and last["length"] == entity["length"]
            )
            if opened.kind == "pre" and same_span and last is not None and last["type"] == "code":
                last["type"] = "pre"  # <pre><code class="language-x">: one pre entity
                if not last.get("language"):
                    last.pop("language", None)
                continue
            if opened.kind == "code" and opened.argument:
                entity["language"] = opened.argument
            entities.append(entity)
    if stack:
        raise _refuse(f'Can\'t find end tag corresponding to start tag "{stack[-1].tag}"')
    for entity in entities:
        if entity["type"] == "code":
            entity.pop("language", None)  # a language only counts on a pre
    entities.sort(key=lambda e: (e["offset"], -e["length"]))
    return "".join(out), entities


def visible_text(text: str) -> str:
    """The text a person sees; HtmlError where the Bot API would refuse to parse it."""
    return parse_html(text)[0]


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


def check_entities(text: str, parse_mode: str | None) -> tuple[str, list[dict[str, Any]]]:
    """A message's text as Telegram keeps it (what a person sees, and its entities), or
    the Bot API's refusal. Only the HTML parse mode is understood (the gateway's)."""
    if parse_mode not in (None, "", "HTML"):
        raise Refused(400, f"Bad Request: unsupported parse_mode {parse_mode!r} in this fake")
    try:
        visible, entities = parse_html(text) if parse_mode == "HTML" else (text, [])
    except HtmlError as exc:
        raise Refused(400, str(exc)) from None
    if not visible.strip():
        raise Refused(400, "Bad Request: message text is empty")
    if len(visible.strip()) > 4096:
        raise Refused(400, "Bad Request: message is too long")
    return visible, entities


def check_text(text: str, parse_mode: str | None) -> str:
    return check_entities(text, parse_mode)[0]


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
