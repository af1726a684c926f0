#!/usr/bin/env python3
"""Write what Slack, Discord and Telegram are sent for five cards, to docs/screenshots/cards/.

    .venv/bin/python scripts/write_card_payloads.py

The cards are drawn from the recorded requests (tests/card_samples.py: the real codecs over
the transcripts) by the gateway's own renderers: a Codex command, a Claude edit, a codex-acp
permission, a question, and the Codex command's card after its agent ended (orphaned). Each
file is one platform's payload of one card, as JSON; tests/test_card_matrix.py checks that
the committed files are what the renderers draw now.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.card_samples import payload_files  # noqa: E402

FOLDER = ROOT / "docs" / "screenshots" / "cards"


def main() -> None:
    FOLDER.mkdir(parents=True, exist_ok=True)
    for name, text in payload_files().items():
        (FOLDER / name).write_text(text)
        print(FOLDER / name)


if __name__ == "__main__":
    main()
