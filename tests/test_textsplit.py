import random

import pytest

from gateway.render.textsplit import fit_rendered, split_text


def _strip_fences(text: str) -> str:
    return "".join(line for line in text.splitlines() if not line.startswith("```"))


def test_short_text_is_one_message() -> None:
    assert split_text("hello", 4096) == ["hello"]


def test_code_block_split_is_closed_and_reopened() -> None:
    code = "".join(f"print({i})\n" for i in range(400))
    text = f"Here it is:\n```python\n{code}```\nDone."
    parts = split_text(text, 500)
    assert len(parts) > 3
    assert all(len(part) <= 500 for part in parts)
    for part in parts[1:-1]:
        assert part.startswith("```python\n") and part.endswith("```")
    assert _strip_fences("".join(parts)) == _strip_fences(text)


@pytest.mark.parametrize("seed", range(50))
def test_random_text_keeps_every_character_within_the_limit(seed: int) -> None:
    rng = random.Random(seed)
    lines = []
    for _ in range(rng.randint(1, 300)):
        roll = rng.random()
        if roll < 0.05:
            lines.append("```sh")
        elif roll < 0.1:
            lines.append("```")
        else:
            lines.append("y" * rng.randint(0, 900 if rng.random() < 0.1 else 80))
    text = "\n".join(lines)
    limit = rng.choice([64, 100, 300, 4096])
    parts = split_text(text, limit)
    assert all(len(part) <= limit for part in parts)
    assert _strip_fences("".join(parts)).replace("\n", "") == _strip_fences(text).replace("\n", "")


def test_a_part_longer_once_rendered_is_split_again_and_nothing_is_lost() -> None:
    def doubled_marks(part: str) -> int:  # a renderer that escapes every underscore
        return len(part) + part.count("_")

    text = "".join(f"row {n:03d} a_b_c_d_e_f_g_h\n" for n in range(300))
    parts = fit_rendered(split_text(text, 500), 500, doubled_marks)
    assert len(parts) > len(split_text(text, 500))
    assert all(doubled_marks(part) <= 500 for part in parts)
    assert "".join(parts) == text
    assert fit_rendered(["x" * 600], 500, len) == ["x" * 600]  # len: as split, untouched
