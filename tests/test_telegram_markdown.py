"""The agent's Markdown as a phone shows it: the real Codex, the real python-telegram-bot, and
the fake Bot API parsing every message strictly as Telegram does (tests/servers/
telegram_wire.py). A tool line is monospace, not backticks; a long answer with code arrives
in parts, each with its code block whole."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.codex_env import CodexHome
from tests.servers.fake_responses import FakeResponses, message, shell
from tests.servers.fake_telegram import FakeTelegram, Sent
from tests.telegram_harness import ALICE, codex_telegram_config, on_telegram

pytestmark = [pytest.mark.real_agent("codex"), pytest.mark.timeout(150)]

CODE = "".join(
    f"def step_{n:03d}(items: list[int]) -> int:\n"
    f'    """Step {n}: keep what is < {n} & > 0."""\n'
    f"    return sum(x for x in items if 0 < x < {n})\n\n"
    for n in range(90)
)
ANSWER = (
    "Here is the **module** you asked for:\n\n"
    f"```python\n{CODE}```\n\n"
    "Run it with `python steps.py`."
)


async def test_a_tool_line_arrives_as_code_not_backticks(
    codex_bin: str,
    codex_home: CodexHome,
    fake_model: FakeResponses,
    fake_telegram: FakeTelegram,
    tmp_path: Path,
) -> None:
    fake_model.enqueue((shell("touch hello.txt", escalated=True), message("**Done**.")))
    config = codex_telegram_config(fake_telegram, tmp_path, codex_bin, codex_home)
    async with on_telegram(config, fake_telegram) as tg:
        await tg.say(ALICE, "please create hello.txt")
        card = await tg.card(ALICE.id)
        await tg.press(ALICE, card, "Allow once")

        def tool_line(m: Sent) -> bool:
            return m is not card and "✓" in m.text and "touch hello.txt" in m.text

        line = await tg.bot_message(ALICE.id, tool_line)
        assert line.parse_mode == "HTML"
        assert "`" not in line.text  # what the person sees: no literal backticks
        assert any("touch hello.txt" in code for code in line.entities_of("code"))
        done = await tg.bot_message(ALICE.id, lambda m: m.text.endswith("Done."))
        assert done.entities_of("bold") == ["Done"]
    assert (codex_home.workspace / "hello.txt").exists()


async def test_a_long_answer_with_code_arrives_in_parts_each_with_its_code_block(
    codex_bin: str,
    codex_home: CodexHome,
    fake_model: FakeResponses,
    fake_telegram: FakeTelegram,
    tmp_path: Path,
) -> None:
    assert 11_000 < len(ANSWER) < 13_000
    fake_model.enqueue((message(ANSWER, chunks=300),))
    config = codex_telegram_config(fake_telegram, tmp_path, codex_bin, codex_home)
    async with on_telegram(config, fake_telegram) as tg:
        await tg.say(ALICE, "write me the steps module")

        def whole() -> list[Sent] | None:
            messages = tg.fake.bot_messages(ALICE.id)
            done = messages and messages[-1].text.endswith("Run it with python steps.py.")
            return messages if done else None

        parts = await tg.fake.wait_for(whole, 120)
    assert len(parts) >= 3
    code_shown = []
    for part in parts:
        assert part.parse_mode == "HTML"
        assert len(part.text) <= 4096
        assert '<pre><code class="language-python">' in part.html
        assert part.html.count("<pre>") == part.html.count("</pre>") == 1
        assert "```" not in part.text  # no fence shows literally
        [pre] = [e for e in part.entities if e["type"] == "pre"]
        assert pre["language"] == "python"
        code_shown.extend(part.entities_of("pre"))
    assert parts[0].entities_of("bold") == ["module"]
    assert parts[-1].entities_of("code") == ["python steps.py"]
    # the code, across the parts, is the agent's to the character (its line breaks aside)
    assert "".join(code_shown).replace("\n", "") == CODE.replace("\n", "")
    assert fake_telegram.too_many == []
