"""A gateway on Telegram that stops: it takes no more updates before its runners stop, still
sends what they say while stopping, and leaves what came meanwhile to the next gateway.

The message is sent while the gateway stops its agent (the scripted agent's ``on_stop``):
the closing gateway must not take it (its runners are stopping, its ledger about to close),
and Telegram must not have been told it was taken, so that the next gateway on the same data
dir gets it and the agent answers it once."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest

from tests.scripted_launcher import ScriptedLauncher
from tests.servers.fake_telegram import FakeTelegram
from tests.servers.telegram_people import message_update, private_chat
from tests.telegram_harness import ALICE, on_telegram, telegram_config

pytestmark = pytest.mark.timeout(90)

SECRET = "s3cret-Token_for-webhooks"
LATE = "sent while the gateway stops"


@contextmanager
def receiving(mode: str) -> Iterator[tuple[str, socket.socket | None]]:
    """The ``[platforms.telegram]`` options for ``mode`` and the webhook's socket, if any."""
    with ExitStack() as stack:
        if mode == "polling":
            yield "", None
            return
        sock = stack.enter_context(socket.socket())
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/telegram/hook"
        yield f'mode = "webhook"\nwebhook_url = "{url}"\nsecret_token = "{SECRET}"', sock


@pytest.mark.parametrize("mode", ["polling", "webhook"])
async def test_a_message_sent_while_the_gateway_stops_is_answered_once_by_the_next_one(
    fake_telegram: FakeTelegram, tmp_path: Path, mode: str
) -> None:
    fake = fake_telegram
    (tmp_path / "work").mkdir()
    late: list[int] = []

    async def alice_writes() -> None:
        late.append(await fake.push(message_update(fake, private_chat(ALICE), ALICE, LATE)))

    for generation, launcher in enumerate(
        (ScriptedLauncher({}, on_stop=alice_writes), ScriptedLauncher({}))
    ):
        with receiving(mode) as (options, sock):
            config = telegram_config(
                fake, tmp_path / "data", work_dir=tmp_path / "work", telegram=options
            )
            async with on_telegram(config, fake, launcher, webhook_socket=sock) as tg:
                if generation == 0:
                    await tg.say(ALICE, "hello")
                    await tg.bot_message(ALICE.id, lambda m: m.text == "echo: hello")
                else:
                    await tg.bot_message(ALICE.id, lambda m: m.text == f"echo: {LATE}")
                    await tg.say(ALICE, "and after it")
                    await tg.bot_message(ALICE.id, lambda m: m.text == "echo: and after it")
        if generation == 0:
            texts = [m.text for m in fake.bot_messages(ALICE.id)]
            # the runner still spoke while stopping; nothing was said about the late message
            assert texts[0] == "echo: hello"
            assert texts[1].startswith("⏹ The gateway is stopping: the agent was stopped.")
            assert len(texts) == 2
            assert late and late[0] in fake.unconfirmed  # Telegram gives it again

    texts = [m.text for m in fake.bot_messages(ALICE.id)]
    assert texts.count(f"echo: {LATE}") == 1
    assert texts.index(f"echo: {LATE}") < texts.index("echo: and after it")
    assert not any("paused" in text or "/resume" in text for text in texts)
    assert fake.unconfirmed == []
