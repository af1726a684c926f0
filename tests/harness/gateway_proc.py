"""A whole gateway in a process of its own, so that a test can really kill it.

    python -m tests.harness.gateway_proc --config gateway.toml [--handshake-timeout S]
        [--host NAME] [--data-dir DIR] [--scripted-approvals N]

It runs the real :class:`gateway.sessions.engine.Gateway` (recovery included) with a
:class:`platforms.memory.platform.MemoryPlatform` and the real
:class:`adapters.launch.ConfiguredLauncher` (or, with ``--scripted-approvals N``, the
in-process scripted agents of tests/scripted_launcher.py, whose prompts ``approve0`` ...
``approve<N-1>`` each ask one approval: a bench of many sessions without an agent process
each), and talks JSON lines:

stdout (events and replies)::

    {"event": "ready", "pid": 123}                        recovery is over, commands are taken
    {"event": "rendered", "message": {...}}               a message was sent or edited
    {"event": "lease_lost"} / {"event": "started_over"}   on a shared ledger: the host lost
                                                          its lease / started over after it
    {"reply": N, ...}                                     the answer to command N

stdin (commands)::

    {"n": N, "cmd": "say", "conversation": {...}, "user": "alice", "text": "...",
     "message_id": "..."}                                  -> {"reply": N, "ok": true}
    {"n": N, "cmd": "click", "conversation": {...}, "user": "alice", "token": "..."}
                                            -> {"reply": N, "accepted": ..., "text": ...}
    {"n": N, "cmd": "submit", ..., "token": "...", "answers": {"q": {"option_ids": [...],
     "other": null}}, "private": false}                    -> like click
    {"n": N, "cmd": "dump"}                                -> {"reply": N, "messages": [...]}
    {"n": N, "cmd": "copies"}                              -> {"reply": N, "copies": [...]}
        every card copy of every open interaction, as the ledger records it
    {"n": N, "cmd": "running"}                             -> {"reply": N, "turns": [...]}
        each running turn as the ledger has saved it: its text and the messages showing it
    {"n": N, "cmd": "received"}                            -> {"reply": N, "received": K}
        how many decisions the scripted agents were written (``--scripted-approvals``)
    {"n": N, "cmd": "tally", "start": true}                -> {"reply": N, "calls": {...},
     "writer_calls": K, "round_trips": R}  the ledger's calls since the last start (on the
        writer connection, by store method: gateway/store/trip_tally.py); ``start`` begins
        a new count (bench.idle: what an idle host writes)
    {"n": N, "cmd": "quit"}  (or stdin EOF)                the gateway shuts down, exit 0

A rendered message is ``{"id", "conversation", "text", "card", "edits"}``; a card is
``{"title", "summary", "status_line", "actions": [{"label", "token", "effect"}],
"submit_token"}``. Its platform adopts edits of messages an earlier process sent (see
``MemoryPlatform(adopt_unknown=True)``), so after a restart the edited cards show up here too.

``AGENT_GATEWAY_CRASH_AT`` in the environment arms a crash point (gateway/sessions/faults.py).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

from adapters.launch import ConfiguredLauncher
from gateway.cards import Card
from gateway.config.model import Config
from gateway.domain import Actor, Answer, ConversationRef
from gateway.sessions.engine import Gateway
from gateway.store.trip_tally import TripTally
from platforms.memory.platform import MemoryPlatform, Rendered
from platforms.registry import parse_config
from tests.scripted_launcher import ScriptedLauncher
from tests.store_helpers import approval

log = logging.getLogger("gateway_proc")


def emit(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj, default=str) + "\n")
    sys.stdout.flush()


def card_json(card: Card) -> dict[str, Any]:
    return {
        "title": card.title,
        "summary": card.summary,
        "status_line": card.status_line,
        "actions": [
            {"label": a.label, "token": a.token, "effect": a.effect and a.effect.value}
            for a in card.actions
        ],
        "submit_token": card.form.submit_token if card.form is not None else None,
    }


def message_json(shown: Rendered) -> dict[str, Any]:
    return {
        "id": shown.ref.message_id,
        "conversation": asdict(shown.ref.conversation),
        "text": shown.text,
        "card": card_json(shown.card) if shown.card is not None else None,
        "edits": shown.edits,
    }


def conversation_of(raw: dict[str, Any]) -> ConversationRef:
    return ConversationRef(**raw)


def actor_of(user: str) -> Actor:
    return Actor(platform="memory", user_id=user, display=user.capitalize())


async def watch(memory: MemoryPlatform) -> None:
    """Emit every message the gateway sends or edits, as it is now."""
    seen: dict[str, int] = {}

    def changed() -> list[Rendered] | None:
        fresh = [m for m in memory.messages() if seen.get(m.ref.message_id) != len(m.versions)]
        return fresh or None

    while True:
        try:
            fresh = await memory.wait_for(changed, 3600)
        except TimeoutError:
            continue
        for shown in fresh:
            seen[shown.ref.message_id] = len(shown.versions)
            emit({"event": "rendered", "message": message_json(shown)})


async def report_lease(gateway: Gateway) -> None:
    """Emit each loss of the host's lease and each start over after it (issue 19): the
    events a test of a frozen or cut-off host process waits on."""
    while True:
        await gateway.lease_lost.wait()
        emit({"event": "lease_lost"})
        await gateway.started_over.wait()  # cleared before lease_lost was set
        emit({"event": "started_over"})


async def handle(
    gateway: Gateway, memory: MemoryPlatform, command: dict[str, Any]
) -> dict[str, Any]:
    name = command["cmd"]
    if name == "received":
        launcher = gateway.launcher
        assert isinstance(launcher, ScriptedLauncher), "needs --scripted-approvals"
        return {"received": len(launcher.received)}
    if name == "tally":
        writer = gateway.store.writer
        if command.get("start") or writer.tally is None:
            writer.tally = TripTally()
        return {
            "calls": dict(writer.tally.calls),
            "writer_calls": writer.trips,
            "round_trips": writer.round_trips or 0,
        }
    if name == "say":
        await memory.say(
            conversation_of(command["conversation"]),
            actor_of(command["user"]),
            command["text"],
            message_id=command.get("message_id"),
        )
        return {"ok": True}
    if name == "click":
        ack = await memory.click(
            conversation_of(command["conversation"]), actor_of(command["user"]), command["token"]
        )
        return {"accepted": ack.accepted, "text": ack.text}
    if name == "submit":
        answers = {
            qid: Answer(option_ids=tuple(raw.get("option_ids", ())), other=raw.get("other"))
            for qid, raw in command["answers"].items()
        }
        ack = await memory.submit(
            conversation_of(command["conversation"]),
            actor_of(command["user"]),
            command["token"],
            answers,
            private=bool(command.get("private", False)),
        )
        return {"accepted": ack.accepted, "text": ack.text}
    if name == "dump":
        return {"messages": [message_json(m) for m in memory.messages()]}
    if name == "copies":
        store = gateway.store
        copies = [
            copy
            for interaction in await store.interactions.list_open()
            for copy in await store.cards.list_for(interaction.id)
        ]
        return {
            "copies": [
                {
                    "interaction": c.interaction_id,
                    "conversation": asdict(c.conversation),
                    "message_ref": c.message_ref,
                    "state": c.state.value,
                    "rendered_version": c.rendered_version,
                }
                for c in copies
            ]
        }
    if name == "running":
        store = gateway.store
        turns = []
        for session in await store.sessions.list_sessions():
            turn = await store.turns.running(session.id)
            if turn is None:
                continue
            entries, shown = await store.timeline.of_turn(turn.id)
            turns.append(
                {
                    "text": "\n".join(entry.text for entry in entries),
                    "messages": [part.message_id for part in shown],
                }
            )
        return {"turns": turns}
    raise ValueError(f"unknown command {name!r}")


async def serve(
    config: Config,
    handshake_timeout: float,
    *,
    host: str | None = None,
    data_dir: Path | None = None,
    scripted_approvals: int | None = None,
) -> None:
    memory = MemoryPlatform(adopt_unknown=True, id_prefix=f"p{os.getpid()}-")
    launcher: ConfiguredLauncher | ScriptedLauncher
    if scripted_approvals is None:
        launcher = ConfiguredLauncher(env_source={}, handshake_timeout=handshake_timeout)
    else:
        asks = {
            f"approve{n}": approval(f"scripted:approve{n}", title="Run ls?")
            for n in range(scripted_approvals)
        }
        launcher = ScriptedLauncher(asks)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1 << 20)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    async with asyncio.TaskGroup() as tasks:
        watcher = tasks.create_task(watch(memory))
        async with Gateway(
            config,
            platforms={"memory": memory},
            launcher=launcher,
            host=host,
            data_dir=data_dir,
        ) as gateway:
            emit({"event": "ready", "pid": os.getpid()})
            reporter = tasks.create_task(report_lease(gateway))
            commands: set[asyncio.Task[None]] = set()
            while line := await reader.readline():
                command = json.loads(line)
                if command["cmd"] == "quit":
                    break
                task = tasks.create_task(run_command(gateway, memory, command))
                commands.add(task)
                task.add_done_callback(commands.discard)
            for task in commands:
                task.cancel()
            reporter.cancel()
        watcher.cancel()
    emit({"event": "stopped"})


async def run_command(gateway: Gateway, memory: MemoryPlatform, command: dict[str, Any]) -> None:
    try:
        reply = await handle(gateway, memory, command)
    except Exception as exc:
        log.exception("command %s failed", command.get("cmd"))
        reply = {"error": f"{type(exc).__name__}: {exc}"}
    emit({"reply": command["n"], **reply})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, required=True)
    parser.add_argument("--handshake-timeout", type=float, default=60.0)
    parser.add_argument("--host", default=None)  # one of several hosts (run --host)
    parser.add_argument("--data-dir", type=Path, default=None)  # each host its own
    parser.add_argument("--scripted-approvals", type=int, default=None)
    args = parser.parse_args()
    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s %(process)d %(name)s %(levelname)s %(message)s",
    )
    config = parse_config(args.config.read_text(encoding="utf-8"), str(args.config))
    asyncio.run(
        serve(
            config,
            args.handshake_timeout,
            host=args.host,
            data_dir=args.data_dir,
            scripted_approvals=args.scripted_approvals,
        )
    )


if __name__ == "__main__":
    main()
