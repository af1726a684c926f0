"""A scripted fake of the Anthropic Messages API, for driving the real Claude Code CLI offline.

Claude Code is pointed at it with ``ANTHROPIC_BASE_URL = fake.base_url`` (see
``tests/claude_env.py``). It listens on 127.0.0.1 on a port the kernel picks, answers
``POST /v1/messages`` with a Server-Sent-Events stream (``message_start``,
``content_block_*``, ``message_delta``, ``message_stop``; TESTING.md), ``HEAD /``,
``GET /v1/models`` and ``POST /v1/messages/count_tokens``, and records every request body so
that a test can assert what the agent sent back to the model (the ``tool_result`` after a
deny, the answers to a question).

A *scenario* is a list of steps, one per model call of a turn. A turn starts with a user
prompt: the turn of a request is the number of prompt texts in its ``messages`` (Claude Code
sends the whole history every time; ``<system-reminder>`` blocks and the CLI's own
"[Request interrupted ...]" notes are not prompts), and its step is the number of user
messages carrying a ``tool_result`` after the last prompt. Each new turn takes its scenario
from ``choose(request)`` if given, else from the queue filled by :meth:`FakeAnthropic.enqueue`,
else the default scenario. A request past the end of its scenario gets a text reply saying
so, so a test never hangs on it. Requests without ``tools`` (the CLI's side queries) get a
short text and belong to no turn.

Building blocks: :func:`text`, :func:`tool_use` and its shorthands :func:`bash`,
:func:`ask_user_question`, :func:`edit`, :func:`write`, :func:`read`, :func:`exit_plan_mode`,
and :func:`http_error`.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

from tests.servers.http_server import ReceivedRequest, RecordingServer, decode_json

__all__ = [
    "CHECKS",
    "COLOR",
    "DONE",
    "FakeAnthropic",
    "ModelRequest",
    "Reply",
    "Scenario",
    "Step",
    "ask_user_question",
    "bash",
    "edit",
    "exit_plan_mode",
    "http_error",
    "read",
    "text",
    "tool_use",
    "write",
]

MODEL = "claude-sonnet-4-5-20250929"
NOT_PROMPTS = ("<system-reminder>", "[Request interrupted")
ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


# --- what the agent sent ---------------------------------------------------------------------


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content or [] if isinstance(b, dict)]


def _is_prompt(block: dict[str, Any]) -> bool:
    text = block.get("text")
    return (
        block.get("type") == "text"
        and isinstance(text, str)
        and not text.lstrip().startswith(NOT_PROMPTS)
    )


@dataclass(frozen=True, kw_only=True)
class ModelRequest(ReceivedRequest):
    """One request the agent made, as received; ``turn`` and ``step`` place it in a scenario."""

    turn: int | None = None
    step: int = 0

    @property
    def messages(self) -> list[dict[str, Any]]:
        items = self.body.get("messages")
        return [m for m in items if isinstance(m, dict)] if isinstance(items, list) else []

    @property
    def tool_names(self) -> frozenset[str]:
        return frozenset(str(t.get("name")) for t in self.body.get("tools") or [])

    def prompts(self) -> list[str]:
        """The user's prompt texts, in order."""
        return [
            str(block["text"])
            for message in self.messages
            if message.get("role") == "user"
            for block in _blocks(message)
            if _is_prompt(block)
        ]

    def tool_results(self) -> list[dict[str, Any]]:
        """Every ``tool_result`` block the agent sent, in order."""
        return [
            block
            for message in self.messages
            if message.get("role") == "user"
            for block in _blocks(message)
            if block.get("type") == "tool_result"
        ]

    def tool_result(self, tool_use_id: str | None = None) -> tuple[str, bool] | None:
        """(text, is_error) of the result for ``tool_use_id`` (default: the last one)."""
        results = [r for r in self.tool_results() if tool_use_id in (None, r.get("tool_use_id"))]
        if not results:
            return None
        content = results[-1].get("content")
        if isinstance(content, list):
            content = "".join(str(c.get("text", "")) for c in content if isinstance(c, dict))
        return str(content or ""), bool(results[-1].get("is_error"))


def _place(request: ModelRequest) -> ModelRequest:
    """The request's turn (prompts so far) and step (tool-result messages since the last)."""
    turn, step = 0, 0
    for message in request.messages:
        if message.get("role") != "user":
            continue
        blocks = _blocks(message)
        if any(_is_prompt(block) for block in blocks):
            turn, step = turn + 1, 0
        elif any(block.get("type") == "tool_result" for block in blocks):
            step += 1
    return replace(request, turn=turn, step=step)


# --- what the fake answers -------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Reply:
    """Content blocks to stream, or an HTTP error status with an Anthropic error body."""

    content: tuple[dict[str, Any], ...] = ()
    stop_reason: str = "end_turn"
    status: int = 200
    error_body: dict[str, Any] | None = None


# a step gets the request and a fresh tool_use id, and says what to answer
Step = Callable[[ModelRequest, str], Reply]
Scenario = Sequence[Step]
Chooser = Callable[[ModelRequest], Scenario]


def text(body: str | Callable[[ModelRequest], str]) -> Step:
    """An assistant text reply that ends the turn; ``body`` may read the request."""

    def step(request: ModelRequest, tool_use_id: str) -> Reply:
        said = body(request) if callable(body) else body
        return Reply(content=({"type": "text", "text": said},))

    return step


def tool_use(name: str, tool_input: dict[str, Any], *, preface: str | None = None) -> Step:
    """A call of the tool ``name``, after an optional short text."""

    def step(request: ModelRequest, tool_use_id: str) -> Reply:
        block = {"type": "tool_use", "id": tool_use_id, "name": name, "input": tool_input}
        pre = ({"type": "text", "text": preface},) if preface else ()
        return Reply(content=(*pre, block), stop_reason="tool_use")

    return step


def bash(command: str, description: str = "Run a command") -> Step:
    return tool_use("Bash", {"command": command, "description": description}, preface="On it.")


def ask_user_question(questions: Iterable[dict[str, Any]]) -> Step:
    """``AskUserQuestion``; each question has question, header, options, multiSelect."""
    return tool_use("AskUserQuestion", {"questions": list(questions)})


def read(file_path: str) -> Step:
    return tool_use("Read", {"file_path": file_path})


def edit(file_path: str, old_string: str, new_string: str, *, replace_all: bool = False) -> Step:
    tool_input: dict[str, Any] = {
        "file_path": file_path,
        "old_string": old_string,
        "new_string": new_string,
    }
    if replace_all:
        tool_input["replace_all"] = True
    return tool_use("Edit", tool_input)


def write(file_path: str, content: str) -> Step:
    return tool_use("Write", {"file_path": file_path, "content": content})


def exit_plan_mode(plan: str) -> Step:
    return tool_use("ExitPlanMode", {"plan": plan})


def http_error(status: int, message: str = "fake failure", *, times: int | None = None) -> Step:
    """The model call fails with HTTP ``status``; with ``times``, only the first ``times``
    calls at this step fail and later ones (the CLI's retries) get a short text."""
    failed = itertools.count()

    def step(request: ModelRequest, tool_use_id: str) -> Reply:
        if times is not None and next(failed) >= times:
            return Reply(content=({"type": "text", "text": "Recovered after the retry."},))
        return Reply(status=status, error_body=_api_error(status, message))

    return step


def _api_error(status: int, message: str = "fake failure") -> dict[str, Any]:
    """The Messages API's error body for ``status``."""
    kind = ERROR_TYPES.get(status, "api_error")
    return {"type": "error", "error": {"type": kind, "message": message}}


# --- examples the tests and the transcript recorder share ------------------------------------

DONE = text(lambda request: f"Done. The tool said: {request.tool_result()}")
COLOR = {
    "question": "Which color should the button be?",
    "header": "Color",
    "options": [{"label": "Red", "description": "Warm"}, {"label": "Blue", "description": "Cool"}],
    "multiSelect": False,
}
CHECKS = {
    "question": "Which checks should run?",
    "header": "Checks",
    "options": [
        {"label": "Lint", "description": "ruff"},
        {"label": "Types", "description": "mypy"},
        {"label": "Tests", "description": "pytest"},
    ],
    "multiSelect": True,
}


# --- the server ------------------------------------------------------------------------------


@dataclass
class FakeAnthropic(RecordingServer[ModelRequest]):
    """The fake model server. ``async with FakeAnthropic(scenario) as fake: fake.base_url``."""

    response_headers: ClassVar[Mapping[str, str]] = {"Request-Id": "req_fake"}

    scenario: Scenario = (text("Hello from the fake model."),)
    choose: Chooser | None = None
    _queue: deque[Scenario] = field(default_factory=deque)
    _turns: dict[int, Scenario] = field(default_factory=dict)

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def enqueue(self, *scenarios: Scenario) -> None:
        """Scenarios for the next new turns, one each, in order."""
        self._queue.extend(scenarios)

    def model_requests(self) -> list[ModelRequest]:
        """The main-loop requests (the ones with tools), in order."""
        return [r for r in self.requests if r.turn is not None]

    async def _handle(
        self,
        method: str,
        path: str,
        headers: dict[str, str],
        raw: bytes,
        writer: asyncio.StreamWriter,
    ) -> None:
        path = path.split("?")[0].rstrip("/")
        n = next(self._counter)
        body = decode_json(raw)
        request = ModelRequest(n=n, method=method, path=path, headers=headers, body=body)
        if method == "HEAD":
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            await writer.drain()
            return
        if method == "GET" and path == "/v1/models":
            model = {"type": "model", "id": MODEL, "display_name": "Fake", "created_at": ""}
            await self._write_json(writer, 200, {"data": [model], "has_more": False})
            return
        if method == "POST" and path == "/v1/messages/count_tokens":
            await self._write_json(writer, 200, {"input_tokens": 100})
            return
        if method != "POST" or path != "/v1/messages":
            await self._record(request)
            await self._write_json(writer, 404, _api_error(404, f"fake: no {method} {path}"))
            return
        if not body.get("tools"):  # a side query (title, summary): not part of any turn
            await self._record(request)
            reply = Reply(content=({"type": "text", "text": "Fake title"},))
        else:
            request = _place(request)
            await self._record(request)
            reply = self._reply(request, f"toolu_fake_{n:04d}")
        if reply.status != 200:
            error = reply.error_body or _api_error(reply.status)
            await self._write_json(writer, reply.status, error)
            return
        events = _stream_events(f"msg_fake_{n:04d}", str(body.get("model") or MODEL), reply)
        await self._write_sse(writer, events)

    def _error_body(self, status: int, message: str) -> dict[str, Any]:
        return _api_error(status, message)

    def _reply(self, request: ModelRequest, tool_use_id: str) -> Reply:
        assert request.turn is not None
        scenario = self._turns.get(request.turn)
        if scenario is None:
            scenario = self._turns[request.turn] = self._next_scenario(request)
        if request.step < len(scenario):
            return scenario[request.step](request, tool_use_id)
        said = f"fake: the scenario has no step {request.step}"
        return Reply(content=({"type": "text", "text": said},))

    def _next_scenario(self, request: ModelRequest) -> Scenario:
        if self.choose is not None:
            return self.choose(request)
        if self._queue:
            return self._queue.popleft()
        return self.scenario


# --- the SSE stream --------------------------------------------------------------------------


def _chunks(value: str, after: str, per_chunk: int) -> list[str]:
    """``value`` in pieces of ``per_chunk`` parts, cut only after ``after`` (a space in text,
    ``", "`` in JSON), so that a path is never split across two deltas."""
    parts = value.split(after)
    pieces = [after.join(parts[i : i + per_chunk]) for i in range(0, len(parts), per_chunk)]
    return [piece + after for piece in pieces[:-1]] + pieces[-1:]


def _stream_events(message_id: str, model: str, reply: Reply) -> list[dict[str, Any]]:
    usage = {
        "input_tokens": 100,
        "output_tokens": 1,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }
    start: dict[str, Any] = {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": usage,
    }
    events: list[dict[str, Any]] = [{"type": "message_start", "message": start}]
    for index, block in enumerate(reply.content):
        if block["type"] == "text":
            opened: dict[str, Any] = {"type": "text", "text": ""}
            deltas = [
                {"type": "text_delta", "text": part} for part in _chunks(block["text"], " ", 3)
            ]
        else:
            opened = {**block, "input": {}}
            deltas = [
                {"type": "input_json_delta", "partial_json": part}
                for part in _chunks(json.dumps(block["input"]), '", "', 1)
            ]
        events.append({"type": "content_block_start", "index": index, "content_block": opened})
        events += [{"type": "content_block_delta", "index": index, "delta": d} for d in deltas]
        events.append({"type": "content_block_stop", "index": index})
    delta = {"stop_reason": reply.stop_reason, "stop_sequence": None}
    events.append({"type": "message_delta", "delta": delta, "usage": {"output_tokens": 25}})
    events.append({"type": "message_stop"})
    return events
