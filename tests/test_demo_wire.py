"""The demo agent writes what codex 0.171 writes: every message it sends has the shape (the
keys of every object, at every depth outside arrays) of a message with the same method in
the recordings of the real binary, tests/transcripts/codex-0.171/.

The agent is driven here with raw JSON lines, as a client of codex would drive it, so that
its ordering and ids are checked too, not only what the codec makes of them."""

from __future__ import annotations

import asyncio
import json
import sys
from collections import defaultdict
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from gateway.app.demo.scenarios import CRASH_EXIT_CODE

pytestmark = pytest.mark.timeout(60)

TRANSCRIPTS = Path(__file__).parent / "transcripts" / "codex-0.171"
DEADLINE = 20
Message = dict[str, Any]
Shape = frozenset[tuple[str, object]]


def shape(value: object) -> object:
    """The keys of an object, recursively; arrays and scalars are leaves."""
    if isinstance(value, dict):
        return frozenset((key, shape(item)) for key, item in value.items())
    return "·"


def _kind(message: Message) -> str:
    if "method" in message:
        return "request" if "id" in message else "notification"
    return "result" if "result" in message else "error"


def recorded_shapes() -> dict[tuple[str, str], set[object]]:
    """(kind, method) -> the shapes codex wrote; a result is filed under its request's method."""
    shapes: dict[tuple[str, str], set[object]] = defaultdict(set)
    for path in sorted(TRANSCRIPTS.glob("*.jsonl")):
        asked: dict[object, str] = {}
        for line in path.read_text().splitlines():
            entry = json.loads(line)
            message = entry["msg"]
            if entry["dir"] == "--":
                asked.clear()
            elif entry["dir"] == ">>" and "method" in message and "id" in message:
                asked[message["id"]] = message["method"]
            elif entry["dir"] == "<<":
                kind = _kind(message)
                method = message.get("method") or asked.get(message.get("id"), "?")
                shapes[(kind, method)].add(shape(message))
    return shapes


class RawClient:
    """A client of the app-server protocol writing and reading plain JSON lines."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.received: list[tuple[str, Message]] = []  # (method it answers or carries, message)
        self._asked: dict[int, str] = {}
        self._ids = iter(range(1, 1_000_000))

    async def write(self, message: Message) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        await self.process.stdin.drain()

    async def request(self, method: str, params: Message) -> int:
        request_id = next(self._ids)
        self._asked[request_id] = method
        await self.write({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        return request_id

    async def answer(self, request_id: int, result: Message) -> None:
        await self.write({"jsonrpc": "2.0", "id": request_id, "result": result})

    async def until(self, probe: Callable[[Message], bool]) -> list[Message]:
        """Messages up to and including the first one ``probe`` accepts."""
        assert self.process.stdout is not None
        seen: list[Message] = []
        async with asyncio.timeout(DEADLINE):
            while not seen or not probe(seen[-1]):
                line = await self.process.stdout.readline()
                assert line, "the demo agent closed its stdout"
                message = json.loads(line)
                method = message.get("method") or self._asked.get(message.get("id"), "?")
                self.received.append((method, message))
                seen.append(message)
        return seen

    async def call(self, method: str, params: Message) -> Message:
        request_id = await self.request(method, params)
        return (await self.until(lambda m: m.get("id") == request_id and "method" not in m))[-1]

    async def open_thread(self, cwd: Path, resume: str | None = None) -> str:
        await self.call("initialize", {"clientInfo": {"name": "agent-gateway", "version": "0"}})
        await self.write({"jsonrpc": "2.0", "method": "initialized"})
        params = {
            "cwd": str(cwd),
            "approvalPolicy": "on-request",
            "approvalsReviewer": "user",
            "sandbox": "workspace-write",
        }
        if resume is None:
            result = await self.call("thread/start", params)
        else:
            result = await self.call("thread/resume", {"threadId": resume, **params})
        thread_id = result["result"]["thread"]["id"]
        assert isinstance(thread_id, str)
        self.thread_id = thread_id
        return thread_id

    async def start_turn(self, text: str) -> str:
        input_ = [{"type": "text", "text": text, "text_elements": []}]
        result = await self.call("turn/start", {"threadId": self.thread_id, "input": input_})
        turn_id = result["result"]["turn"]["id"]
        assert isinstance(turn_id, str)
        return turn_id

    async def server_request(self) -> Message:
        return (await self.until(lambda m: "method" in m and "id" in m))[-1]

    async def turn_completed(self) -> Message:
        return (await self.until(lambda m: m.get("method") == "turn/completed"))[-1]


@asynccontextmanager
async def raw_demo(work_dir: Path) -> AsyncIterator[RawClient]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "gateway.app.demo.agent",
        "--pace",
        "0",
        "app-server",
        cwd=work_dir,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        yield RawClient(process)
    finally:
        if process.returncode is None:
            process.kill()
        await process.wait()


def assert_recorded(client: RawClient) -> None:
    recorded = recorded_shapes()
    for method, message in client.received:
        key = (_kind(message), method)
        assert key in recorded, f"codex 0.171 was never recorded writing {key}: {message}"
        assert shape(message) in recorded[key], f"no recorded {key} has this shape: {message}"


async def test_every_scenario_writes_only_recorded_shapes(workdir: Path) -> None:
    async with raw_demo(workdir) as client:
        await client.open_thread(workdir)
        for prompt, result in (
            ("command", {"decision": "accept"}),
            ("patch", {"decision": "accept"}),
            ("patch", {"decision": "acceptForSession"}),
            ("form", {"answers": {"colour": {"answers": ["Orange"]}}}),
        ):
            await client.start_turn(prompt)
            request = await client.server_request()
            await client.answer(request["id"], result)
            completed = await client.turn_completed()
            assert completed["params"]["turn"]["status"] == "completed"
        await client.start_turn("long")
        await client.turn_completed()
        await client.start_turn("what is this?")  # the menu
        await client.turn_completed()
        assert client.process.stdin is not None
        client.process.stdin.close()
        assert await client.process.wait() == 0
    assert_recorded(client)
    requests = [m for _, m in client.received if _kind(m) == "request"]
    assert [m["id"] for m in requests] == [0, 1, 2, 3]  # their own id space, from 0


async def test_interrupt_ends_the_turn_then_resolves_the_open_request(workdir: Path) -> None:
    async with raw_demo(workdir) as client:
        await client.open_thread(workdir)
        turn_id = await client.start_turn("command")
        request = await client.server_request()
        interrupt = await client.request(
            "turn/interrupt", {"threadId": client.thread_id, "turnId": turn_id}
        )
        after = await client.until(lambda m: m.get("method") == "serverRequest/resolved")
    # the order of interrupt_pending_approval: {} for the interrupt, idle, turn/completed
    # interrupted, then the request nobody answered is resolved
    assert [m.get("method", m.get("id")) for m in after] == [
        interrupt,
        "thread/status/changed",
        "turn/completed",
        "serverRequest/resolved",
    ]
    assert after[0]["result"] == {}
    assert after[2]["params"]["turn"]["status"] == "interrupted"
    assert after[3]["params"]["requestId"] == request["id"]
    assert_recorded(client)


async def test_a_new_process_resumes_the_thread_and_crash_exits_with_a_reason(
    workdir: Path,
) -> None:
    async with raw_demo(workdir) as first:
        thread_id = await first.open_thread(workdir)
    async with raw_demo(workdir) as client:
        assert await client.open_thread(workdir, resume=thread_id) == thread_id
        await client.start_turn("crash")
        request = await client.server_request()
        assert request["id"] == 0 and request["method"] == "item/commandExecution/requestApproval"
        assert await client.process.wait() == CRASH_EXIT_CODE
        assert client.process.stderr is not None
        stderr = (await client.process.stderr.read()).decode()
    assert "crashing on purpose" in stderr and "request 0 open" in stderr
    assert_recorded(client)


async def test_requests_before_initialize_and_unknown_methods_are_refused(workdir: Path) -> None:
    async with raw_demo(workdir) as client:
        early = await client.call("thread/start", {"cwd": str(workdir)})
        assert early["error"]["message"] == "Not initialized"
        await client.open_thread(workdir)
        unknown = await client.call("thread/fork", {})
        assert unknown["error"]["code"] == -32601
        idle = await client.call("turn/interrupt", {"threadId": client.thread_id, "turnId": "x"})
        assert "error" in idle


async def test_a_scenario_that_fails_ends_its_turn_failed(workdir: Path) -> None:
    async with raw_demo(workdir) as client:
        await client.open_thread(workdir / "missing")  # a work dir that does not exist
        await client.start_turn("command")
        request = await client.server_request()
        await client.answer(request["id"], {"decision": "accept"})
        completed = await client.turn_completed()
    turn = completed["params"]["turn"]
    assert turn["status"] == "failed"
    assert "the demo agent failed" in turn["error"]["message"]
    assert_recorded(client)
