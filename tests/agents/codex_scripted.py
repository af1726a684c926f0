"""A scripted agent speaking just enough of the Codex app-server protocol (0.171 shapes, as in
tests/transcripts/codex-0.171/) to run inside a whole gateway, misbehaving on cue.

    codex_scripted.py MODE [app-server ...]     (the launcher appends "app-server")

MODE says how it starts and how it ends:

normal       answers the handshake (thread/start and thread/resume), exits at stdin EOF
linger       like normal, but stays alive after stdin EOF (an agent busy with a long command
             when its gateway died): only a signal ends it
silent-init  reads everything, never answers initialize
exit-early   writes "boom" to stderr and exits 3 before reading anything

What a turn does is chosen by the prompt's first word:

approve           asks to run a command; reports the decision back as its message
ask               asks two questions (requestUserInput: env, region); reports the answers
approve-then-die  asks to run a command, writes "dying on purpose" to stderr and exits 9
hang              says "working on it" and never ends the turn (a test kills the process)
malformed         writes a line that is not JSON, then completes the turn
huge              writes one 20 MiB line
flood             writes 20 MiB to stderr, then completes the turn
anything else     completes the turn with the message "echo: <prompt>"

Every prompt received is appended to the file named by SCRIPTED_PROMPT_LOG (if set), one JSON
line {"pid": ..., "text": ...}, so that a test can tell which process was asked what.
"""

import json
import os
import signal
import sys

MODE = sys.argv[1] if len(sys.argv) > 1 else "normal"
HUGE_LINE_BYTES = 20 * 1024 * 1024
FLOOD_BYTES = 20 * 1024 * 1024
CHUNK = 64 * 1024


class State:
    thread = "thread-scripted"
    turns = 0  # turns started by this process
    turn = ""  # the current turn's id
    requests = 0  # server requests sent


state = State()
pending: dict[int, str] = {}  # server request id -> the turn it belongs to


def write(message: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def log_prompt(text: str) -> None:
    path = os.environ.get("SCRIPTED_PROMPT_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as log:
            log.write(json.dumps({"pid": os.getpid(), "text": text}) + "\n")


def complete_turn(turn: str, status: str, text: str | None = None) -> None:
    thread = state.thread
    if text is not None:
        item = {"type": "agentMessage", "id": f"msg-{turn}", "text": text}
        params = {"item": item, "threadId": thread, "turnId": turn}
        write({"method": "item/completed", "params": params})
    body = {"id": turn, "status": status, "error": None}
    write({"method": "turn/completed", "params": {"threadId": thread, "turn": body}})


def ask_approval(turn: str) -> int:
    request_id = state.requests
    state.requests = request_id + 1
    pending[request_id] = turn
    params = {
        "threadId": state.thread,
        "turnId": turn,
        "itemId": f"call-{request_id}",
        "command": "touch scripted.txt",
        "cwd": os.getcwd(),
        "reason": "the script wants to",
        "availableDecisions": ["accept", "cancel"],
    }
    write({"id": request_id, "method": "item/commandExecution/requestApproval", "params": params})
    return request_id


def ask_questions(turn: str) -> int:
    request_id = state.requests
    state.requests = request_id + 1
    pending[request_id] = turn
    questions = [
        {
            "id": "env",
            "header": "Env",
            "question": "Which environment?",
            "options": [{"label": "Production"}, {"label": "Dev"}],
        },
        {
            "id": "region",
            "header": "Region",
            "question": "Which region?",
            "options": [{"label": "Europe"}, {"label": "America"}],
        },
    ]
    params = {
        "threadId": state.thread,
        "turnId": turn,
        "itemId": f"ask-{request_id}",
        "questions": questions,
    }
    write({"id": request_id, "method": "item/tool/requestUserInput", "params": params})
    return request_id


def open_thread(msg: dict[str, object], thread: str) -> None:
    params = msg["params"]
    assert isinstance(params, dict)
    state.thread = thread
    result = {
        "thread": {"id": thread},
        "approvalPolicy": params["approvalPolicy"],
        "approvalsReviewer": params["approvalsReviewer"],
        "sandbox": {"type": "workspaceWrite", "networkAccess": False},
    }
    write({"id": msg["id"], "result": result})


def start_turn(msg: dict[str, object]) -> None:
    params = msg["params"]
    assert isinstance(params, dict)
    text = " ".join(str(part.get("text", "")) for part in params.get("input") or [])
    log_prompt(text)
    state.turns += 1
    turn = f"turn-{os.getpid()}-{state.turns}"
    state.turn = turn
    write({"id": msg["id"], "result": {"turn": {"id": turn, "status": "inProgress"}}})
    write({"method": "turn/started", "params": {"threadId": state.thread, "turn": {"id": turn}}})
    cue = text.split()[0] if text.split() else ""
    if cue == "approve":
        ask_approval(turn)
    elif cue == "ask":
        ask_questions(turn)
    elif cue == "approve-then-die":
        ask_approval(turn)
        sys.stderr.write("dying on purpose\n")
        sys.stderr.flush()
        os._exit(9)
    elif cue == "hang":
        params = {"threadId": state.thread, "turnId": turn, "itemId": f"msg-{turn}"}
        write({"method": "item/agentMessage/delta", "params": {**params, "delta": "working on it"}})
    elif cue == "malformed":
        sys.stdout.write("this is not json {\n")
        sys.stdout.flush()
        complete_turn(turn, "completed", "still here after a malformed line")
    elif cue == "huge":
        sys.stdout.write('{"method": "warning", "params": {"message": "')
        for _ in range(HUGE_LINE_BYTES // CHUNK):
            sys.stdout.write("x" * CHUNK)
        sys.stdout.write('"}}\n')
        sys.stdout.flush()
        complete_turn(turn, "completed", "the huge line went through")
    elif cue == "flood":
        line = ("stderr flood " * 5000)[: CHUNK - 1] + "\n"
        for _ in range(FLOOD_BYTES // CHUNK):
            sys.stderr.write(line)
        sys.stderr.write("flood done\n")
        sys.stderr.flush()
        complete_turn(turn, "completed", "survived the flood")
    else:
        complete_turn(turn, "completed", f"echo: {text}")


def answered(msg: dict[str, object]) -> None:
    request_id = msg["id"]
    assert isinstance(request_id, int)
    turn = pending.pop(request_id, state.turn)
    result = msg.get("result")
    decision = result.get("decision") if isinstance(result, dict) else None
    params = {"threadId": state.thread, "requestId": request_id}
    write({"method": "serverRequest/resolved", "params": params})
    if isinstance(result, dict) and "answers" in result:
        said = f"answers: {json.dumps(result['answers'], sort_keys=True)}"
    else:
        said = f"decision: {json.dumps(decision)}"
    complete_turn(str(turn), "completed", said)


def main() -> None:
    if MODE == "exit-early":
        sys.stderr.write("boom\n")
        sys.stderr.flush()
        sys.exit(3)
    for raw in sys.stdin:
        msg = json.loads(raw)
        method = msg.get("method")
        if MODE == "silent-init":
            continue
        if method == "initialize":
            agent = "agent-gateway/0.171.0 (Linux; x86_64) scripted (agent-gateway; 0.1.0)"
            write({"id": msg["id"], "result": {"userAgent": agent}})
        elif method == "thread/start":
            open_thread(msg, f"thread-scripted-{os.getpid()}")
        elif method == "thread/resume":
            open_thread(msg, str(msg["params"]["threadId"]))
        elif method == "turn/start":
            start_turn(msg)
        elif method == "turn/interrupt":
            write({"id": msg["id"], "result": {}})
            for request_id in list(pending):
                pending.pop(request_id)
                params = {"threadId": state.thread, "requestId": request_id}
                write({"method": "serverRequest/resolved", "params": params})
            complete_turn(str(state.turn), "interrupted")
        elif method is None and "result" in msg:
            answered(msg)
    if MODE == "linger":
        while True:
            signal.pause()


main()
