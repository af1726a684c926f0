"""A whole gateway around the scripted agent (tests/scripted_launcher.py) on the memory
platform: two projects, "fast" (the channel "fast") and "slow" (every other channel), each
with the expiry policy a test gives it."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from gateway.config.model import Config, ExpiryOutcome, ExpiryPolicy
from gateway.domain import ConversationRef, InteractionKind, InteractionRequest, Option, Question
from gateway.sessions.engine import Gateway
from gateway.store.database import Clock, utc_now
from platforms.memory.platform import MemoryPlatform, Rendered
from platforms.registry import parse_config
from tests.gateway_flows import Asked, session_of
from tests.gateway_harness import ALICE, Running
from tests.scripted_launcher import ScriptedLauncher
from tests.store_helpers import approval

__all__ = ["ASK", "REQUESTS", "open_card", "scripted_config", "scripted_gateway", "with_expiry"]


def with_expiry(
    config: Config, after_seconds: float | None, outcome: str = "deny", project: str = "demo"
) -> Config:
    policy = ExpiryPolicy(after_seconds=after_seconds, outcome=ExpiryOutcome(outcome))
    changed = config.projects[project].model_copy(update={"expiry": policy})
    return config.model_copy(update={"projects": {**config.projects, project: changed}})


ASK = InteractionRequest(
    native_key="scripted:ask",
    kind=InteractionKind.QUESTION,
    title="Which colour?",
    questions=(
        Question(
            id="colour",
            header="Colour",
            text="Which colour?",
            options=(Option(id="0", label="Red"), Option(id="1", label="Blue")),
        ),
    ),
)  # like Codex's request_user_input: no action declines it
REQUESTS = {"approve": approval("scripted:approve", title="Run ls?"), "ask": ASK}


def scripted_config(tmp_path: Path, fast: ExpiryPolicy, slow: ExpiryPolicy | None = None) -> Config:
    """Project "fast" takes the channel "fast" with the ``fast`` policy; "slow" takes every
    other channel with ``slow`` (default: never expires)."""
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    auth = 'allow_from = ["alice", "bob"]\napprovers = ["alice", "bob"]'
    text = f"""
[gateway]
data_dir = {json.dumps(str(tmp_path / "data"))}
stop_grace_seconds = 5

[projects.fast]
work_dir = {json.dumps(str(work))}
agent = "codex-app-server"

[projects.fast.auth.memory]
{auth}
channels = ["fast"]

[projects.slow]
work_dir = {json.dumps(str(work))}
agent = "codex-app-server"

[projects.slow.auth.memory]
{auth}

[platforms.memory]
"""
    config = parse_config(text, "test.toml")
    config = with_expiry(config, fast.after_seconds, fast.outcome.value, "fast")
    slow = slow or ExpiryPolicy()
    return with_expiry(config, slow.after_seconds, slow.outcome.value, "slow")


_starts = iter(range(1, 1000))


@asynccontextmanager
async def scripted_gateway(
    config: Config,
    launcher: ScriptedLauncher | None = None,
    clock: Clock = utc_now,
    schedule_clock: Clock | None = None,
) -> AsyncIterator[tuple[Running, ScriptedLauncher]]:
    # each start has its own message ids, and edits the cards an earlier start sent
    memory = MemoryPlatform(adopt_unknown=True, id_prefix=f"start{next(_starts)}-")
    launcher = launcher or ScriptedLauncher(REQUESTS)
    async with Gateway(
        config,
        platforms={"memory": memory},
        launcher=launcher,
        clock=clock,
        schedule_clock=schedule_clock,
    ) as gw:
        yield Running(gateway=gw, memory=memory), launcher


async def open_card(gw: Running, conversation: ConversationRef, text: str) -> Asked:
    """Say ``text`` (a request's name) and wait for the card the scripted agent asks."""
    before = {shown.ref.message_id for shown in gw.cards(conversation)}

    def new_card() -> Rendered | None:
        return next((c for c in gw.cards(conversation) if c.ref.message_id not in before), None)

    await gw.memory.say(conversation, ALICE, text)
    while True:
        shown = await gw.memory.wait_for(new_card)
        session = await session_of(gw, conversation)
        opened = await gw.gateway.store.interactions.list_open(session.id)
        if len(opened) == 1 and shown.card is not None and shown.card.title == opened[0].title:
            # shown, and recorded as shown (what /status and /pending read) once its draw ends
            for copy in await gw.gateway.store.cards.list_for(opened[0].id):
                await gw.gateway.broker.drawn(copy.id)
            return Asked(shown=shown, interaction=opened[0])
        # not the card asked: a start's recovery redrew a closed one meanwhile (a new message
        # on a platform that lost the old one), which the ledger no longer serializes
        before.add(shown.ref.message_id)
