"""The demo agent: a small program that speaks the Codex app-server protocol over stdio.

    python -m gateway.app.demo.agent [--pace FACTOR] [app-server [codex options...]]

The gateway starts it as a ``codex-app-server`` project whose argv is
``[sys.executable, "-m", "gateway.app.demo.agent"]``; the launcher appends ``app-server`` and the
project's codex options (``--enable FEATURE``, ``-c key=value``), which are accepted and
ignored. ``--pace`` scales its pauses between streamed pieces (0: no pauses). It needs no
network and no key, keeps nothing on disk but what its scenarios write in its work dir, and
exits when stdin closes.

It answers what a client of codex 0.171 sends (``initialize``, ``thread/start``,
``thread/resume``, ``turn/start``, ``turn/interrupt``; anything else gets -32601) and writes
what codex writes, shaped as in ``tests/transcripts/codex-0.171/`` (:mod:`gateway.app.demo.wire`).
What a turn does is picked from the prompt (:mod:`gateway.app.demo.scenarios`).

Standard library only: it stands for a real agent binary and must not load the gateway.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
from collections.abc import AsyncIterator, Sequence
from typing import Any

from gateway.app.demo.scenarios import Scenario, pick
from gateway.app.demo.turn import Memory, Turn, TurnCancelled
from gateway.app.demo.wire import (
    Json,
    Wire,
    new_id,
    now_ms,
    sandbox_policy,
    thread_object,
    turn_error,
    turn_object,
    user_message_item,
)

__all__ = ["VERSION", "DemoAgent", "main"]

VERSION = "0.171.0+demo"  # the protocol version it imitates, marked as the demo

# JSON-RPC error codes (JSON-RPC 2.0 section 5.1)
_PARSE_ERROR = -32700
_INVALID_REQUEST = -32600
_METHOD_NOT_FOUND = -32601
_INVALID_PARAMS = -32602


# What a thread/resume result adds (resume.jsonl): the demo has no history to page through.
_RESUMED: Json = {
    "collaborationMode": {
        "mode": "default",
        "settings": {"model": "demo", "reasoning_effort": None, "developer_instructions": None},
    },
    "initialTurnsPage": None,
    "turnsBackwardsCursor": None,
    "itemsBackwardsCursor": None,
}


def _object(value: object) -> Json:
    return value if isinstance(value, dict) else {}


def _mode(params: Json) -> str | None:
    """The collaboration mode turn/start asks for (``collaborationMode.mode``: "plan" or
    "default"), None where it names none."""
    mode = _object(params.get("collaborationMode")).get("mode")
    return mode if isinstance(mode, str) else None


def _text(params: Json, key: str, default: str) -> str:
    value = params.get(key)
    return value if isinstance(value, str) and value else default


class DemoAgent:
    """One app-server connection with (at most) one thread and one running turn."""

    def __init__(self, wire: Wire, *, pace: float = 1.0) -> None:
        self._wire = wire
        self._pace = pace
        self._memory = Memory()
        self._initialized = False
        self._client = "agent-gateway"
        self._thread_id: str | None = None
        self._cwd = os.getcwd()
        self._turn: Turn | None = None
        self._turn_task: asyncio.Task[None] | None = None
        self._tasks: asyncio.TaskGroup | None = None

    async def serve(self, lines: AsyncIterator[bytes]) -> None:
        """Answer every line until the input ends; a running turn is then abandoned."""
        async with asyncio.TaskGroup() as tasks:
            self._tasks = tasks
            async for line in lines:
                if line.strip():
                    self.on_line(line)
            if self._turn_task is not None:
                self._turn_task.cancel()

    def on_line(self, line: bytes) -> None:
        try:
            message: Any = json.loads(line)
        except ValueError:
            self._wire.error(None, _PARSE_ERROR, "Parse error")
            return
        if not isinstance(message, dict):
            self._wire.error(None, _INVALID_REQUEST, "Invalid request")
            return
        method, request_id = message.get("method"), message.get("id")
        if isinstance(method, str):
            if "id" in message:
                self._on_request(method, request_id, _object(message.get("params")))
            return  # a notification ("initialized") needs no answer
        if "result" in message:
            self._on_answer(request_id, _object(message.get("result")))
        else:
            self._on_answer(request_id, {"error": message.get("error")})

    # --- client requests ------------------------------------------------------------------

    def _on_request(self, method: str, request_id: object, params: Json) -> None:
        if method == "initialize":
            self._initialize(request_id, params)
        elif not self._initialized:
            self._wire.error(request_id, _INVALID_REQUEST, "Not initialized")
        elif method in ("thread/start", "thread/resume"):
            self._open_thread(method, request_id, params)
        elif method == "turn/start":
            self._start_turn(request_id, params)
        elif method == "turn/interrupt":
            self._interrupt(request_id, params)
        elif method == "thread/name/set":  # /name: ThreadSetNameResponse is {}
            self._wire.result(request_id, {})
        else:
            self._wire.error(request_id, _METHOD_NOT_FOUND, f"method not found: {method}")

    def _initialize(self, request_id: object, params: Json) -> None:
        # InitializeResponse, as in every transcript: userAgent is
        # "<client>/<version> (<os>; <arch>) <terminal> (<client>; <client version>)".
        client = _object(params.get("clientInfo"))
        self._client = _text(client, "name", "client")
        client_version = _text(client, "version", "0")
        system = f"{platform.system()} {platform.release()}".strip()
        user_agent = (
            f"{self._client}/{VERSION} ({system}; {platform.machine()}) "
            f"agent-gateway-demo ({self._client}; {client_version})"
        )
        self._initialized = True
        self._wire.result(
            request_id,
            {
                "userAgent": user_agent,
                "codexHome": self._cwd,
                "platformFamily": "windows" if os.name == "nt" else "unix",
                "platformOs": {"darwin": "macos"}.get(sys.platform, sys.platform),
            },
        )

    def _open_thread(self, method: str, request_id: object, params: Json) -> None:
        # ThreadStartResponse / ThreadResumeResponse (shell_accept, resume): the policy in
        # force is what was asked; the demo always asks before it acts.
        if method == "thread/resume":
            thread_id = params.get("threadId")
            if not isinstance(thread_id, str) or not thread_id:
                self._wire.error(request_id, _INVALID_PARAMS, "thread/resume needs a threadId")
                return
        else:
            thread_id = new_id()
        self._cwd = _text(params, "cwd", self._cwd)
        self._thread_id = thread_id
        thread = thread_object(thread_id, self._cwd, originator=self._client)
        self._wire.result(
            request_id,
            {
                "thread": thread,
                "model": "demo",
                "modelProvider": "demo",
                "serviceTier": None,
                "disabledPluginIds": [],
                "cwd": self._cwd,
                "runtimeWorkspaceRoots": [self._cwd],
                "instructionSources": [],
                "approvalPolicy": params.get("approvalPolicy") or "on-request",
                "approvalsReviewer": params.get("approvalsReviewer") or "user",
                "sandbox": sandbox_policy(_text(params, "sandbox", "workspace-write")),
                "activePermissionProfile": None,
                "reasoningEffort": None,
                "multiAgentMode": "explicitRequestOnly",
                **(_RESUMED if method == "thread/resume" else {}),
            },
        )
        if method == "thread/start":
            self._wire.notify("thread/started", {"thread": thread})

    def _start_turn(self, request_id: object, params: Json) -> None:
        thread_id = self._thread_id
        if thread_id is None or params.get("threadId") != thread_id:
            self._wire.error(request_id, _INVALID_REQUEST, "thread not found")
            return
        if self._turn is not None or self._tasks is None:
            self._wire.error(request_id, _INVALID_REQUEST, "a turn is already running")
            return
        inputs = params.get("input")
        text = " ".join(
            str(part.get("text", ""))
            for part in (inputs if isinstance(inputs, list) else [])
            if isinstance(part, dict) and part.get("type") == "text"
        )
        turn = Turn(
            self._wire,
            self._memory,
            thread_id=thread_id,
            turn_id=new_id(),
            cwd=self._cwd,
            prompt=text,
            pace=self._pace,
            mode=_mode(params),
        )
        # turn/start result, then turn/started and the user's message (shell_accept)
        self._wire.result(request_id, {"turn": turn_object(turn.id)})
        turn.status()
        started = turn_object(turn.id, started_at=turn.started_ms // 1000)
        self._wire.notify("turn/started", {"threadId": thread_id, "turn": started})
        user_item = new_id()
        turn.item_started(user_message_item(user_item, text, started_ms=now_ms(), done=False))
        turn.item_completed(user_message_item(user_item, text, started_ms=now_ms(), done=True))
        self._turn = turn
        self._turn_task = self._tasks.create_task(self._run_turn(turn, pick(text, mode=turn.mode)))

    def _interrupt(self, request_id: object, params: Json) -> None:
        # TurnInterruptResponse is {} (interrupt_pending_approval); the turn then completes
        # "interrupted" and the requests nobody answered are resolved after it.
        turn, task = self._turn, self._turn_task
        if turn is None or task is None or params.get("turnId") not in (None, turn.id):
            self._wire.error(request_id, _INVALID_REQUEST, "no such turn is running")
            return
        self._wire.result(request_id, {})
        turn.interrupt_requested = True
        task.cancel()

    # --- answers to our requests ----------------------------------------------------------

    def _on_answer(self, request_id: object, result: Json) -> None:
        turn = self._turn
        if isinstance(request_id, int) and turn is not None and turn.answer(request_id, result):
            return
        # codex ignores an answer to a request that is no longer open; so does the demo
        sys.stderr.write(f"demo agent: ignored an answer to request {request_id!r}\n")
        sys.stderr.flush()

    # --- the turn -------------------------------------------------------------------------

    async def _run_turn(self, turn: Turn, scenario: Scenario) -> None:
        status, error = "completed", None
        try:
            await scenario.run(turn)
        except TurnCancelled:
            status = "interrupted"  # the person chose "cancel" (shell_cancel)
        except asyncio.CancelledError:
            if not turn.interrupt_requested:
                raise  # stdin closed: nobody is left to tell
            current = asyncio.current_task()
            if current is not None:
                current.uncancel()
            status = "interrupted"
        except Exception as exc:  # a failing scenario must end its turn, not hang it
            status, error = "failed", f"the demo agent failed: {exc!r}"
            self._wire.notify(
                "error",
                {
                    "error": turn_error(error),
                    "willRetry": False,
                    "threadId": turn.thread_id,
                    "turnId": turn.id,
                },
            )
        self._complete(turn, status, error)

    def _complete(self, turn: Turn, status: str, error: str | None) -> None:
        completed = now_ms()
        body = turn_object(
            turn.id,
            status=status,
            items=turn.items if status == "completed" else [],
            error=error,
            started_at=turn.started_ms // 1000,
            completed_at=completed // 1000,
            duration_ms=completed - turn.started_ms,
        )
        idle = {"threadId": turn.thread_id, "status": {"type": "idle"}}
        self._wire.notify("thread/status/changed", idle)
        self._wire.notify("turn/completed", {"threadId": turn.thread_id, "turn": body})
        for request_id in sorted(turn.open_requests):
            resolved = {"threadId": turn.thread_id, "requestId": request_id}
            self._wire.notify("serverRequest/resolved", resolved)
        turn.open_requests.clear()
        self._turn, self._turn_task = None, None


async def _stdin_lines() -> AsyncIterator[bytes]:
    loop = asyncio.get_running_loop()
    while line := await loop.run_in_executor(None, sys.stdin.buffer.readline):
        yield line


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m gateway.app.demo.agent",
        description="The agent-gateway demo agent: speaks the Codex app-server protocol "
        "over stdio. Arguments after 'app-server' (codex options) are accepted and ignored.",
    )
    parser.add_argument(
        "--pace", type=float, default=1.0, help="scale the pauses between streamed pieces"
    )
    parser.add_argument(
        "--version",
        action="version",
        version=f"agent-gateway-demo {VERSION} (speaks codex app-server 0.171)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    ours = args[: args.index("app-server")] if "app-server" in args else args
    options = _parser().parse_args(ours)
    if options.pace < 0:
        _parser().error("--pace must not be negative")
    try:
        asyncio.run(DemoAgent(Wire(), pace=options.pace).serve(_stdin_lines()))
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
