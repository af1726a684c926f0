"""GrowingSplit gives exactly the chunks of split_text, for text streamed in at its end."""

from __future__ import annotations

import random

import pytest

from gateway.render.textsplit import GrowingSplit, split_text


def _piece(rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.02:
        return "\n```python\n"
    if roll < 0.04:
        return "\n```\n"
    if roll < 0.15:
        return "\n"
    if roll < 0.2:
        return "z" * rng.randint(50, 700)  # a word longer than a message
    return rng.choice(["word ", "a ", "streamed ", "text, ", "x" * rng.randint(1, 30)])


@pytest.mark.parametrize("seed", range(40))
def test_growing_text_splits_as_a_whole(seed: int) -> None:
    rng = random.Random(seed)
    limit = rng.choice([64, 100, 300, 4096])
    splitter = GrowingSplit(limit)
    text = ""
    for _ in range(rng.randint(50, 400)):
        text += "".join(_piece(rng) for _ in range(rng.randint(1, 20)))
        if rng.random() < 0.03:  # the item's final text replaces what streamed
            text = text[: rng.randint(0, len(text))] + "final"
        assert splitter.split(text) == split_text(text, limit)


def test_a_long_plain_stream_keeps_its_start_settled() -> None:
    splitter = GrowingSplit(100)
    text = ""
    for i in range(2000):
        text += f"w{i} " if i % 16 else f"w{i}\n"
        assert splitter.split(text) == split_text(text, 100)
