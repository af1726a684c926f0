"""How soon a streamed turn's text is exact on a rate-limited platform, and how many edits it
took: a measurement.

    python -m bench.paced_turns [--turns 5] [--seconds 5] [--every 0.05] [--json]

The whole gateway (engine, ledger, outlets) on the Telegram platform, against the tests'
fake Bot API, which answers 429 past one message a second per chat (Telegram's pace for a
chat: edits count). A puppet agent (tests/puppet_launcher.py) streams each turn as a model
does, much faster than the chat may be edited: a delta every ``every`` seconds for
``seconds`` seconds, then its final message and the turn's end. Measured per turn, on the
fake's side (what the person sees): the time from the agent's first delta to its text in
the chat, from the turn's end to the chat showing the exact final text, and how many times
the turn's message was edited for the deltas the agent wrote; over the run, the 429s the
fake answered.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.figures import Figure, percentile
from tests.puppet_launcher import PuppetLauncher
from tests.servers.fake_telegram import FakeTelegram, Sent
from tests.telegram_harness import ALICE, on_telegram, telegram_config

NAME = "paced_turns"
DEADLINE = 60.0
EXACT_TARGET_S = 1.5  # one edit interval (1 s) and the round trip


def parts_of(turn: int, count: int) -> list[str]:
    """The deltas of one turn; joined, its whole text (each turn's is its own)."""
    return [f"turn {turn} part 0"] + [f", part {n}" for n in range(1, count)]


def shown(fake: FakeTelegram, probe: Callable[[str], bool]) -> Callable[[], Sent | None]:
    """The bot's first message in Alice's chat whose text ``probe`` accepts, if any now."""

    def find() -> Sent | None:
        return next((m for m in fake.bot_messages(ALICE.id) if probe(m.text)), None)

    return find


def starting(head: str) -> Callable[[str], bool]:
    return lambda text: text.startswith(head)


async def shown_at(fake: FakeTelegram, probe: Callable[[str], bool]) -> float:
    """When a message of the bot's whose text ``probe`` accepts is shown."""
    await fake.wait_for(shown(fake, probe), DEADLINE)
    return time.monotonic()


async def measure(turns: int, seconds: float, every: float) -> dict[str, Any]:
    deltas = max(1, round(seconds / every))
    exact_after: list[float] = []
    first_after: list[float] = []
    edits: list[int] = []
    with tempfile.TemporaryDirectory(prefix="paced-turns-") as tmp:
        work = Path(tmp) / "work"
        work.mkdir()
        async with FakeTelegram() as fake:
            config = telegram_config(fake, Path(tmp) / "data", work_dir=work)
            launcher = PuppetLauncher()
            async with on_telegram(config, fake, launcher) as tg:
                for turn in range(turns):
                    await tg.say(ALICE, f"turn {turn}")
                    agent, _ = await launcher.prompt(DEADLINE)
                    agent.start_turn()
                    parts = parts_of(turn, deltas)
                    item = f"msg-{turn}"
                    whole = "".join(parts)
                    async with asyncio.TaskGroup() as tasks:
                        started = time.monotonic()
                        first = tasks.create_task(shown_at(fake, starting(parts[0])))
                        for part in parts:
                            agent.say(item, part)
                            await asyncio.sleep(every)  # the agent's pace, the workload's clock
                        agent.said(item, whole)
                        agent.complete()
                        ended = time.monotonic()
                    first_after.append(first.result() - started)
                    message = await fake.wait_for(shown(fake, whole.__eq__), DEADLINE)
                    exact_after.append(time.monotonic() - ended)
                    edits.append(len(message.versions) - 1)
            too_many = len(fake.too_many)
    ordered = sorted(exact_after)
    firsts = sorted(first_after)
    return {
        "turns": turns,
        "deltas_per_turn": deltas,
        "seconds_per_turn": seconds,
        "first_text_p50_s": round(percentile(firsts, 0.5), 2),
        "first_text_max_s": round(firsts[-1], 2),
        "exact_after_p50_s": round(percentile(ordered, 0.5), 2),
        "exact_after_max_s": round(ordered[-1], 2),
        "edits_per_turn_mean": round(sum(edits) / len(edits), 1),
        "edits_per_turn_max": max(edits),
        "429s": too_many,
    }


def figures_of(found: dict[str, Any]) -> list[Figure]:
    seconds = found["seconds_per_turn"]
    most_edits = int(seconds) + 1  # one a second while it streams, and the final one
    return [
        Figure(
            benchmark=NAME,
            name="first delta -> its text shown (p50 / max)",
            value=f"{found['first_text_p50_s']} s / {found['first_text_max_s']} s",
        ),
        Figure(
            benchmark=NAME,
            name="turn end -> exact final text (p50 / max)",
            value=(
                f"{found['exact_after_p50_s']} s / {found['exact_after_max_s']} s"
                f" (n={found['turns']})"
            ),
            target=f"max <= {EXACT_TARGET_S} s",
            met=found["exact_after_max_s"] <= EXACT_TARGET_S,
        ),
        Figure(
            benchmark=NAME,
            name="edits of a turn's message (mean / max)",
            value=(
                f"{found['edits_per_turn_mean']} / {found['edits_per_turn_max']} for"
                f" {found['deltas_per_turn']} deltas in {seconds:g} s"
            ),
            target=f"<= {most_edits} (1 a second)",
            met=found["edits_per_turn_max"] <= most_edits,
        ),
        Figure(
            benchmark=NAME,
            name="429s",
            value=str(found["429s"]),
            target="0",
            met=found["429s"] == 0,
        ),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--every", type=float, default=0.05)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    found = asyncio.run(measure(args.turns, args.seconds, args.every))
    figures = figures_of(found)
    if args.json:
        print(json.dumps([f.to_json() for f in figures]))
    else:
        print(json.dumps(found))
        for figure in figures:
            print(figure.line())


if __name__ == "__main__":
    main()
