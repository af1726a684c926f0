"""A scripted ACP v1 agent on stdio, for the gateway tests (shapes as codex-acp 0.16.0 sends
them: ../shared/labs/oc-acp-lab/codex-acp-run.log). What a prompt's text says decides the turn:

ask       asks permission for a command with four options of odd ids (string request id),
          then says which option came back ("chose <optionId>" or "cancelled")
ask-num   the same with a numeric request id
ask-edit  asks permission for a file edit (a diff), then says what came back
refuse    asks for fs/read_text_file and elicitation/create, writes a line that is not JSON,
          then says the error codes it got back
anything  says "echo: <text>"

session/cancel ends the running turn with stopReason "cancelled" once its permission was
answered. session/load replays one old exchange before answering (the gateway must not show it).
"""

import json
import sys

SESSION = "sess-acp-1"
OPTIONS = [
    {"optionId": "ok:1", "name": "Yes, once", "kind": "allow_once"},
    {"optionId": "7", "name": "Yes, always", "kind": "allow_always"},
    {"optionId": "no/2", "name": "No", "kind": "reject_once"},
    {"optionId": "never!", "name": "Never", "kind": "reject_always"},
]


def write(message: dict[str, object]) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
    sys.stdout.flush()


def update(body: dict[str, object]) -> None:
    write({"method": "session/update", "params": {"sessionId": SESSION, "update": body}})


def say(text: str) -> None:
    update({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}})


def read() -> dict[str, object] | None:
    line = sys.stdin.readline()
    return json.loads(line) if line else None


def ask(request_id: object, tool_call: dict[str, object]) -> dict[str, object] | None:
    """Ask, and wait for the answer to this request (a cancel notification may come first)."""
    params = {"sessionId": SESSION, "toolCall": tool_call, "options": OPTIONS}
    write({"id": request_id, "method": "session/request_permission", "params": params})
    cancelled = False
    while (msg := read()) is not None:
        if msg.get("method") == "session/cancel":
            cancelled = True
        elif msg.get("id") == request_id and "method" not in msg:
            result = msg.get("result")
            assert isinstance(result, dict)
            outcome = result["outcome"]
            return {"outcome": outcome, "cancelled": cancelled}
    return None


def command_call(call_id: str) -> dict[str, object]:
    return {
        "toolCallId": call_id,
        "kind": "execute",
        "status": "pending",
        "title": "echo hi > hi.txt",
        "rawInput": {"command": ["/bin/bash", "-lc", "echo hi > hi.txt"], "cwd": "/w"},
    }


def edit_call(call_id: str) -> dict[str, object]:
    diff = {"type": "diff", "path": "/w/notes.md", "oldText": "old line", "newText": "new line"}
    return {
        "toolCallId": call_id,
        "kind": "edit",
        "status": "pending",
        "title": "Edit notes.md",
        "locations": [{"path": "/w/notes.md"}],
        "content": [diff],
    }


def turn(prompt_id: object, text: str) -> None:
    if text.startswith("ask"):
        call_id = f"call-{prompt_id}"
        request_id: object = 900 if text == "ask-num" else f"perm-{prompt_id}"
        call = edit_call(call_id) if text == "ask-edit" else command_call(call_id)
        answer = ask(request_id, call)
        if answer is None:
            return
        outcome = answer["outcome"]
        assert isinstance(outcome, dict)
        if answer["cancelled"] or outcome.get("outcome") == "cancelled":
            write({"id": prompt_id, "result": {"stopReason": "cancelled"}})
            return
        done = {"sessionUpdate": "tool_call_update", "toolCallId": call_id, "status": "completed"}
        update(done)
        say(f"chose {outcome.get('optionId')}")
    elif text == "refuse":
        write({"id": 50, "method": "fs/read_text_file", "params": {"path": "/etc/passwd"}})
        write({"id": "el-1", "method": "elicitation/create", "params": {"message": "Name?"}})
        sys.stdout.write("this is not json\n")
        sys.stdout.flush()
        codes = []
        while len(codes) < 2 and (msg := read()) is not None:
            error = msg.get("error")
            if isinstance(error, dict):
                codes.append(str(error.get("code")))
        say("refused with " + " ".join(codes))
    else:
        say(f"echo: {text}")
    update({"sessionUpdate": "usage_update", "used": 42, "size": 1000})
    write({"id": prompt_id, "result": {"stopReason": "end_turn"}})


def main() -> None:
    while (msg := read()) is not None:
        method, msg_id = msg.get("method"), msg.get("id")
        params = msg.get("params")
        assert isinstance(params, dict) or params is None
        if method == "initialize":
            capabilities = {"loadSession": True}
            info = {"name": "acp-scripted", "version": "0.0.1"}
            result = {"protocolVersion": 1, "agentCapabilities": capabilities, "agentInfo": info}
            write({"id": msg_id, "result": result})
        elif method == "session/new":
            write({"id": msg_id, "result": {"sessionId": SESSION}})
        elif method == "session/load":
            old = {"type": "text", "text": "OLD HISTORY"}
            update({"sessionUpdate": "user_message_chunk", "content": old})
            say("OLD HISTORY")
            write({"id": msg_id, "result": None})
        elif method == "session/prompt":
            assert params is not None
            [block] = params["prompt"]
            turn(msg_id, block["text"])


if __name__ == "__main__":
    main()
