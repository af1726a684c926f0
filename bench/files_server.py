"""The fake Telegram Bot API of the tests in a process of its own, for ``bench.files_in``: the
file it serves lives in this process's memory, not in the gateway's whose RSS is measured.

    python -m bench.files_server --megabytes 20

Prints ``port N`` once serving; each line ``send`` read on stdin pushes a private-chat
document of that size (``big.bin``, random bytes), and prints ``sent SHA256``; stdin closed:
it stops.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import sys

from tests.servers.fake_telegram import FakeTelegram
from tests.servers.telegram_people import Person, document_update, private_chat

ALICE = Person(111, "Alice", "alice")


async def serve(megabytes: int) -> None:
    async with FakeTelegram() as fake:
        print(f"port {fake.port}", flush=True)
        loop = asyncio.get_running_loop()
        while line := await loop.run_in_executor(None, sys.stdin.readline):
            if line.strip() != "send":
                continue
            content = os.urandom(megabytes * 1024 * 1024)
            update = document_update(
                fake, private_chat(ALICE), ALICE, content, "big.bin", caption="keep this"
            )
            await fake.push(update)
            print(f"sent {hashlib.sha256(content).hexdigest()}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.files_server", description=__doc__)
    parser.add_argument("--megabytes", type=int, default=20)
    asyncio.run(serve(parser.parse_args().megabytes))


if __name__ == "__main__":
    main()
