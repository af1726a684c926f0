"""Telegram's HTML parse mode, as the Bot API checks it (https://core.telegram.org/bots/api#html-style).

Only the tags the Bot API supports are allowed, every ``<`` and ``&`` outside a tag or one of
the four named entities (or a numeric one) is an error ("can't parse entities"), tags must
nest properly, and the length limits apply to the text *after* the entities are parsed:
:func:`visible_text` is what a person sees.
"""

from __future__ import annotations

import html
import re

__all__ = ["HtmlError", "visible_text"]

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
