"""A scripted fake of OpenAI's Chat Completions API, for the real ``opencode serve`` offline.

OpenCode reaches it through an ``@ai-sdk/openai-compatible`` provider whose ``baseURL`` is
``fake.base_url + "/v1"`` (tests/opencode_env.py). It answers ``POST /v1/chat/completions``
with a ``data:``-only event stream (chunks, a usage chunk, ``[DONE]``) or one JSON object when
``stream`` is false, and ``GET /v1/models``; it records every request.

Requests without ``tools`` are OpenCode's title requests: a short text, part of no turn. The
turn of a request is the number of user messages in it (OpenCode sends the whole history),
its step the number of ``tool`` messages after the last user message. Each new turn takes the
next scenario from :meth:`FakeChatCompletions.enqueue` (else the default one); a request past
its scenario's end gets a text saying so, so that a test never hangs on it.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from tests.servers.http_server import ReceivedRequest, RecordingServer, decode_json

__all__ = [
    "ChatRequest",
    "FakeChatCompletions",
    "Reply",
    "Scenario",
    "Step",
    "bash",
    "question",
    "text",
    "write",
]

MODEL = "fake-model"


def _text_of(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


@dataclass(frozen=True, kw_only=True)
class ChatRequest(ReceivedRequest):
    turn: int | None = None
    step: int = 0

    @property
    def messages(self) -> list[dict[str, Any]]:
        items = self.body.get("messages")
        return [m for m in items if isinstance(m, dict)] if isinstance(items, list) else []

    def prompts(self) -> list[str]:
        return [_text_of(m) for m in self.messages if m.get("role") == "user"]

    def tool_result(self) -> str | None:
        """The text of the last ``tool`` message (what the tool, or a refusal, said)."""
        results = [_text_of(m) for m in self.messages if m.get("role") == "tool"]
        return results[-1] if results else None


@dataclass(frozen=True, kw_only=True)
class Reply:
    content: str | None = None
    tool: tuple[str, dict[str, Any]] | None = None


Step = Callable[[ChatRequest], Reply]
Scenario = Sequence[Step]


def text(body: str | Callable[[ChatRequest], str]) -> Step:
    def step(request: ChatRequest) -> Reply:
        return Reply(content=body(request) if callable(body) else body)

    return step


def bash(command: str, description: str = "Run a command") -> Step:
    return lambda request: Reply(tool=("bash", {"command": command, "description": description}))


def write(file_path: str, content: str) -> Step:
    return lambda request: Reply(tool=("write", {"filePath": file_path, "content": content}))


def question(questions: list[dict[str, Any]]) -> Step:
    return lambda request: Reply(tool=("question", {"questions": questions}))


DONE = text(lambda request: f"Done. The tool said: {request.tool_result()}")


def _place(request: ChatRequest) -> ChatRequest:
    turn, step = 0, 0
    for message in request.messages:
        if message.get("role") == "user":
            turn, step = turn + 1, 0
        elif message.get("role") == "tool":
            step += 1
    return replace(request, turn=turn, step=step)


@dataclass
class FakeChatCompletions(RecordingServer[ChatRequest]):
    scenario: Scenario = (text("Hello from the fake model."),)
    _queue: deque[Scenario] = field(default_factory=deque)
    _turns: dict[int, Scenario] = field(default_factory=dict)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def enqueue(self, *scenarios: Scenario) -> None:
        self._queue.extend(scenarios)

    def model_requests(self) -> list[ChatRequest]:
        return [r for r in self.requests if r.turn is not None]

    def _error_body(self, status: int, message: str) -> dict[str, Any]:
        return {"error": {"message": message, "type": "invalid_request_error"}}

    async def _handle(
        self,
        method: str,
        path: str,
        headers: dict[str, str],
        raw: bytes,
        writer: asyncio.StreamWriter,
    ) -> None:
        path = path.split("?")[0].rstrip("/")
        body = decode_json(raw)
        request = ChatRequest(
            n=next(self._counter), method=method, path=path, headers=headers, body=body
        )
        if method == "GET" and path == "/v1/models":
            models = {"object": "list", "data": [{"id": MODEL, "object": "model"}]}
            await self._write_json(writer, 200, models)
            return
        if method != "POST" or path != "/v1/chat/completions":
            await self._record(request)
            await self._write_json(writer, 404, self._error_body(404, f"no {method} {path}"))
            return
        if not body.get("tools"):  # a title request
            await self._record(request)
            reply = Reply(content="Fake title")
        else:
            request = _place(request)
            await self._record(request)
            reply = self._reply(request)
        await self._answer(writer, body, reply)

    def _reply(self, request: ChatRequest) -> Reply:
        assert request.turn is not None
        scenario = self._turns.get(request.turn)
        if scenario is None:
            scenario = self._queue.popleft() if self._queue else self.scenario
            self._turns[request.turn] = scenario
        if request.step < len(scenario):
            return scenario[request.step](request)
        return Reply(content=f"fake: the scenario has no step {request.step}")

    async def _answer(
        self, writer: asyncio.StreamWriter, body: dict[str, Any], reply: Reply
    ) -> None:
        n = next(self._ids)
        base = {
            "id": f"chatcmpl-{n}",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": MODEL,
        }
        if reply.tool is not None:
            name, arguments = reply.tool
            call = {
                "index": 0,
                "id": f"call_fake_{n:04d}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments)},
            }
            delta: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [call]}
            finish = "tool_calls"
        else:
            delta = {"role": "assistant", "content": reply.content or ""}
            finish = "stop"
        usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        if not body.get("stream"):
            message = {k: v for k, v in delta.items() if k != "index"}
            whole = {
                **base,
                "object": "chat.completion",
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": usage,
            }
            await self._write_json(writer, 200, whole)
            return
        chunks: list[dict[str, Any]] = []
        if reply.tool is None and reply.content:
            words = reply.content.split(" ")
            pieces = [w + " " for w in words[:-1]] + words[-1:]
            first = True
            for piece in pieces:
                part: dict[str, Any] = {"content": piece}
                if first:
                    part["role"] = "assistant"
                    first = False
                chunks.append(
                    {**base, "choices": [{"index": 0, "delta": part, "finish_reason": None}]}
                )
        else:
            chunks.append(
                {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
            )
        chunks.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
        chunks.append({**base, "choices": [], "usage": usage})
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
            b"Connection: close\r\n\r\n"
        )
        for chunk in chunks:
            writer.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
            await writer.drain()
        writer.write(b"data: [DONE]\n\n")
        await writer.drain()
