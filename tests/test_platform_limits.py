"""The core reads every ``PlatformLimits`` field: the button payload a platform takes, its card
body limit, and whether it has a private surface for secret answers.

Through the whole gateway on memory platforms given each limit, with the scripted agent
(tests/scripted_launcher.py) asking what the test needs.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from gateway.action_tokens import LONGEST_TOKEN_BYTES
from gateway.cards import Card, CodeBlock, FieldsBlock, TextBlock
from gateway.config.model import ExpiryPolicy
from gateway.domain import (
    Action,
    Command,
    Effect,
    InteractionKind,
    InteractionRequest,
    Option,
    Question,
)
from gateway.errors import ConfigError
from gateway.platform import PlatformLimits
from gateway.sessions.engine import Gateway
from platforms.memory.platform import MemoryPlatform
from tests.gateway_harness import ALICE, ROOM, Running
from tests.scripted_gateway import ASK, open_card, scripted_config
from tests.scripted_launcher import ScriptedLauncher

pytestmark = pytest.mark.timeout(60)

LONG_COMMAND = "printf '%s\\n' " + " ".join(f"word{i:04d}" for i in range(330))  # ~3,000
SECRET = InteractionRequest(
    native_key="scripted:secret",
    kind=InteractionKind.QUESTION,
    title="The agent asks for a token",
    questions=(
        Question(
            id="where",
            header="Where",
            text="Deploy where?",
            options=(Option(id="0", label="prod"),),
        ),
        Question(id="token", header="Token", text="Paste the deploy token", secret=True),
    ),
)
REQUESTS = {
    "long": InteractionRequest(
        native_key="scripted:long",
        kind=InteractionKind.APPROVAL,
        title="Run a long command?",
        detail=Command(command=LONG_COMMAND, cwd="/srv"),
        actions=(
            Action(id="accept", label="Approve", effect=Effect.ALLOW),
            Action(id="decline", label="Deny", effect=Effect.DENY),
        ),
    ),
    "secret": SECRET,
    "ask": ASK,
}


@asynccontextmanager
async def on_memory(tmp_path: Path, limits: PlatformLimits) -> AsyncIterator[Running]:
    memory = MemoryPlatform(limits=limits)
    config = scripted_config(tmp_path, fast=ExpiryPolicy())
    launcher = ScriptedLauncher(REQUESTS)
    async with Gateway(config, platforms={"memory": memory}, launcher=launcher) as gateway:
        yield Running(gateway=gateway, memory=memory)


def card_of(shown: Card | None) -> Card:
    assert shown is not None
    return shown


# --- callback_max_bytes ---------------------------------------------------------------------


async def test_a_platform_whose_payload_cannot_hold_a_token_is_refused_at_start(
    tmp_path: Path,
) -> None:
    too_small = PlatformLimits(callback_max_bytes=LONGEST_TOKEN_BYTES - 1)
    with pytest.raises(ConfigError, match="platform memory takes button payloads of 41 bytes"):
        async with on_memory(tmp_path, too_small):
            pass
    # one byte more is enough: every button of a form fits it
    async with on_memory(tmp_path, PlatformLimits(callback_max_bytes=LONGEST_TOKEN_BYTES)) as gw:
        asked = await open_card(gw, ROOM, "ask")
        card = card_of(asked.shown.card)
        assert card.form is not None
        tokens = [card.form.submit_token, *card.form.questions[0].option_tokens]
        assert max(len(token.encode()) for token in tokens) <= LONGEST_TOKEN_BYTES
        assert (await gw.memory.click(ROOM, ALICE, tokens[1])).accepted


# --- card_max_chars -------------------------------------------------------------------------


async def test_the_card_body_has_its_own_limit(tmp_path: Path) -> None:
    """Discord's shape: 2,000 characters of message text, 4,096 in an embed. A 3,000-char
    command is shown whole on the card, not attached, because the card body takes it."""
    limits = PlatformLimits(text_max_chars=2000, card_max_chars=4096)
    async with on_memory(tmp_path, limits) as gw:
        card = card_of((await open_card(gw, ROOM, "long")).shown.card)
    assert CodeBlock(code=LONG_COMMAND, language="sh") in card.blocks
    assert card.attachments == ()
    assert [action.label for action in card.actions] == ["Approve", "Deny"]


async def test_a_card_body_too_small_for_the_command_attaches_it(tmp_path: Path) -> None:
    limits = PlatformLimits(text_max_chars=4096, card_max_chars=2000)
    async with on_memory(tmp_path, limits) as gw:
        card = card_of((await open_card(gw, ROOM, "long")).shown.card)
    assert [attachment.content for attachment in card.attachments] == [LONG_COMMAND]
    assert [action.label for action in card.actions] == [
        "Approve (see attached command)",
        "Deny (see attached command)",
    ]


# --- has_private_surface --------------------------------------------------------------------


async def test_without_a_private_surface_a_secret_question_has_no_field_and_says_where(
    tmp_path: Path,
) -> None:
    async with on_memory(tmp_path, PlatformLimits(has_private_surface=False)) as gw:
        # a question that is not secret keeps its form here
        plain = card_of((await open_card(gw, ROOM, "ask")).shown.card)
        assert plain.form is not None
        blue = plain.form.questions[0].option_tokens[1]
        assert (await gw.memory.click(ROOM, ALICE, blue)).accepted
        await gw.text_where(lambda text: text == "Thanks: 1 answer(s) received.")
        # one with a secret has nothing to type it into, and says where to answer
        card = card_of((await open_card(gw, ROOM, "secret")).shown.card)
    assert card.form is None
    assert card.actions == ()
    asked = FieldsBlock(fields=(("Where", "Deploy where?"), ("Token", "Paste the deploy token")))
    assert asked in card.blocks
    notice = card.blocks[-1]
    assert isinstance(notice, TextBlock)
    assert notice.text == (
        "🔒 This asks for a secret answer, which is never typed here, and no platform "
        "running here can take it privately."
    )
