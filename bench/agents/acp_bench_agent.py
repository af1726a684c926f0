"""A fast scripted ACP v1 agent on stdio (shapes as codex-acp 0.16.0 sends them), for the
benchmarks. It never imports the project.

    acp_bench_agent.py

What a turn does is chosen by the prompt:

approve N TAG     N session/request_permission requests in a row, one at a time: each tool
                  call's command is "bench TAG K t=<CLOCK_MONOTONIC ns when the line was
                  written>"; each answer is stamped when read, then the tool call completes and
                  the next request follows; the turn ends with "done TAG N"
anything else     ends the turn with "echo: <prompt>"

Stamps go to ``$BENCH_STAMP_DIR/<pid>.jsonl`` as bench/agents/codex_bench_agent.py writes them:
{"ev": "answer", "tag", "k", "ns", "decision", "seen"} for every answer read.
"""

import json
import os
import sys
import time

SESSION = f"sess-bench-{os.getpid()}"
OPTIONS = [
    {"optionId": "allow-once", "name": "Allow", "kind": "allow_once"},
    {"optionId": "reject-once", "name": "Reject", "kind": "reject_once"},
]

stdout = sys.stdout.buffer


class State:
    prompt_id: object = None
    next_id = 0
    tag = ""
    k = 0
    n = 0


state = State()
answers_seen: dict[object, int] = {}
pending: dict[object, tuple[str, int]] = {}  # request id -> (tag, k)
stamp_file = None


def stamp(record: dict[str, object]) -> None:
    global stamp_file
    if stamp_file is None:
        folder = os.environ.get("BENCH_STAMP_DIR")
        if not folder:
            return
        stamp_file = open(os.path.join(folder, f"{os.getpid()}.jsonl"), "a", encoding="utf-8")
    stamp_file.write(json.dumps(record) + "\n")
    stamp_file.flush()


def write(message: dict[str, object]) -> None:
    stdout.write(json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")
    stdout.flush()


def update(body: dict[str, object]) -> None:
    write({"method": "session/update", "params": {"sessionId": SESSION, "update": body}})


def end_turn(text: str) -> None:
    update({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}})
    write({"id": state.prompt_id, "result": {"stopReason": "end_turn"}})


def ask() -> None:
    request_id = f"perm-{state.next_id}"  # string ids, as codex-acp sends them
    state.next_id += 1
    pending[request_id] = (state.tag, state.k)
    command = f"bench {state.tag} {state.k} t={time.monotonic_ns()}"
    tool_call = {
        "toolCallId": f"call-{request_id}",
        "kind": "execute",
        "status": "pending",
        "title": command,
        "rawInput": {"command": command, "cwd": os.getcwd()},
    }
    params = {"sessionId": SESSION, "toolCall": tool_call, "options": OPTIONS}
    write({"id": request_id, "method": "session/request_permission", "params": params})


def answered(msg: dict[str, object], now: int) -> None:
    request_id = msg["id"]
    seen = answers_seen.get(request_id, 0) + 1
    answers_seen[request_id] = seen
    tag, k = pending.get(request_id, ("?", -1))
    result = msg.get("result")
    outcome = result.get("outcome") if isinstance(result, dict) else None
    decision = outcome.get("optionId") if isinstance(outcome, dict) else None
    stamp({"ev": "answer", "tag": tag, "k": k, "ns": now, "decision": decision, "seen": seen})
    if seen > 1:
        return  # a duplicate: never acted on twice
    pending.pop(request_id, None)
    done = {"sessionUpdate": "tool_call_update", "toolCallId": f"call-{request_id}"}
    update({**done, "status": "completed"})
    state.k += 1
    if state.k < state.n:
        ask()
    else:
        end_turn(f"done {state.tag} {state.n}")


def prompt(msg: dict[str, object]) -> None:
    params = msg["params"]
    assert isinstance(params, dict)
    text = " ".join(str(block.get("text", "")) for block in params.get("prompt") or [])
    state.prompt_id = msg["id"]
    words = text.split()
    if len(words) >= 3 and words[0] == "approve":
        state.n, state.tag, state.k = int(words[1]), words[2], 0
        ask()
    else:
        end_turn(f"echo: {text}")


def serve() -> None:
    stdin = sys.stdin.buffer
    while raw := stdin.readline():
        now = time.monotonic_ns()
        msg = json.loads(raw)
        method = msg.get("method")
        if method == "initialize":
            result = {"protocolVersion": 1, "agentCapabilities": {"loadSession": True}}
            write({"id": msg["id"], "result": result | {"agentInfo": {"name": "acp-bench"}}})
        elif method == "session/new":
            write({"id": msg["id"], "result": {"sessionId": SESSION}})
        elif method == "session/load":
            write({"id": msg["id"], "result": None})
        elif method == "session/prompt":
            prompt(msg)
        elif method == "session/cancel":
            write({"id": state.prompt_id, "result": {"stopReason": "cancelled"}})
        elif method is None and "result" in msg:
            answered(msg, now)


if __name__ == "__main__":
    serve()
