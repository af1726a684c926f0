"""A fast scripted agent speaking the Codex app-server protocol (0.171 shapes, as recorded in
tests/transcripts/codex-0.171/), for the benchmarks. It never imports the project.

    codex_bench_agent.py [app-server]      (the launcher appends "app-server")
    codex_bench_agent.py bare N            (no protocol: write the N delta lines of a burst)

What a turn does is chosen by the prompt:

approve N TAG     N command approvals in a row, one at a time: each request's command is
                  "bench TAG K t=<CLOCK_MONOTONIC ns when the line was written>"; each answer
                  is stamped when read, then resolved (serverRequest/resolved), then the next
                  request follows; the turn completes with "done TAG N"
deltas N [final]  a burst of N item/agentMessage/delta lines written as fast as the pipe takes
                  them, then turn/completed (with "final": the item/completed agentMessage
                  first, as codex itself sends it)
anything else     completes the turn with "echo: <prompt>"

Stamps go to ``$BENCH_STAMP_DIR/<pid>.jsonl``, one JSON object a line:
{"ev": "answer", "tag", "k", "ns", "decision", "seen"} for every answer read (seen = how
many answers to that request arrived so far: anything above 1 is a duplicate delivery), and
{"ev": "burst", "n", "start_ns", "end_ns", "chars", "sha256"} after a burst.
"""

import hashlib
import json
import os
import sys
import time

THREAD = f"thread-bench-{os.getpid()}"
BATCH_LINES = 2048

stdout = sys.stdout.buffer


class State:
    turn = ""
    turns = 0
    next_id = 0
    tag = ""  # the running "approve" script: its tag, the next request's index, how many
    k = 0
    n = 0


state = State()
answers_seen: dict[int, int] = {}
pending: dict[int, tuple[str, int]] = {}  # server request id -> (tag, k)
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
    stdout.write(json.dumps(message).encode() + b"\n")
    stdout.flush()


def delta_piece(i: int) -> str:
    """The i-th delta of a burst: words, a line break now and then, never a code fence."""
    return f"w{i}\n" if i % 16 == 15 else f"w{i} "


def delta_lines(n: int, turn: str) -> tuple[list[bytes], str]:
    """The burst's lines, in batches, and its whole text."""
    params = {"threadId": THREAD, "turnId": turn, "itemId": "msg-burst", "delta": ""}
    # every line is this prefix, the piece as a JSON string, and the closing braces
    line = json.dumps({"method": "item/agentMessage/delta", "params": params})
    head = line[: -len('""}}')].encode()
    pieces = [delta_piece(i) for i in range(n)]
    batches = []
    for start in range(0, n, BATCH_LINES):
        batch = pieces[start : start + BATCH_LINES]
        batches.append(b"".join(head + json.dumps(p).encode() + b"}}\n" for p in batch))
    return batches, "".join(pieces)


def burst(n: int, turn: str, final: bool) -> None:
    batches, text = delta_lines(n, turn)
    start = time.monotonic_ns()
    for batch in batches:
        stdout.write(batch)
    stdout.flush()
    end = time.monotonic_ns()
    digest = hashlib.sha256(text.encode()).hexdigest()
    stamp(
        {"ev": "burst", "n": n, "start_ns": start, "end_ns": end, "chars": len(text)}
        | {"sha256": digest}
    )
    if final:
        item = {"type": "agentMessage", "id": "msg-burst", "text": text}
        write({"method": "item/completed", "params": {"item": item, "threadId": THREAD}})
    complete_turn(turn, None)


def complete_turn(turn: str, text: str | None, status: str = "completed") -> None:
    if text is not None:
        item = {"type": "agentMessage", "id": f"msg-{turn}", "text": text}
        params = {"item": item, "threadId": THREAD, "turnId": turn}
        write({"method": "item/completed", "params": params})
    body = {"id": turn, "status": status, "error": None}
    write({"method": "turn/completed", "params": {"threadId": THREAD, "turn": body}})


def ask() -> None:
    request_id = state.next_id
    state.next_id += 1
    pending[request_id] = (state.tag, state.k)
    params = {
        "threadId": THREAD,
        "turnId": state.turn,
        "itemId": f"call-{request_id}",
        "cwd": os.getcwd(),
        "reason": "benchmark",
        "availableDecisions": ["accept", "cancel"],
    }
    params["command"] = f"bench {state.tag} {state.k} t={time.monotonic_ns()}"
    write({"id": request_id, "method": "item/commandExecution/requestApproval", "params": params})


def answered(msg: dict[str, object], now: int) -> None:
    request_id = msg["id"]
    assert isinstance(request_id, int)
    seen = answers_seen.get(request_id, 0) + 1
    answers_seen[request_id] = seen
    tag, k = pending.get(request_id, ("?", -1))
    result = msg.get("result")
    decision = result.get("decision") if isinstance(result, dict) else None
    stamp({"ev": "answer", "tag": tag, "k": k, "ns": now, "decision": decision, "seen": seen})
    if seen > 1:
        return  # a duplicate: never acted on twice
    pending.pop(request_id, None)
    write(
        {
            "method": "serverRequest/resolved",
            "params": {"threadId": THREAD, "requestId": request_id},
        }
    )
    state.k += 1
    if state.k < state.n:
        ask()
    else:
        complete_turn(state.turn, f"done {state.tag} {state.n}")


def start_turn(msg: dict[str, object]) -> None:
    params = msg["params"]
    assert isinstance(params, dict)
    text = " ".join(str(part.get("text", "")) for part in params.get("input") or [])
    state.turns += 1
    turn = state.turn = f"turn-{os.getpid()}-{state.turns}"
    write({"id": msg["id"], "result": {"turn": {"id": turn, "status": "inProgress"}}})
    write({"method": "turn/started", "params": {"threadId": THREAD, "turn": {"id": turn}}})
    words = text.split()
    if len(words) >= 3 and words[0] == "approve":
        state.n, state.tag, state.k = int(words[1]), words[2], 0
        ask()
    elif len(words) >= 2 and words[0] == "deltas":
        burst(int(words[1]), turn, final="final" in words[2:])
    else:
        complete_turn(turn, f"echo: {text}")


def open_thread(msg: dict[str, object]) -> None:
    params = msg["params"]
    assert isinstance(params, dict)
    result = {
        "thread": {"id": THREAD},
        "approvalPolicy": params["approvalPolicy"],
        "approvalsReviewer": params["approvalsReviewer"],
        "sandbox": {"type": "workspaceWrite", "networkAccess": False},
    }
    write({"id": msg["id"], "result": result})


def serve() -> None:
    stdin = sys.stdin.buffer
    while raw := stdin.readline():
        now = time.monotonic_ns()
        msg = json.loads(raw)
        method = msg.get("method")
        if method == "initialize":
            agent = "agent-gateway/0.171.0 (Linux; x86_64) bench (agent-gateway; 0.1.0)"
            write({"id": msg["id"], "result": {"userAgent": agent}})
        elif method in ("thread/start", "thread/resume"):
            open_thread(msg)
        elif method == "turn/start":
            start_turn(msg)
        elif method == "turn/interrupt":
            write({"id": msg["id"], "result": {}})
            complete_turn(state.turn, None, status="interrupted")
        elif method is None and "result" in msg:
            answered(msg, now)


def bare(n: int) -> None:
    """The same delta lines with no protocol around them (the bare loop's input)."""
    batches, _ = delta_lines(n, "turn-bare")
    sys.stderr.write(f"{time.monotonic_ns()}\n")
    sys.stderr.flush()
    for batch in batches:
        stdout.write(batch)
    stdout.flush()


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "bare":
        bare(int(sys.argv[2]))
    else:
        serve()
