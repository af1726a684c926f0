"""How a Codex app-server session is opened, and which policy its answer says is in force.

Pure helpers of :mod:`adapters.codex_app_server` (schema: ``codex-0.171`` InitializeParams,
ThreadStartParams, ThreadResumeParams, ThreadStartResponse, ThreadResumeResponse).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from adapters.json_fields import get_array, get_object, get_text
from adapters.jsonrpc import JsonObject

__all__ = ["SANDBOX_MODES", "SessionSetup", "open_thread_params", "read_policy"]

# SandboxPolicy.type (what the thread/* result reports) -> SandboxMode (what we ask for).
SANDBOX_MODES = {
    "readOnly": "read-only",
    "workspaceWrite": "workspace-write",
    "dangerFullAccess": "danger-full-access",
    "externalSandbox": "external-sandbox",
}


@dataclass(frozen=True, kw_only=True, slots=True)
class SessionSetup:
    cwd: str
    approval_policy: str
    sandbox: str
    model: str | None
    resume_thread_id: str | None
    experimental_api: bool
    client_name: str
    client_version: str
    mcp_servers: JsonObject | None = None  # Codex's config key mcp_servers (issue 33)

    def initialize_params(self) -> JsonObject:
        # Schema: InitializeParams {clientInfo: ClientInfo {name, title?, version},
        # capabilities: InitializeCapabilities}.
        return {
            "clientInfo": {"name": self.client_name, "version": self.client_version},
            "capabilities": {
                "experimentalApi": self.experimental_api,
                "requestAttestation": False,
            },
        }


def open_thread_params(setup: SessionSetup) -> tuple[str, JsonObject]:
    """``thread/start``, or ``thread/resume`` when a thread id is given.

    ``approvalsReviewer: "user"`` always (schema: ApprovalsReviewer = user | auto_review |
    guardian_subagent): approvals go to a person, never to an agent reviewer.
    """
    params: JsonObject = {
        "cwd": setup.cwd,
        "approvalPolicy": setup.approval_policy,
        "approvalsReviewer": "user",
        "sandbox": setup.sandbox,
    }
    if setup.model is not None:
        params["model"] = setup.model
    if setup.mcp_servers:
        # thread/start and thread/resume both take config overrides (ThreadStartParams,
        # ThreadResumeParams .config); dynamic tools would not be carried over a resume
        params["config"] = {"mcp_servers": setup.mcp_servers}
    if setup.resume_thread_id is None:
        return "thread/start", params
    # ThreadResumeParams.excludeTurns: the history is not needed here, and a long thread's
    # full history would be one huge line (0.171 sends a deprecationNotice without it).
    return "thread/resume", {"threadId": setup.resume_thread_id, **params, "excludeTurns": True}


def _as_text(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def read_policy(setup: SessionSetup, result: JsonObject) -> tuple[dict[str, str], list[str]]:
    """The policy a thread/start or thread/resume RESULT says is in force, and how it differs
    from what was asked. Keys: approval_policy, approvals_reviewer, sandbox, network_access,
    writable_roots (the last two only when reported)."""
    policy: dict[str, str] = {}
    mismatches: list[str] = []
    approval = result.get("approvalPolicy")  # AskForApproval: a string or {"granular": ...}
    if approval is not None:
        policy["approval_policy"] = _as_text(approval)
    reviewer = get_text(result, "approvalsReviewer")
    if reviewer is not None:
        policy["approvals_reviewer"] = reviewer
    sandbox = get_object(result, "sandbox")  # SandboxPolicy {"type": ..., ...}
    if sandbox is not None:
        kind = get_text(sandbox, "type") or "unknown"
        policy["sandbox"] = SANDBOX_MODES.get(kind, kind)
        if "networkAccess" in sandbox:
            policy["network_access"] = _as_text(sandbox["networkAccess"]).lower()
        roots = [
            root for root in get_array(sandbox, "writableRoots") or () if isinstance(root, str)
        ]
        if roots:
            policy["writable_roots"] = ", ".join(roots)
    expected = {
        "approval_policy": setup.approval_policy,
        "approvals_reviewer": "user",
        "sandbox": setup.sandbox,
    }
    for key, wanted in expected.items():
        actual = policy.get(key)
        if actual is None:
            mismatches.append(f"codex did not report its {key.replace('_', ' ')}")
        elif actual != wanted:
            mismatches.append(f"codex runs with {key.replace('_', ' ')} {actual!r}, not {wanted!r}")
    return policy, mismatches
