"""Scripted agent speaking just enough of the Codex app-server protocol (0.171 shapes, as in
tests/transcripts/codex-0.171/), for the runtime tests. Some modes misbehave on purpose.

    fake_codex_app_server.py MODE

approve        one turn asks to run a command and reports the decision back as its message;
               exits 0 when stdin closes
exit-early     answers nothing, writes "boom" to stderr and exits 3 once initialize arrives
silent         reads everything, never answers
refuse-thread  refuses thread/start with a JSON-RPC error
huge-line      at turn/start writes a 64 KiB line
garbage        at turn/start writes a line that is not JSON, then completes the turn
exit-after-turn  exits 0 right after the first turn completed
"""

import json
import sys

MODE = sys.argv[1]
THREAD = "thread-fake"
TURN = "turn-fake"


def write(message: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def complete_turn(status: str, text: str | None = None) -> None:
    if text is not None:
        item = {"type": "agentMessage", "id": "msg-1", "text": text}
        write({"method": "item/completed", "params": {"item": item, "turnId": TURN}})
    turn = {"id": TURN, "status": status, "error": None}
    write({"method": "turn/completed", "params": {"threadId": THREAD, "turn": turn}})


def main() -> None:
    for raw in sys.stdin:
        msg = json.loads(raw)
        method, msg_id = msg.get("method"), msg.get("id")
        if MODE == "silent":
            continue
        if method == "initialize":
            if MODE == "exit-early":
                sys.stderr.write("boom\n")
                sys.stderr.flush()
                sys.exit(3)
            agent = "agent-gateway/0.171.0 (Linux; x86_64) fake (agent-gateway; 0.1.0)"
            write({"id": msg_id, "result": {"userAgent": agent}})
        elif method == "thread/start":
            if MODE == "refuse-thread":
                error = {"code": -32600, "message": "thread refused by the fake"}
                write({"id": msg_id, "error": error})
                continue
            sandbox = {"type": "workspaceWrite", "networkAccess": False}
            result = {
                "thread": {"id": THREAD},
                "approvalPolicy": msg["params"]["approvalPolicy"],
                "approvalsReviewer": msg["params"]["approvalsReviewer"],
                "sandbox": sandbox,
            }
            write({"id": msg_id, "result": result})
        elif method == "turn/start":
            write({"id": msg_id, "result": {"turn": {"id": TURN, "status": "inProgress"}}})
            write({"method": "turn/started", "params": {"threadId": THREAD, "turn": {"id": TURN}}})
            if MODE == "huge-line":
                write({"method": "warning", "params": {"message": "x" * 65536}})
            elif MODE == "garbage":
                sys.stdout.write("this is not json\n")
                sys.stdout.flush()
                complete_turn("completed", "still here")
            elif MODE == "exit-after-turn":
                complete_turn("completed", "bye")
                sys.exit(0)
            else:
                params = {
                    "kind": "command",
                    "threadId": THREAD,
                    "turnId": TURN,
                    "itemId": "call-1",
                    "command": "touch hello.txt",
                    "cwd": "/work",
                    "availableDecisions": ["accept", "cancel"],
                }
                write(
                    {"id": 0, "method": "item/commandExecution/requestApproval", "params": params}
                )
        elif method == "turn/interrupt":
            write({"id": msg_id, "result": {}})
            complete_turn("interrupted")
            write({"method": "serverRequest/resolved", "params": {"requestId": 0}})
        elif method is None and msg_id == 0 and "result" in msg:
            write({"method": "serverRequest/resolved", "params": {"requestId": 0}})
            complete_turn("completed", f"decision: {json.dumps(msg['result']['decision'])}")


main()
