"""The agent's Markdown on every surface (gateway/render/markdown.py): what each format makes of it,
and a hostile corpus that must never get through as markup, a mention, or a message Telegram
refuses, whole or split into parts."""

from __future__ import annotations

from datetime import UTC, datetime
from html.parser import HTMLParser

import pytest

from gateway.render.markdown import (
    console_html,
    discord_markdown,
    discord_time,
    slack_mrkdwn,
    slack_time,
    split_markdown,
    telegram_html,
)
from gateway.render.textsplit import split_parts
from tests.servers.telegram_wire import HtmlError, parse_html

PYTHON = "".join(f"def f{i}(x):\n    return x < {i} and x > -{i}  # & co\n" for i in range(90))
FENCE_5000 = f"Here is the code:\n\n```python\n{PYTHON[:5000]}\n```\n\nThat is all."
NESTED_FENCES = "To show a fence:\n\n`````markdown\n```python\nprint(1)\n```\n`````\n\nDone."

HOSTILE = [
    "<script>alert(1)</script>",
    '<img src=x onerror="alert(1)">',
    "<b>bold?</b> <i>and</i> </pre> <pre>",
    "<!channel> <!here> <@U123> <#C42> <!subteam^S1>",
    "@everyone @here <@123456789> <@!123> <@&42> <#77>",
    "**unbalanced bold and _unbalanced italic and `unbalanced code",
    "a < b > c & d &amp; &lt; &nbsp; &#0; &#x110000; &bogus;",
    "<",
    ">",
    "&",
    "``` not closed\nstill code <b>",
    NESTED_FENCES,
    "[click](javascript:alert(1)) [data](data:text/html,<script>x</script>) "
    '[ok](https://example.com/?a=1&b="2") <javascript:alert(1)> ![img](javascript:x)',
    "[`code in a link`](https://example.com) **bold `code` bold** # not a heading",
    "# Heading with `code`\n\n## **bold** heading\n\n> quote with `code`\n> > nested quote",
    "- a\n- b\n  - c\n    1. d\n\n1. one\n1. one again\n\n10. ten\n11. eleven",
    "| a | b |\n|---|--:|\n| `x` | **y** |\n| <z> | & |",
    "~~strike~~ ***both*** *a **b** a* __under__ ___all___",
    "line one\nline two  \nhard break\\\nbackslash",
    "    indented code <b>\n    second line",
    "***\n---\n___",
    "\u200b\u202e reversed \ufeff \x00 nul",
    "😀 emoji **😀** `😀`",
    "form\x0bfeed\x0c and \u2028 breaks\r\n\r\n- crlf\r\n- list\r\rold mac",
    FENCE_5000,
]


# --- console -------------------------------------------------------------------------------

_CONSOLE_TAGS = {
    "p", "strong", "em", "s", "code", "pre", "a", "ul", "ol", "li", "blockquote", "h4", "h5",
    "h6", "hr", "br", "table", "thead", "tbody", "tr", "th", "td", "span",
}  # fmt: skip
_CONSOLE_ATTRS = {"class", "href", "rel", "target", "start"}


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def _console(md: str) -> _Tags:
    parsed = _Tags()
    parsed.feed(console_html(md))
    parsed.close()
    return parsed


def test_console_draws_emphasis_code_lists_and_headings() -> None:
    html = console_html(
        "# Plan\n\nI ran **command**, an *orphaned* ~~old~~ `ls -l`.\n\n- one\n- two\n\n"
        "```python\nprint(1 < 2)\n```"
    )
    assert html == (
        "<h4>Plan</h4><p>I ran <strong>command</strong>, an <em>orphaned</em> <s>old</s> "
        "<code>ls -l</code>.</p><ul><li>one</li><li>two</li></ul>"
        '<pre><code class="language-python">print(1 &lt; 2)</code></pre>'
    )


def test_console_links_only_to_the_web_and_never_with_a_referrer() -> None:
    html = console_html("[site](https://example.com/a) [mail](mailto:a@b.c) [x](ftp://h/f)")
    assert html == (
        '<p><a href="https://example.com/a" rel="noopener noreferrer nofollow" '
        'target="_blank">site</a> <a href="mailto:a@b.c" rel="noopener noreferrer nofollow" '
        'target="_blank">mail</a> x</p>'
    )


def test_console_shows_the_agents_html_as_text() -> None:
    parsed = _console('<script>alert(1)</script> <img src=x onerror="alert(1)">')
    assert [tag for tag, _ in parsed.tags] == ["p"]
    assert "".join(parsed.text) == '<script>alert(1)</script> <img src=x onerror="alert(1)">'


def test_console_marks_a_tool_line_and_aligns_table_cells_by_class() -> None:
    html = console_html("▸ `touch hello.txt`\n\n| a | b |\n|---|--:|\n| 1 | 2 |")
    assert html.startswith('<p class="tool">▸ <code>touch hello.txt</code></p><table>')
    assert '<td class="right">2</td>' in html


@pytest.mark.parametrize("md", HOSTILE)
def test_console_lets_no_markup_of_the_agents_through(md: str) -> None:
    for tag, attrs in _console(md).tags:
        assert tag in _CONSOLE_TAGS, tag
        assert set(attrs) <= _CONSOLE_ATTRS, attrs
        href = attrs.get("href")
        if href is not None:
            assert href.startswith(("https://", "http://", "mailto:")), href


# --- Telegram ------------------------------------------------------------------------------


def _telegram(md: str) -> tuple[str, list[dict[str, object]]]:
    """What Telegram shows of ``md`` rendered (the strict fake's parser: HtmlError if the
    Bot API would refuse it or change it)."""
    return parse_html(telegram_html(md))


def _of(visible: str, entities: list[dict[str, object]], kind: str) -> list[str]:
    units = visible.encode("utf-16-le")
    return [
        units[
            2 * int(str(e["offset"])) : 2 * (int(str(e["offset"])) + int(str(e["length"])))
        ].decode("utf-16-le")
        for e in entities
        if e["type"] == kind
    ]


def test_telegram_tool_line_is_code() -> None:
    assert telegram_html("▸ `/bin/bash -c 'touch hello.txt'`") == (
        "▸ <code>/bin/bash -c 'touch hello.txt'</code>"
    )
    visible, entities = _telegram("✓ `echo 1 < 2 && echo ok`")
    assert visible == "✓ echo 1 < 2 && echo ok"
    assert _of(visible, entities, "code") == ["echo 1 < 2 && echo ok"]


def test_telegram_headings_are_bold_and_lists_are_lines() -> None:
    md = "# Colour\n\nUse **red**.\n\n- one\n- two\n  - three\n\n3. c\n4. d"
    visible, entities = _telegram(md)
    assert visible == "Colour\n\nUse red.\n\n• one\n• two\n  ◦ three\n\n3. c\n4. d"
    assert _of(visible, entities, "bold") == ["Colour", "red"]


def test_telegram_code_block_keeps_its_language() -> None:
    html = telegram_html("Look:\n\n```python\nif a < b:\n    pass\n```")
    assert html == (
        'Look:\n\n<pre><code class="language-python">if a &lt; b:\n    pass</code></pre>'
    )
    _, entities = parse_html(html)
    assert entities[-1] == {"type": "pre", "offset": 7, "length": 18, "language": "python"}


def test_telegram_code_inside_bold_closes_the_bold_around_it() -> None:
    visible, entities = _telegram("**run `make` now**")
    assert visible == "run make now"
    assert _of(visible, entities, "bold") == ["run ", " now"]
    assert _of(visible, entities, "code") == ["make"]


def test_telegram_unbalanced_markers_and_stray_characters_are_text() -> None:
    md = "**not bold, <b>not a tag</b>, `not code, a < b & c > d"
    visible, entities = _telegram(md)
    assert visible == md
    assert entities == []


def test_telegram_links_only_to_the_web() -> None:
    visible, entities = _telegram("[a](https://example.com) [b](javascript:alert(1)) [c](tg:x)")
    assert visible == "a [b](javascript:alert(1)) c"
    assert [e.get("url") for e in entities] == ["https://example.com"]


def test_telegram_nested_fences_show_the_inner_fence_as_code() -> None:
    visible, entities = _telegram(NESTED_FENCES)
    assert _of(visible, entities, "pre") == ["```python\nprint(1)\n```"]


# --- the fake Bot API refuses what Telegram refuses (else the tests above prove nothing) ---


@pytest.mark.parametrize(
    "html",
    [
        "a < b",  # a "<" that starts no tag
        "a & b",  # not an entity (the documentation says to escape it)
        "&nbsp;",  # a named entity Telegram does not know
        "<b>open",
        "<b>x</i>",
        "</b>",
        "<p>x</p>",
        "<b><code>x</code></b>",  # code inside bold: dropped by Telegram
        "<code><b>x</b></code>",
        "<pre><b>x</b></pre>",
        '<a href="https://a"><a href="https://b">x</a></a>',
        '<a href="javascript:alert(1)">x</a>',
        "<blockquote><blockquote>x</blockquote></blockquote>",
        '<code class="language-python">x</code>',  # a language on a code outside a pre
        '<b class="x">x</b>',
        "<b><b>x</b></b>",
        "<tg-time>09:17 UTC</tg-time>",  # a date_time entity without its Unix time
        '<tg-time unix="1796117400" format="x">09:17 UTC</tg-time>',  # not r|w?[dD]?[tT]?
        '<tg-time unix="1796117400" tz="UTC">09:17 UTC</tg-time>',
    ],
)
def test_the_fake_bot_api_refuses_what_telegram_would_refuse_or_change(html: str) -> None:
    with pytest.raises(HtmlError):
        parse_html(html)


def test_the_fake_bot_api_reads_telegrams_own_examples() -> None:
    html = (
        '<b>bold <i>italic bold <s>strike <span class="tg-spoiler">spoiler</span></s>'
        ' <u>underline</u></i> bold</b> <a href="http://www.example.com/">url</a> '
        '<code>code</code> <pre><code class="language-python">pre</code></pre> '
        "<blockquote>quote <pre>in a quote</pre></blockquote> &lt;&gt;&amp;&quot;&#33;&#x21;"
    )
    visible, entities = parse_html(html)
    assert visible.endswith('<>&"!!')
    assert {e["type"] for e in entities} >= {"bold", "spoiler", "text_link", "pre", "blockquote"}


def test_the_fake_bot_api_reads_a_date_time_entity() -> None:
    """Bot API 9.5: ``<tg-time>`` is a ``date_time`` entity; its text, the fallback."""
    visible, entities = parse_html(
        '<i>by Ann at <tg-time unix="1796117400" format="t">09:30 UTC</tg-time></i>'
    )
    assert visible == "by Ann at 09:30 UTC"
    time = {"type": "date_time", "offset": 10, "length": 9, "unix_time": 1796117400}
    assert {**time, "date_time_format": "t"} in entities


# --- Slack and Discord ---------------------------------------------------------------------


def test_slack_mrkdwn_formats_and_escapes() -> None:
    md = (
        "# Title\n\n**bold** *italic* ~~strike~~ `a <b>` [site](https://e.com/?a|b) "
        "[bad](javascript:x)\n\n```sh\necho 1 > f && cat f\n```"
    )
    assert slack_mrkdwn(md) == (
        "*Title*\n\n*bold* _italic_ ~strike~ `a &lt;b&gt;` <https://e.com/?a%7Cb|site> "
        "[bad](javascript:x)\n\n```\necho 1 &gt; f &amp;&amp; cat f\n```"
    )


def test_slack_channel_mention_pings_no_one() -> None:
    out = slack_mrkdwn("Hey <!channel> and <!here>, <@U123> `<!everyone>`\n\n```\n<!channel>\n```")
    assert "<!" not in out and "<@" not in out
    assert out.count("&lt;!channel&gt;") == 2


def test_standard_markdown_has_no_escape_inside_code() -> None:
    """Why mrkdwn and not Slack's markdown block (docs/decisions.md): standard Markdown
    cannot escape ``<`` inside code, so defusing ``<!channel>`` there would show the escape
    itself, and leaving it is up to how Slack translates the block."""
    assert console_html("`&lt;!channel&gt;`") == "<p><code>&amp;lt;!channel&amp;gt;</code></p>"
    assert slack_mrkdwn("`<!channel>`") == "`&lt;!channel&gt;`"  # Slack shows <!channel>


def test_discord_markdown_defuses_mentions() -> None:
    out = discord_markdown("@everyone look, @here too, <@123> <@!456> <@&7> <#8>; **done**")
    zw = "\u200b"
    assert out == (
        f"@{zw}everyone look, @{zw}here too, <@{zw}123> <@{zw}!456> <@{zw}&7> <#{zw}8>; **done**"
    )


def test_discord_markdown_keeps_code_and_escapes_stray_marks() -> None:
    out = discord_markdown("a * b _c_ **d** [l](https://e.com/x_y)\n\n```py\nx = a*b\n```")
    assert out == "a \\* b *c* **d** [l](<https://e.com/x_y>)\n\n```py\nx = a*b\n```"


def test_times_show_in_each_readers_zone() -> None:
    moment = datetime(2026, 12, 1, 9, 30, tzinfo=UTC)
    assert slack_time(moment, "09:30 UTC") == (
        "<!date^1796117400^{date_short_pretty} {time}|09:30 UTC>"
    )
    assert discord_time(moment) == "<t:1796117400:R>"
    with pytest.raises(ValueError, match="time zone"):
        discord_time(datetime(2026, 12, 1))  # a naive time: refused


# --- the corpus, whole and split -----------------------------------------------------------


def _added_fences_removed(md: str, limit: int) -> str:
    return "".join(part.text for part in split_parts(md, limit))


@pytest.mark.parametrize("limit", [64, 300, 1000, 4096])
@pytest.mark.parametrize("md", HOSTILE)
def test_every_part_is_safe_and_telegram_takes_it(md: str, limit: int) -> None:
    parts = split_markdown(md, limit)
    assert _added_fences_removed(md, limit) == md  # exactly what the agent wrote
    for part in parts:
        assert len(part) <= limit
        visible, _ = parse_html(telegram_html(part))  # the strict fake Bot API takes it
        assert len(visible) <= len(part)  # Telegram counts what is seen: it always fits
        assert visible.strip(), "Telegram refuses an empty message"
        slack = slack_mrkdwn(part)
        assert "<!" not in slack and "<@" not in slack and "<#" not in slack
        discord = discord_markdown(part)
        assert "@everyone" not in discord and "@here" not in discord
        for tag, attrs in _console(part).tags:
            assert tag in _CONSOLE_TAGS and set(attrs) <= _CONSOLE_ATTRS


@pytest.mark.parametrize("limit", [1000, 4096])
def test_a_long_fence_split_is_code_in_every_part(limit: int) -> None:
    parts = split_markdown(FENCE_5000, limit)
    assert len(parts) >= 2
    for part in parts:
        visible, entities = _telegram(part)
        code = _of(visible, entities, "pre")
        assert code, part[:80]
        assert all(e.get("language") == "python" for e in entities if e["type"] == "pre")
        assert "```" not in visible  # every fence of the part is markup, none shows
        assert '<pre><code class="language-python">' in console_html(part)
        assert discord_markdown(part).count("```") == 2
    shown = "\n".join(_of(*_telegram(part), "pre")[0] for part in parts)
    assert shown.replace("\n", "") == PYTHON[:5000].replace("\n", "")


def test_a_split_nested_fence_reopens_with_its_own_marker() -> None:
    inner = "".join(f"```\nblock {i}\n```\n" for i in range(40))
    md = f"`````markdown\n{inner}`````\n"
    parts = split_parts(md, 200)
    assert len(parts) > 2
    for part in parts[1:]:
        assert part.before == "`````markdown\n"
    for part in parts[:-1]:
        assert part.after.strip() == "`````"
    for part in split_markdown(md, 200):
        visible, entities = _telegram(part)
        assert len(_of(visible, entities, "pre")) == 1  # one code block, the inner fences in it


def test_a_split_prefers_blank_lines_then_line_breaks() -> None:
    paragraphs = [f"Paragraph {i}: " + "word " * 30 + "\nsecond line of it." for i in range(8)]
    md = "\n\n".join(paragraphs)
    for part in split_markdown(md, 500):
        assert part.startswith("Paragraph") or part.startswith("\n")
        assert part.rstrip().endswith("of it.")
