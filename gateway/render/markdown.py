"""The agent's Markdown in each surface's own format, safely: one parser, four renderers (pure).

Agents write CommonMark (with tables and ~~strike~~). It is parsed once by markdown-it-py with
raw HTML off and no linkify (a ``<script>`` or ``<!channel>`` the agent writes is text, and
only links it wrote as links are links), and its token tree is drawn for each surface:

- :func:`console_html`: an HTML fragment for the console, every character of the agent's
  escaped; links only to http(s) and mailto, opened in a new tab without referrer.
- :func:`telegram_html`: the Bot API's HTML subset (b, i, s, code, pre, a, blockquote),
  nested only as Telegram allows (no entity inside code, code and pre inside nothing but a
  quote, no link in a link, no quote in a quote), every tag closed, ``<>&`` escaped.
  Headings are bold, lists "• " and "1. " lines, tables monospace. Telegram counts a
  message's 4,096 characters after parsing the markup: what a person sees of a part is never
  longer than its Markdown source, so a source split at the limit always fits.
- :func:`slack_mrkdwn`: Slack's mrkdwn, ``&<>`` escaped everywhere, so ``<!channel>`` or
  ``<@U1>`` written by the agent pings no one (docs/decisions.md says why mrkdwn rather than
  Slack's ``markdown`` block).
- :func:`discord_markdown`: Discord's Markdown, ``@everyone``, ``@here`` and ``<@id>``
  defused with a zero-width space (the platform's allowed_mentions is the second lock).

:func:`split_markdown` cuts a long text into parts that are each rendered on their own
(gateway/render/textsplit.py); :func:`slack_time` and :func:`discord_time` show a moment in each
reader's own time zone.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from datetime import datetime
from functools import lru_cache
from html import escape

from markdown_it import MarkdownIt
from markdown_it.tree import SyntaxTreeNode

from gateway.render.textsplit import split_text

__all__ = [
    "ACTIVITY_MARKS",
    "Highlighter",
    "console_html",
    "discord_escape",
    "discord_markdown",
    "discord_time",
    "plain_text",
    "slack_mrkdwn",
    "slack_time",
    "split_markdown",
    "telegram_html",
]

# the marks the core's tool lines start with (gateway/sessions/outbound.py): drawn as activity
ACTIVITY_MARKS = ("▸", "✓", "✗")
# (code, language) -> escaped HTML with highlighting, or None to leave it plain
Highlighter = Callable[[str, str], str | None]

_PARSER = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False}).enable(
    ["table", "strikethrough"]
)
_LANGUAGE = re.compile(r"[^a-z0-9+#._-]")
_NEWLINES = re.compile(r"\r\n?")  # markdown-it's own line breaks
_CACHED = 512  # rendered texts kept per renderer: a page or a flush draws the same again


def _tree(md: str) -> tuple[SyntaxTreeNode, list[str]]:
    """The token tree, and the source lines as the parser numbers them (its ``map``)."""
    return SyntaxTreeNode(_PARSER.parse(md)), _NEWLINES.sub("\n", md).split("\n")


def _language(info: str) -> str:
    word = info.split(maxsplit=1)[0] if info.strip() else ""
    return _LANGUAGE.sub("", word.lower())[:32]


def _code(node: SyntaxTreeNode) -> str:
    content = node.content
    return content[:-1] if content.endswith("\n") else content


def _web_url(url: str, *, mail: bool = True) -> str | None:
    """The link's address if it is one a person may safely open: http(s), or mailto."""
    scheme = url.split(":", 1)[0].lower() if ":" in url else ""
    if scheme in ("http", "https") or (mail and scheme == "mailto"):
        return url
    return None


def _blank_before(node: SyntaxTreeNode, lines: list[str]) -> bool:
    """Whether a blank line (a quote's ">" alone counts) came just before the block."""
    if node.map is None or node.map[0] == 0 or node.map[0] > len(lines):
        return False
    return not lines[node.map[0] - 1].strip(" \t>")


def plain_text(node: SyntaxTreeNode) -> str:
    """The text of an inline node and its children, no markup."""
    if node.type in ("text", "code_inline"):
        return node.content
    if node.type in ("softbreak", "hardbreak"):
        return "\n"
    return "".join(plain_text(child) for child in node.children)


def _table_rows(node: SyntaxTreeNode) -> list[list[str]]:
    rows = []
    for section in node.children:
        for row in section.children:
            cells = [plain_text(cell.children[0]) if cell.children else "" for cell in row.children]
            rows.append(cells)
    return rows


def _aligned(rows: list[list[str]]) -> str:
    """A table as monospace text, its columns aligned."""
    count = len(rows[0])
    widths = [max(len(row[i]) if i < len(row) else 0 for row in rows) for i in range(count)]
    lines = [
        " | ".join(cell.ljust(widths[i]) for i, cell in enumerate(row[:count])).rstrip()
        for row in rows
    ]
    lines.insert(1, "-+-".join("-" * width for width in widths))
    return "\n".join(lines)


def _table_text(node: SyntaxTreeNode, lines: list[str]) -> str:
    """The table aligned, unless that is longer than the agent wrote it (then as written)."""
    source = "\n".join(lines[node.map[0] : node.map[1]]) if node.map else ""
    rows = _table_rows(node)
    aligned = _aligned(rows) if rows and rows[0] else source
    return aligned if len(aligned) <= len(source) or not source else source


# --- the console ---------------------------------------------------------------------------


class _ConsoleHtml:
    def __init__(self, lines: list[str], highlight: Highlighter | None) -> None:
        self.lines = lines
        self.highlight = highlight

    def blocks(self, nodes: Iterable[SyntaxTreeNode]) -> str:
        return "".join(self.block(node) for node in nodes)

    def block(self, node: SyntaxTreeNode) -> str:
        match node.type:
            case "paragraph":
                inline = self.inline(node.children)
                if node.hidden:  # a tight list's item
                    return inline
                text = plain_text(node.children[0]) if node.children else ""
                css = ' class="tool"' if text.startswith(ACTIVITY_MARKS) else ""
                return f"<p{css}>{inline}</p>"
            case "heading":
                tag = {"h1": "h4", "h2": "h4", "h3": "h5"}.get(node.tag, "h6")
                return f"<{tag}>{self.inline(node.children)}</{tag}>"
            case "blockquote":
                return f"<blockquote>{self.blocks(node.children)}</blockquote>"
            case "bullet_list":
                return f"<ul>{self.blocks(node.children)}</ul>"
            case "ordered_list":
                start = int(str(node.attrs.get("start", 1)))
                first = f' start="{start}"' if start != 1 else ""
                return f"<ol{first}>{self.blocks(node.children)}</ol>"
            case "list_item":
                return f"<li>{self.blocks(node.children)}</li>"
            case "fence" | "code_block":
                return self.code(_code(node), _language(node.info))
            case "hr":
                return "<hr>"
            case "table":
                return self.table(node)
            case "inline":
                return self.inline(node.children)
            case _:  # nothing else comes of CommonMark without HTML; shown as text if it did
                return f"<p>{escape(node.content)}</p>"

    def code(self, code: str, language: str) -> str:
        drawn = self.highlight(code, language) if self.highlight is not None else None
        css = f' class="language-{language}"' if language else ""
        return f"<pre><code{css}>{drawn if drawn is not None else escape(code)}</code></pre>"

    def table(self, node: SyntaxTreeNode) -> str:
        parts = ["<table>"]
        for section in node.children:
            parts.append(f"<{section.type}>")
            for row in section.children:
                parts.append("<tr>")
                for cell in row.children:
                    style = str(cell.attrs.get("style", ""))
                    align = style.removeprefix("text-align:")
                    css = f' class="{align}"' if align in ("left", "center", "right") else ""
                    parts.append(f"<{cell.type}{css}>{self.inline(cell.children)}</{cell.type}>")
                parts.append("</tr>")
            parts.append(f"</{section.type}>")
        parts.append("</table>")
        return "".join(parts)

    def inline(self, nodes: Iterable[SyntaxTreeNode]) -> str:
        return "".join(self.span(node) for node in nodes)

    def span(self, node: SyntaxTreeNode) -> str:
        match node.type:
            case "inline":
                return self.inline(node.children)
            case "text":
                return escape(node.content)
            case "softbreak":
                return "\n"
            case "hardbreak":
                return "<br>"
            case "code_inline":
                return f"<code>{escape(node.content)}</code>"
            case "em" | "strong" | "s":
                tag = node.type
                return f"<{tag}>{self.inline(node.children)}</{tag}>"
            case "link" | "image":
                key = "href" if node.type == "link" else "src"
                url = _web_url(str(node.attrs.get(key, "")))
                inner = self.inline(node.children)
                if url is None:
                    return inner
                return (
                    f'<a href="{escape(url)}" rel="noopener noreferrer nofollow" '
                    f'target="_blank">{inner or escape(url)}</a>'
                )
            case _:
                return escape(node.content)


@lru_cache(maxsize=_CACHED)
def console_html(md: str, highlight: Highlighter | None = None) -> str:
    """The agent's Markdown as a sanitised HTML fragment (``highlight`` colours code)."""
    root, lines = _tree(md)
    return _ConsoleHtml(lines, highlight).blocks(root.children)


# --- Telegram ------------------------------------------------------------------------------

_TG_TAGS = {"em": "i", "strong": "b", "s": "s"}
_TG_EMPTY = re.compile(r"<(b|i|s)></\1>")  # left around code that ended a bold span
_BULLETS = ("•", "◦", "▪")


class _TelegramHtml:
    """Draws blocks into ``out``, counting what a person will see (``visible``)."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        self.out: list[str] = []
        self.visible = 0
        self.open: list[str] = []  # formatting tags open now (b, i, s, a)
        self.quoted = False

    def text(self, text: str) -> None:
        self.out.append(escape(text, quote=False))
        self.visible += len(text)

    def blocks(self, nodes: Iterable[SyntaxTreeNode], depth: int = 0) -> None:
        first = True
        for node in nodes:
            if not first:
                self.text("\n\n" if _blank_before(node, self.lines) else "\n")
            first = False
            self.block(node, depth)

    def block(self, node: SyntaxTreeNode, depth: int) -> None:
        match node.type:
            case "paragraph" | "inline":
                self.inline(node.children)
            case "heading":
                self.formatted("b", node.children)
            case "blockquote":
                if self.quoted:  # Telegram quotes do not nest: its lines join the outer one
                    self.blocks(node.children, depth)
                    return
                self.quoted = True
                self.out.append("<blockquote>")
                self.blocks(node.children, depth)
                self.out.append("</blockquote>")
                self.quoted = False
            case "bullet_list" | "ordered_list":
                self.items(node, depth)
            case "fence" | "code_block":
                language = _language(node.info)
                attribute = f' class="language-{language}"' if language else ""
                self.out.append(f"<pre><code{attribute}>" if language else "<pre>")
                self.text(_code(node))
                self.out.append("</code></pre>" if language else "</pre>")
            case "hr":
                self.text("———")
            case "table":
                self.out.append("<pre>")
                self.text(_table_text(node, self.lines))
                self.out.append("</pre>")
            case _:
                self.text(node.content)

    def items(self, node: SyntaxTreeNode, depth: int) -> None:
        number = int(str(node.attrs.get("start", 1)))
        first = True
        for item in node.children:
            if not first:
                self.text("\n\n" if _blank_before(item, self.lines) else "\n")
            first = False
            if node.type == "ordered_list":
                mark = f"{number}. "
                number += 1
            else:
                mark = f"{_BULLETS[min(depth, len(_BULLETS) - 1)]} "
            self.text("  " * depth + mark)
            self.blocks(item.children, depth + 1)

    def inline(self, nodes: Iterable[SyntaxTreeNode]) -> None:
        for node in nodes:
            self.span(node)

    def formatted(self, tag: str, children: Iterable[SyntaxTreeNode], attrs: str = "") -> None:
        if tag in self.open:  # the same entity inside itself: Telegram merges it anyway
            self.inline(children)
            return
        self.open.append(tag)
        self.out.append(f"<{tag}{attrs}>")
        self.inline(children)
        self.out.append(f"</{tag}>")
        self.open.pop()

    def span(self, node: SyntaxTreeNode) -> None:
        match node.type:
            case "text":
                self.text(node.content)
            case "softbreak" | "hardbreak":
                self.text("\n")
            case "code_inline":
                if "a" in self.open:  # no code inside a link: its text, plain
                    self.text(node.content)
                    return
                # code is part of no other entity (but a quote): close what is open around it
                self.out.extend(f"</{tag}>" for tag in reversed(self.open))
                self.out.append("<code>")
                self.text(node.content)
                self.out.append("</code>")
                self.out.extend(f"<{tag}>" for tag in self.open)
            case "em" | "strong" | "s":
                self.formatted(_TG_TAGS[node.type], node.children)
            case "link" | "image":
                key = "href" if node.type == "link" else "src"
                url = _web_url(str(node.attrs.get(key, "")), mail=False)
                if url is None or "a" in self.open:
                    self.inline(node.children)
                else:
                    self.formatted("a", node.children, f' href="{escape(url)}"')
            case _ if node.children:
                self.inline(node.children)
            case _:
                self.text(node.content)


@lru_cache(maxsize=_CACHED)
def telegram_html(md: str) -> str:
    """The agent's Markdown in the Bot API's HTML parse mode. What a person sees of it is
    never longer than ``md``; should a construct ever make it so (or leave nothing to see),
    the text is sent as written, escaped."""
    root, lines = _tree(md)
    drawn = _TelegramHtml(lines)
    drawn.blocks(root.children)
    html = _TG_EMPTY.sub("", "".join(drawn.out))
    if drawn.visible > len(md) or (md.strip() and not _has_visible(drawn)):
        return escape(md, quote=False)
    return html


def _has_visible(drawn: _TelegramHtml) -> bool:
    return any(piece.strip() and not piece.startswith("<") for piece in drawn.out)


# --- Slack ---------------------------------------------------------------------------------

_SLACK_MARKS = {"em": "_", "strong": "*", "s": "~"}


def _slack_escape(text: str) -> str:
    """Slack's three control characters: the only escaping mrkdwn has (and needs, so that
    ``<!channel>``, ``<@U1>`` and ``<url|label>`` written by the agent stay text)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


class _Chat:
    """Slack's and Discord's Markdown-like formats: lines of text, marks around spans."""

    marks: dict[str, str]
    bold = "*"

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        self.open: list[str] = []

    def escape(self, text: str) -> str:
        raise NotImplementedError

    def code_span(self, code: str) -> str:
        raise NotImplementedError

    def code_block(self, code: str, language: str) -> str:
        raise NotImplementedError

    def link(self, url: str, label: str) -> str:
        raise NotImplementedError

    def blocks(self, nodes: Iterable[SyntaxTreeNode], depth: int = 0) -> str:
        out: list[str] = []
        for node in nodes:
            if out:
                out.append("\n\n" if _blank_before(node, self.lines) else "\n")
            out.append(self.block(node, depth))
        return "".join(out)

    def block(self, node: SyntaxTreeNode, depth: int) -> str:
        match node.type:
            case "paragraph" | "inline":
                return self.inline(node.children)
            case "heading":
                return self.marked(self.bold, node.children)
            case "blockquote":
                inner = self.blocks(node.children, depth)
                return "\n".join(f"> {line}" for line in inner.split("\n"))
            case "bullet_list" | "ordered_list":
                return self.items(node, depth)
            case "fence" | "code_block":
                return self.code_block(_code(node), _language(node.info))
            case "hr":
                return "———"
            case "table":
                return self.code_block(_table_text(node, self.lines), "")
            case _:
                return self.escape(node.content)

    def items(self, node: SyntaxTreeNode, depth: int) -> str:
        number = int(str(node.attrs.get("start", 1)))
        out: list[str] = []
        for item in node.children:
            if out:
                out.append("\n\n" if _blank_before(item, self.lines) else "\n")
            if node.type == "ordered_list":
                mark = f"{number}. "
                number += 1
            else:
                mark = f"{_BULLETS[min(depth, len(_BULLETS) - 1)]} "
            out.append("  " * depth + mark + self.blocks(item.children, depth + 1))
        return "".join(out)

    def inline(self, nodes: Iterable[SyntaxTreeNode]) -> str:
        return "".join(self.span(node) for node in nodes)

    def marked(self, mark: str, children: Iterable[SyntaxTreeNode]) -> str:
        if mark in self.open:
            return self.inline(children)
        self.open.append(mark)
        inner = self.inline(children)
        self.open.pop()
        return f"{mark}{inner}{mark}" if inner.strip() else inner

    def span(self, node: SyntaxTreeNode) -> str:
        match node.type:
            case "text":
                return self.escape(node.content)
            case "softbreak" | "hardbreak":
                return "\n"
            case "code_inline":
                return self.code_span(node.content)
            case "em" | "strong" | "s":
                return self.marked(self.marks[node.type], node.children)
            case "link" | "image":
                key = "href" if node.type == "link" else "src"
                url = _web_url(str(node.attrs.get(key, "")))
                label = self.inline(node.children)
                return label if url is None else self.link(url, label)
            case _:
                return self.inline(node.children) if node.children else self.escape(node.content)


class _SlackMrkdwn(_Chat):
    marks = _SLACK_MARKS

    def escape(self, text: str) -> str:
        return _slack_escape(text)

    def code_span(self, code: str) -> str:
        return f"`{_slack_escape(code)}`"

    def code_block(self, code: str, language: str) -> str:
        return f"```\n{_slack_escape(code)}\n```"

    def link(self, url: str, label: str) -> str:
        address = _slack_escape(url).replace("|", "%7C")
        return f"<{address}|{label.replace('|', '¦')}>" if label else f"<{address}>"


@lru_cache(maxsize=_CACHED)
def slack_mrkdwn(md: str) -> str:
    """The agent's Markdown as Slack mrkdwn (*bold*, _italic_, ~strike~, `code`, <url|text>)."""
    root, lines = _tree(md)
    return _SlackMrkdwn(lines).blocks(root.children)


# --- Discord -------------------------------------------------------------------------------

_ZWSP = "\u200b"
_DISCORD_SPECIAL = re.compile(r"([\\*_~`|\[\]])")
_DISCORD_LINE_START = re.compile(r"(?m)^(\s*)([>#-]|[0-9]+\.)(?=\s)")
_MENTION = re.compile(r"@(everyone|here)|<(@[!&]?|#)(?=[0-9]+>)")
_URL = re.compile(r"https?://[^\s<>]+")


def _defuse(text: str) -> str:
    """``@everyone``, ``@here``, ``<@id>``, ``<@&role>``, ``<#channel>`` as plain text."""
    return _MENTION.sub(
        lambda m: f"@{_ZWSP}{m[1]}" if m[1] else f"<{m[2][0]}{_ZWSP}{m[2][1:]}", text
    )


def _discord_escape(text: str) -> str:
    out, at = [], 0
    for url in _URL.finditer(text):  # a web address stays clickable: not escaped
        out.append(_DISCORD_SPECIAL.sub(r"\\\1", text[at : url.start()]))
        out.append(url.group())
        at = url.end()
    out.append(_DISCORD_SPECIAL.sub(r"\\\1", text[at:]))
    escaped = _DISCORD_LINE_START.sub(r"\1\\\2", "".join(out))
    return _defuse(escaped)


class _DiscordMarkdown(_Chat):
    marks = {"em": "*", "strong": "**", "s": "~~"}
    bold = "**"

    def escape(self, text: str) -> str:
        return _discord_escape(text)

    def code_span(self, code: str) -> str:
        fence = "``" if "`" in code else "`"
        pad = " " if code.startswith("`") or code.endswith("`") else ""
        return f"{fence}{pad}{code.replace('``', f'`{_ZWSP}`')}{pad}{fence}"

    def code_block(self, code: str, language: str) -> str:
        # a fence inside would close Discord's block: broken with a zero-width space
        return f"```{language}\n{code.replace('```', f'``{_ZWSP}`')}\n```"

    def link(self, url: str, label: str) -> str:
        address = url.replace(")", "%29").replace(">", "%3E")
        return f"[{label}](<{address}>)" if label else f"<{address}>"


@lru_cache(maxsize=_CACHED)
def discord_markdown(md: str) -> str:
    """The agent's Markdown as Discord shows it, mentions defused and stray marks escaped."""
    root, lines = _tree(md)
    return _DiscordMarkdown(lines).blocks(root.children)


def discord_escape(text: str) -> str:
    """Literal text as Discord shows it: every mark escaped, mentions defused."""
    return _discord_escape(text)


# --- splitting and times -------------------------------------------------------------------


def split_markdown(md: str, limit: int) -> list[str]:
    """Parts of at most ``limit`` characters, each valid Markdown on its own (code fences
    closed and opened again), cut at blank lines, then line breaks: gateway/render/textsplit.py."""
    return split_text(md, limit)


def _epoch(moment: datetime) -> int:
    if moment.tzinfo is None:
        raise ValueError("a time to show must carry its time zone")
    return int(moment.timestamp())


def slack_time(moment: datetime, fallback: str) -> str:
    """``moment`` in each Slack reader's own time zone ("Dec 1st, 2026 at 09:30");
    ``fallback`` where a client cannot (a notification)."""
    text = _slack_escape(fallback).replace("|", "¦")
    return f"<!date^{_epoch(moment)}^{{date_short_pretty}} {{time}}|{text}>"


def discord_time(moment: datetime, style: str = "R") -> str:
    """``moment`` in each Discord reader's own time zone (``R``: "in 5 minutes")."""
    if style not in ("t", "T", "d", "D", "f", "F", "R"):
        raise ValueError(f"no Discord timestamp style {style!r}")
    return f"<t:{_epoch(moment)}:{style}>"
