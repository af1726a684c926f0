"""A scripted fake of the OpenAI Responses API, for driving the real Codex CLI offline.

Codex is pointed at it with a custom model provider (``base_url = fake.base_url``,
``wire_api = "responses"``; see ``tests/codex_env.py``). It listens on 127.0.0.1 on a port
the kernel picks, answers ``POST /v1/responses`` with a Server-Sent-Events stream and records
every request body, so that a test can assert what the agent sent back to the model.

A *scenario* is a list of steps, one per model call of a turn. The step of a request is the
number of ``*_call_output`` items in its ``input`` that were not there at the turn's first
request (Codex sends the whole history every time; the turn is named by the ``turn_id`` in
``client_metadata``). Each new turn takes its scenario from ``choose(request)`` if given, else
from the queue filled by :meth:`FakeResponses.enqueue`, else the default scenario. A request
past the end of its scenario gets ``response.failed``, so a test never hangs on it.

Building blocks: :func:`message`, :func:`shell`, :func:`apply_patch`,
:func:`request_user_input`, :func:`function_call` and :func:`failure`.

Run as a script it serves one of the named scenarios in :data:`PRESETS`, logs requests as
JSONL and switches scenario on ``POST /_control {"scenario": NAME}``::

    python tests/servers/fake_responses.py --scenario shell_escalated --log requests.jsonl
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any, TextIO

from tests.servers.http_server import ReceivedRequest, RecordingServer, decode_json

__all__ = [
    "PRESETS",
    "TOOL_OUTPUT_TYPES",
    "FakeResponses",
    "ModelRequest",
    "Reply",
    "Scenario",
    "Step",
    "apply_patch",
    "failure",
    "function_call",
    "message",
    "namespaced_call",
    "request_user_input",
    "shell",
    "tool_search",
]

# what the agent sends back for each kind of call the model made
TOOL_OUTPUT_TYPES = frozenset(
    "function_call_output custom_tool_call_output local_shell_call_output"
    " tool_search_output mcp_tool_call_output".split()
)
USAGE: dict[str, Any] = {
    "input_tokens": 10,
    "input_tokens_details": {"cached_tokens": 0},
    "output_tokens": 5,
    "output_tokens_details": {"reasoning_tokens": 0},
    "total_tokens": 15,
}


# --- what the agent sent ---------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class ModelRequest(ReceivedRequest):
    """One request the agent made, as received; ``step`` is its place in the turn."""

    turn_id: str | None = None
    step: int = 0

    @property
    def input(self) -> list[dict[str, Any]]:
        items = self.body.get("input")
        return [i for i in items if isinstance(i, dict)] if isinstance(items, list) else []

    @property
    def tool_names(self) -> frozenset[str]:
        tools = self.body.get("tools") or []
        return frozenset(str(t.get("name") or t.get("type")) for t in tools)

    def tool(self, name: str) -> dict[str, Any] | None:
        return next((t for t in self.body.get("tools") or [] if t.get("name") == name), None)

    def tool_outputs(self) -> list[dict[str, Any]]:
        return [i for i in self.input if i.get("type") in TOOL_OUTPUT_TYPES]

    def tool_output(self, call_id: str | None = None) -> str | None:
        """The output of the call ``call_id`` (default: the last one), as text."""
        outputs = [o for o in self.tool_outputs() if call_id in (None, o.get("call_id"))]
        if not outputs:
            return None
        out = outputs[-1].get("output")
        return out if isinstance(out, str) else json.dumps(out)

    def mode_told(self) -> str:
        """The first line of the last collaboration-mode instructions Codex gave the model
        ("# Collaboration Mode: Default"; "" if none)."""
        told = ""
        for item in self.input:
            if item.get("role") != "developer":
                continue
            for part in item.get("content") or []:
                text = part.get("text") if isinstance(part, dict) else None
                if isinstance(text, str) and text.startswith("<collaboration_mode>"):
                    told = text.removeprefix("<collaboration_mode>").splitlines()[0]
        return told

    def user_texts(self) -> list[str]:
        texts = []
        for item in self.input:
            if item.get("type") == "message" and item.get("role") == "user":
                for part in item.get("content") or []:
                    if isinstance(part, dict) and isinstance(part.get("text"), str):
                        texts.append(part["text"])
        return texts


# --- what the fake answers ---------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Reply:
    """SSE events to stream, or an HTTP error status with a JSON body."""

    events: tuple[dict[str, Any], ...] = ()
    status: int = 200
    error_body: dict[str, Any] | None = None


# a step gets the request, the response id and a fresh call id, and says what to answer
Step = Callable[[ModelRequest, str, str], Reply]
Scenario = Sequence[Step]
Chooser = Callable[[ModelRequest], Scenario]


def _item_events(item: dict[str, Any]) -> tuple[dict[str, Any], ...]:
    return (
        {"type": "response.output_item.added", "output_index": 0, "item": item},
        {"type": "response.output_item.done", "output_index": 0, "item": item},
    )


def _chunks(text: str, count: int) -> list[str]:
    count = max(1, min(count, len(text) or 1))
    size = -(-len(text) // count)
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def message(text: str | Callable[[ModelRequest], str], *, chunks: int = 2) -> Step:
    """An assistant message streamed as ``chunks`` deltas; ``text`` may read the request."""

    def step(request: ModelRequest, resp_id: str, call_id: str) -> Reply:
        body = text(request) if callable(text) else text
        item = {"type": "message", "role": "assistant", "id": f"msg_{resp_id}"}
        done = {**item, "content": [{"type": "output_text", "text": body, "annotations": []}]}
        at = {"item_id": item["id"], "output_index": 0, "content_index": 0}
        deltas = [
            {"type": "response.output_text.delta", **at, "delta": part}
            for part in _chunks(body, chunks)
        ]
        added = {"type": "response.output_item.added", "output_index": 0}
        done_event = {"type": "response.output_item.done", "output_index": 0, "item": done}
        return Reply(events=({**added, "item": {**item, "content": []}}, *deltas, done_event))

    return step


def function_call(name: str, arguments: dict[str, Any], *, call_id: str | None = None) -> Step:
    """A call of the function tool ``name`` with JSON ``arguments``."""

    def step(request: ModelRequest, resp_id: str, default_call_id: str) -> Reply:
        item = {
            "type": "function_call",
            "id": f"fc_{resp_id}",
            "call_id": call_id or default_call_id,
            "name": name,
            "arguments": json.dumps(arguments),
        }
        return Reply(events=_item_events(item))

    return step


def tool_search(query: str, *, call_id: str | None = None) -> Step:
    """A ``tool_search`` call: how the model finds MCP tools, which Codex 0.171 does not list
    among the first request's tools (FACTS-session-features.md)."""

    def step(request: ModelRequest, resp_id: str, default_call_id: str) -> Reply:
        item = {
            "type": "tool_search_call",
            "id": f"ts_{resp_id}",
            "call_id": call_id or default_call_id,
            "execution": "client",
            "status": "completed",
            "arguments": {"query": query},
        }
        return Reply(events=_item_events(item))

    return step


def namespaced_call(
    namespace: str, name: str, arguments: dict[str, Any], *, call_id: str | None = None
) -> Step:
    """A call of a tool that a ``tool_search`` returned, in its namespace (an MCP server's
    tools come back as ``mcp__<server>``)."""

    def step(request: ModelRequest, resp_id: str, default_call_id: str) -> Reply:
        item = {
            "type": "function_call",
            "id": f"fc_{resp_id}",
            "call_id": call_id or default_call_id,
            "namespace": namespace,
            "name": name,
            "arguments": json.dumps(arguments),
        }
        return Reply(events=_item_events(item))

    return step


def shell(
    cmd: str,
    *,
    escalated: bool = False,
    justification: str | None = None,
    prefix_rule: Sequence[str] | None = None,
    call_id: str | None = None,
    **extra: Any,
) -> Step:
    """An ``exec_command`` call. ``escalated`` asks to run outside the sandbox, which makes
    Codex ask for approval under ``approval_policy = "on-request"``. ``extra`` adds raw
    arguments (for probing what else the tool accepts)."""
    args: dict[str, Any] = {"cmd": cmd, "login": False}
    if escalated:
        args["sandbox_permissions"] = "require_escalated"
        args["justification"] = justification or f"Need to run `{cmd}` outside the sandbox"
    elif justification is not None:
        args["justification"] = justification
    if prefix_rule is not None:
        args["prefix_rule"] = list(prefix_rule)
    args.update(extra)
    return function_call("exec_command", args, call_id=call_id)


def apply_patch(patch: str, *, call_id: str | None = None) -> Step:
    """An ``apply_patch`` call, freeform or JSON, whichever way the agent offers the tool."""

    def step(request: ModelRequest, resp_id: str, default_call_id: str) -> Reply:
        tool = request.tool("apply_patch")
        if tool is None:
            return _failed(resp_id, f"apply_patch not offered: {sorted(request.tool_names)}")
        if tool.get("type") == "function":
            return function_call("apply_patch", {"input": patch}, call_id=call_id)(
                request, resp_id, default_call_id
            )
        item = {
            "type": "custom_tool_call",
            "id": f"ctc_{resp_id}",
            "call_id": call_id or default_call_id,
            "name": "apply_patch",
            "input": patch,
        }
        return Reply(events=_item_events(item))

    return step


def request_user_input(questions: Iterable[dict[str, Any]], *, call_id: str | None = None) -> Step:
    """A ``request_user_input`` call; each question has id, header, question, options."""
    return function_call("request_user_input", {"questions": list(questions)}, call_id=call_id)


def failure(
    message: str = "fake model failure", *, code: str = "server_error", http_status: int = 0
) -> Step:
    """The model call fails: ``response.failed`` in the stream, or an HTTP error status."""

    def step(request: ModelRequest, resp_id: str, call_id: str) -> Reply:
        if http_status:
            error = {"error": {"message": message, "type": code, "code": code}}
            return Reply(status=http_status, error_body=error)
        return _failed(resp_id, message, code)

    return step


def _failed(resp_id: str, message: str, code: str = "server_error") -> Reply:
    error = {"code": code, "message": message}
    failed = {"type": "response.failed", "response": {"id": resp_id, "error": error}}
    return Reply(events=(failed,))


# --- the server ------------------------------------------------------------------------------


@dataclass
class _Turn:
    scenario: Scenario
    baseline: int  # tool outputs already in the input at the turn's first request


@dataclass
class FakeResponses(RecordingServer[ModelRequest]):
    """The fake model server. ``async with FakeResponses(scenario) as fake: fake.base_url``."""

    scenario: Scenario = ()
    choose: Chooser | None = None
    _queue: deque[Scenario] = field(default_factory=deque)
    _turns: dict[str, _Turn] = field(default_factory=dict)

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def enqueue(self, *scenarios: Scenario) -> None:
        """Scenarios for the next new turns, one each, in order."""
        self._queue.extend(scenarios)

    def model_requests(self) -> list[ModelRequest]:
        return [r for r in self.requests if r.path.rstrip("/").endswith("/responses")]

    def last_tool_output(self) -> str:
        """What the agent last told the model about a call ("" if nothing yet)."""
        outputs = (r.tool_output() for r in reversed(self.model_requests()))
        return next((out for out in outputs if out), "")

    async def _handle(
        self,
        method: str,
        path: str,
        headers: dict[str, str],
        raw: bytes,
        writer: asyncio.StreamWriter,
    ) -> None:
        n = next(self._counter)
        body = _decode_body(raw, headers)
        if method == "GET" and path.split("?")[0].rstrip("/").endswith("/models"):
            await self._record(
                ModelRequest(n=n, method=method, path=path, headers=headers, body={})
            )
            await self._write_json(writer, 200, {"object": "list", "data": [], "models": []})
            return
        if method == "POST" and path == "/_control":
            self.scenario = PRESETS.get(str(body.get("scenario")), self.scenario)
            await self._write_json(writer, 200, {"ok": True})
            return
        if method != "POST" or not path.split("?")[0].rstrip("/").endswith("/responses"):
            await self._record(
                ModelRequest(n=n, method=method, path=path, headers=headers, body=body)
            )
            await self._write_json(writer, 404, self._error_body(404, f"unhandled {method} {path}"))
            return
        request = self._place(
            ModelRequest(n=n, method=method, path=path, headers=headers, body=body)
        )
        await self._record(request)
        resp_id = f"resp_{n}"
        turn = self._turns[request.turn_id or ""]
        if request.step < len(turn.scenario):
            reply = turn.scenario[request.step](request, resp_id, f"call_{n}")
        else:
            reply = _failed(resp_id, f"fake: the scenario has no step {request.step}")
        if reply.status != 200:
            await self._write_json(writer, reply.status, reply.error_body or {})
            return
        events: list[dict[str, Any]] = [
            {"type": "response.created", "response": {"id": resp_id}},
            *reply.events,
        ]
        if not any(e["type"] == "response.failed" for e in events):
            events.append(
                {"type": "response.completed", "response": {"id": resp_id, "usage": USAGE}}
            )
        await self._write_sse(writer, events)

    def _error_body(self, status: int, message: str) -> dict[str, Any]:
        return {"error": {"message": message}}

    def _place(self, request: ModelRequest) -> ModelRequest:
        """Find the request's turn (a new one takes the next scenario) and its step."""
        key = _turn_id(request) or f"user-messages:{len(request.user_texts())}"
        outputs = len(request.tool_outputs())
        turn = self._turns.get(key)
        if turn is None:
            turn = _Turn(scenario=self._next_scenario(request), baseline=outputs)
            self._turns[key] = turn
        return replace(request, turn_id=key, step=outputs - turn.baseline)

    def _next_scenario(self, request: ModelRequest) -> Scenario:
        if self.choose is not None:
            return self.choose(request)
        if self._queue:
            return self._queue.popleft()
        return self.scenario


def _turn_id(request: ModelRequest) -> str | None:
    metadata = request.body.get("client_metadata")
    if isinstance(metadata, dict) and isinstance(metadata.get("turn_id"), str):
        return str(metadata["turn_id"])
    header = request.headers.get("x-codex-turn-metadata")
    if header:
        with contextlib.suppress(ValueError, AttributeError):
            turn = json.loads(header).get("turn_id")
            if isinstance(turn, str):
                return turn
    return None


def _decode_body(raw: bytes, headers: dict[str, str]) -> dict[str, Any]:
    encoding = headers.get("content-encoding", "").lower()
    if encoding == "gzip":
        import gzip

        raw = gzip.decompress(raw)
    elif encoding:
        return {"_undecoded": encoding, "_len": len(raw)}
    return decode_json(raw)


# --- script ----------------------------------------------------------------------------------

PATCH_EXAMPLE = (
    "*** Begin Patch\n*** Add File: patched.txt\n+patched by fake model\n*** End Patch\n"
)
DONE = message(lambda r: f"Done. Tool said: {(r.tool_output() or '')[:200]}")
COLOR = {
    "id": "color",
    "header": "Color",
    "question": "Which color should I use?",
    "options": [{"label": "Red", "description": "warm"}, {"label": "Blue", "description": "cool"}],
}
PRESETS: dict[str, Scenario] = {
    "message": [message("Hello from fake model")],
    "shell": [shell("touch hello.txt"), DONE],
    "shell_escalated": [shell("touch hello.txt", escalated=True), DONE],
    "apply_patch": [apply_patch(PATCH_EXAMPLE), DONE],
    "user_input": [request_user_input([COLOR]), DONE],
    "failed": [failure()],
    "http500": [failure("fake internal error", http_status=500)],
}


async def _serve_forever(scenario: str, port: int, log: TextIO | None) -> None:
    async with FakeResponses(scenario=PRESETS[scenario], port=port) as fake:
        print(f"listening on {fake.base_url} scenario={scenario}", flush=True)
        written = 0
        while True:
            requests = await fake.wait_for_requests(written + 1)
            if log is not None:
                for request in requests[written:]:
                    log.write(json.dumps(asdict(request)) + "\n")
                log.flush()
            written = len(requests)


def main() -> None:
    parser = argparse.ArgumentParser(description="A scripted fake OpenAI Responses API.")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--scenario", choices=sorted(PRESETS), default="message")
    parser.add_argument("--log", help="append every model request here as JSONL")
    args = parser.parse_args()
    with contextlib.ExitStack() as stack:
        log = stack.enter_context(open(args.log, "a", encoding="utf-8")) if args.log else None
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(_serve_forever(args.scenario, args.port, log))


if __name__ == "__main__":
    main()
