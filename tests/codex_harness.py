"""A Codex app-server codec driven by hand in tests: messages in as dicts, lines out as dicts."""

from __future__ import annotations

import json
from typing import Any

from adapters.codex_app_server import CodexAppServerCodec
from gateway.domain import InteractionRequest
from gateway.events import AgentCommand, AgentEvent, InteractionOpened, Prompt

THREAD = "thr-1"
TURN = "turn-1"
USER_AGENT = "agent-gateway/0.171.0 (Debian 12.0.0; x86_64) unknown (agent-gateway; 0.1.0)"


class Session:
    """A codec and the lines it wrote, fed messages as dicts."""

    def __init__(self, **options: Any) -> None:
        self.codec = CodexAppServerCodec(cwd="/work/project", **options)
        self.codec.start()

    def feed(self, message: dict[str, Any] | bytes) -> list[AgentEvent]:
        raw = message if isinstance(message, bytes) else json.dumps(message).encode()
        return self.codec.feed(raw)

    def sent(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.codec.data_to_send()]

    def send(self, command: AgentCommand) -> list[dict[str, Any]]:
        self.codec.send(command)
        return self.sent()

    def ask(self, method: str, params: dict[str, Any], request_id: int = 0) -> list[AgentEvent]:
        return self.feed({"id": request_id, "method": method, "params": params})

    def asked(self, method: str, params: dict[str, Any], request_id: int = 0) -> InteractionRequest:
        [opened] = [
            e for e in self.ask(method, params, request_id) if isinstance(e, InteractionOpened)
        ]
        return opened.request


def thread_result(request_id: int = 2, **overrides: Any) -> dict[str, Any]:
    result = {
        "thread": {"id": THREAD},
        "approvalPolicy": "on-request",
        "approvalsReviewer": "user",
        "sandbox": {"type": "workspaceWrite", "writableRoots": [], "networkAccess": False},
        **overrides,
    }
    return {"id": request_id, "result": result}


def ready(**options: Any) -> Session:
    session = Session(**options)
    session.feed({"id": 1, "result": {"userAgent": USER_AGENT}})
    session.feed(thread_result())
    session.sent()
    return session


def running() -> Session:
    session = ready()
    session.send(Prompt(text="go"))
    session.feed({"id": 3, "result": {"turn": {"id": TURN, "status": "inProgress"}}})
    session.feed({"method": "turn/started", "params": {"threadId": THREAD, "turn": {"id": TURN}}})
    return session


COMMAND_PARAMS: dict[str, Any] = {
    "kind": "command",
    "threadId": THREAD,
    "turnId": TURN,
    "itemId": "call_1",
    "command": "/bin/bash -c 'touch hello.txt'",
    "cwd": "/work/project",
    "reason": "Need to create hello.txt outside the sandbox",
    "proposedExecpolicyAmendment": ["touch", "hello.txt"],
    "availableDecisions": [
        "accept",
        {"acceptWithExecpolicyAmendment": {"execpolicy_amendment": ["touch", "hello.txt"]}},
        "cancel",
    ],
}
COMMAND = "item/commandExecution/requestApproval"
