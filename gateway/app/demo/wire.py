"""What the demo agent writes: codex 0.171 app-server messages, shaped as the recordings show.

Every shape here is copied from ``tests/transcripts/codex-0.171/`` (the file named at each
builder): responses and server requests omit ``"jsonrpc"``, notifications carry
``emittedAtMs``, server request ids start at 0 in their own id space, thread and turn ids are
time-ordered UUIDs (v7). Standard library only: the demo agent must not load the gateway.
"""

from __future__ import annotations

import itertools
import json
import os
import sys
import time
import uuid
from typing import Any, BinaryIO

__all__ = [
    "Json",
    "Wire",
    "agent_message_item",
    "command_item",
    "file_change_item",
    "new_id",
    "now_ms",
    "sandbox_policy",
    "thread_object",
    "turn_error",
    "turn_object",
    "user_message_item",
]

Json = dict[str, Any]

# ThreadStartParams.sandbox (SandboxMode) -> the SandboxPolicy the result reports
# (shell_accept: workspaceWrite; patch_accept: readOnly).
_SANDBOX_POLICIES: dict[str, Json] = {
    "read-only": {"type": "readOnly", "networkAccess": False},
    "workspace-write": {
        "type": "workspaceWrite",
        "writableRoots": [],
        "networkAccess": False,
        "excludeTmpdirEnvVar": False,
        "excludeSlashTmp": False,
    },
    "danger-full-access": {"type": "dangerFullAccess"},
}


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def new_id() -> str:
    """A UUID v7 (48-bit millisecond time, then random bits), as codex names threads and turns."""
    raw = bytearray(now_ms().to_bytes(6, "big") + os.urandom(10))
    raw[6] = (raw[6] & 0x0F) | 0x70  # version 7
    raw[8] = (raw[8] & 0x3F) | 0x80  # RFC 4122 variant
    return str(uuid.UUID(bytes=bytes(raw)))


def sandbox_policy(mode: str) -> Json:
    return dict(_SANDBOX_POLICIES.get(mode, _SANDBOX_POLICIES["workspace-write"]))


class Wire:
    """One JSON object a line on the agent's stdout; the only writer of the demo agent."""

    def __init__(self, out: BinaryIO | None = None) -> None:
        self._out = out if out is not None else sys.stdout.buffer
        self._request_ids = itertools.count(0)  # server requests: their own id space, from 0

    def _write(self, message: Json) -> None:
        self._out.write(json.dumps(message, ensure_ascii=False).encode() + b"\n")
        self._out.flush()

    def result(self, request_id: object, result: Json) -> None:
        self._write({"id": request_id, "result": result})

    def error(self, request_id: object, code: int, message: str) -> None:
        self._write({"id": request_id, "error": {"code": code, "message": message}})

    def notify(self, method: str, params: Json) -> None:
        self._write({"method": method, "params": params, "emittedAtMs": now_ms()})

    def request(self, method: str, params: Json) -> int:
        """Send a server request; return its id (0, 1, 2, ... for the life of the process)."""
        request_id = next(self._request_ids)
        self._write({"method": method, "id": request_id, "params": params})
        return request_id


# --- shapes ---------------------------------------------------------------------------------


def thread_object(thread_id: str, cwd: str, *, originator: str, preview: str = "") -> Json:
    """Thread, as in the thread/start result of shell_accept (paths and names are ours)."""
    seconds = int(time.time())
    return {
        "id": thread_id,
        "environments": [{"environmentId": "local", "cwd": cwd, "runtimeWorkspaceRoots": [cwd]}],
        "extra": None,
        "sessionId": thread_id,
        "forkedFromId": None,
        "attachedToThreadId": None,
        "parentThreadId": None,
        "preview": preview,
        "ephemeral": False,
        "section": None,
        "sectionEnteredAt": None,
        "projectId": None,
        "historyMode": "paginated",
        "modelProvider": "demo",
        "model": "demo",
        "reasoningEffort": None,
        "createdAt": seconds,
        "updatedAt": seconds,
        "recencyAt": seconds,
        "status": {"type": "idle"},
        "path": None,
        "cwd": cwd,
        "cliVersion": "0.171.0",
        "originator": originator,
        "source": "vscode",
        "canAcceptDirectInput": True,
        "threadSource": None,
        "agentNickname": None,
        "agentRole": None,
        "gitInfo": None,
        "name": None,
        "daybreakEnabled": None,
        "turns": [],
    }


def turn_object(
    turn_id: str,
    *,
    status: str = "inProgress",
    items: list[Json] | None = None,
    error: str | None = None,
    started_at: int | None = None,
    completed_at: int | None = None,
    duration_ms: int | None = None,
) -> Json:
    """Turn, as in turn/start's result, turn/started and turn/completed (shell_accept; a
    failed turn's TurnError as in model_failed)."""
    return {
        "id": turn_id,
        "rootTurnId": turn_id,
        "items": items or [],
        "itemsView": "summary" if items else "notLoaded",
        "status": status,
        "error": None if error is None else turn_error(error),
        "startedAt": started_at,
        "completedAt": completed_at,
        "durationMs": duration_ms,
    }


def turn_error(message: str) -> Json:
    """TurnError, as in model_failed (the ``error`` notification and the failed turn)."""
    return {
        "message": message,
        "codexErrorInfo": "other",
        "additionalDetails": None,
        "misalignment": None,
    }


def user_message_item(item_id: str, text: str, *, started_ms: int, done: bool) -> Json:
    return {
        "type": "userMessage",
        "id": item_id,
        "clientId": None,
        "content": [{"type": "text", "text": text, "text_elements": []}],
        "startedAtMs": started_ms,
        "completedAtMs": started_ms if done else None,
    }


def agent_message_item(item_id: str, text: str, *, started_ms: int, done: bool) -> Json:
    return {
        "type": "agentMessage",
        "moderation": None,
        "id": item_id,
        "text": text,
        "phase": None,
        "memoryCitation": None,
        "delivery": None,
        "questions": None,
        "startedAtMs": started_ms,
        "completedAtMs": now_ms() if done else None,
    }


def command_item(
    item_id: str,
    command: str,
    cwd: str,
    *,
    inner: str,
    started_ms: int,
    status: str = "inProgress",
    output: str | None = None,
    exit_code: int | None = None,
) -> Json:
    """CommandExecutionThreadItem (shell_accept, shell_decline: status "declined")."""
    done = status != "inProgress"
    return {
        "type": "commandExecution",
        "id": item_id,
        "pluginId": None,
        "scriptPath": None,
        "command": command,
        "cwd": cwd,
        "processId": None,
        "source": "agent",
        "status": status,
        "commandActions": [{"type": "unknown", "command": inner}],
        "aggregatedOutput": output,
        "exitCode": exit_code,
        "durationMs": max(0, now_ms() - started_ms) if done else None,
        "startedAtMs": started_ms,
        "completedAtMs": now_ms() if done else None,
    }


def file_change_item(
    item_id: str, changes: list[Json], *, started_ms: int, status: str = "inProgress"
) -> Json:
    """FileChangeThreadItem (patch_accept; an update as in patch_accept_for_session)."""
    return {
        "type": "fileChange",
        "id": item_id,
        "changes": changes,
        "status": status,
        "startedAtMs": started_ms,
        "completedAtMs": None if status == "inProgress" else now_ms(),
    }
