"""A fast scripted server speaking OpenCode's HTTP/SSE API (opencode-ai 1.18.33 shapes, as in
../shared/labs/oc-acp-lab/run_*.log), for the benchmarks. It never imports the project.

    opencode_bench_agent.py serve --hostname 127.0.0.1 --port N   (what the gateway runs)

It prints "opencode server listening on http://127.0.0.1:N", requires basic auth with user
``opencode`` and ``$OPENCODE_SERVER_PASSWORD``, and serves ``GET /event`` (``server.connected``
first), ``POST /session``, ``GET /session/{id}``, ``POST /session/{id}/prompt_async``,
``POST /session/{id}/abort``, ``POST /permission/{id}/reply``, ``GET /permission``,
``GET /question``, ``GET /session/status``. What a turn does is chosen by the prompt:

approve N TAG     N permissions in a row, one at a time: each one's command is
                  "bench TAG K t=<CLOCK_MONOTONIC ns when the event was written>"; each reply
                  is stamped when read, then ``permission.replied``, then the next; the turn
                  ends with the text "done TAG N" and ``session.idle``
deltas N          a burst of N ``message.part.delta`` events (the Codex bench agent's pieces,
                  so the same text) written to the event stream as fast as it takes them,
                  then ``session.idle`` (no final text part: the text shown is the deltas')
anything else     the text "echo: <prompt>", then ``session.idle``

Stamps go to ``$BENCH_STAMP_DIR/<pid>.jsonl`` as the Codex bench agent writes them:
{"ev": "answer", "tag", "k", "ns", "decision", "seen"}, and after a burst
{"ev": "burst", "n", "start_ns", "end_ns", "chars", "sha256"}.
"""

import asyncio
import base64
import hashlib
import json
import os
import sys
import time

from aiohttp import web

SESSION = f"ses_bench{os.getpid()}"
state: dict[str, object] = {"busy": False}
pending: dict[str, tuple[str, int, dict[str, object]]] = {}  # permission id -> (tag, k, props)
answers_seen: dict[str, int] = {}
replied: dict[str, asyncio.Event] = {}
subscribers: list[asyncio.Queue[dict[str, object]]] = []
counter = iter(range(1, 1 << 62))
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


def publish(kind: str, **props: object) -> None:
    event: dict[str, object] = {"id": f"evt_{next(counter)}", "type": kind, "properties": props}
    for queue in subscribers:
        queue.put_nowait(event)


@web.middleware
async def basic_auth(request: web.Request, handler):  # type: ignore[no-untyped-def]
    password = os.environ.get("OPENCODE_SERVER_PASSWORD", "")
    expected = "Basic " + base64.b64encode(f"opencode:{password}".encode()).decode()
    if request.headers.get("Authorization") != expected:
        return web.Response(status=401)
    return await handler(request)


BURST_BATCH = 1024  # events per write


def delta_piece(i: int) -> str:
    """The i-th delta of a burst, as the Codex bench agent writes it."""
    return f"w{i}\n" if i % 16 == 15 else f"w{i} "


async def write_burst(response: web.StreamResponse, n: int, assistant: str) -> None:
    """N delta events, batched, each its own ``data:`` event; stamped with the whole text."""
    props = {"sessionID": SESSION, "messageID": assistant, "partID": f"prt_{next(counter)}"}
    line = json.dumps(
        {"type": "message.part.delta", "properties": {**props, "field": "text", "delta": ""}}
    )
    head = b"data: " + line[: -len('""}}')].encode()  # every event: head, the piece, braces
    digest = hashlib.sha256()
    chars = 0
    start = time.monotonic_ns()
    for first in range(0, n, BURST_BATCH):
        pieces = [delta_piece(i) for i in range(first, min(n, first + BURST_BATCH))]
        for piece in pieces:
            digest.update(piece.encode())
            chars += len(piece)
        await response.write(b"".join(head + json.dumps(p).encode() + b"}}\n\n" for p in pieces))
    end = time.monotonic_ns()
    stamp(
        {
            "ev": "burst",
            "n": n,
            "start_ns": start,
            "end_ns": end,
            "chars": chars,
            "sha256": digest.hexdigest(),
        }
    )


async def events(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    queue: asyncio.Queue[dict[str, object]] = asyncio.Queue()
    subscribers.append(queue)
    try:
        connected = {"id": "evt_0", "type": "server.connected", "properties": {}}
        await response.write(b"data: " + json.dumps(connected).encode() + b"\n\n")
        while True:
            event = await queue.get()
            if event["type"] == "bench.burst":  # ours: written here, as fast as it is read
                props = event["properties"]
                assert isinstance(props, dict)
                await write_burst(response, int(props["n"]), str(props["messageID"]))
                continue
            if event["type"] == "permission.asked":
                # the request's clock: read when its line is written, as the Codex agent does
                props = event["properties"]
                assert isinstance(props, dict)
                meta = props["metadata"]
                meta["command"] = str(meta["command"]).replace("t=?", f"t={time.monotonic_ns()}")
            await response.write(b"data: " + json.dumps(event).encode() + b"\n\n")
    finally:
        subscribers.remove(queue)


def info() -> dict[str, object]:
    return {"id": SESSION, "version": "1.18.33-bench", "title": "bench"}


async def create_session(request: web.Request) -> web.Response:
    return web.json_response(info())


async def get_session(request: web.Request) -> web.Response:
    return web.json_response(info())


async def prompt_async(request: web.Request) -> web.Response:
    body = await request.json()
    text = " ".join(p.get("text", "") for p in body.get("parts", []))
    state["busy"] = True
    state["task"] = asyncio.get_running_loop().create_task(run_turn(text))
    return web.Response(status=204)


async def run_turn(text: str) -> None:
    user, assistant = f"msg_u{next(counter)}", f"msg_a{next(counter)}"
    publish("message.updated", sessionID=SESSION, info={"id": user, "role": "user"})
    publish("message.updated", sessionID=SESSION, info={"id": assistant, "role": "assistant"})
    words = text.split()
    if len(words) == 3 and words[0] == "approve":
        n, tag = int(words[1]), words[2]
        for k in range(n):
            permission = f"per_{next(counter)}"
            replied[permission] = asyncio.Event()
            props: dict[str, object] = {
                "id": permission,
                "sessionID": SESSION,
                "permission": "bash",
                "patterns": [f"bench {tag} {k}"],
                "metadata": {"command": f"bench {tag} {k} t=?"},
                "always": ["bench *"],
            }
            pending[permission] = (tag, k, props)
            publish("permission.asked", **props)
            await replied[permission].wait()
        said = f"done {tag} {n}"
    elif len(words) == 2 and words[0] == "deltas":
        publish("bench.burst", n=int(words[1]), messageID=assistant)
        state["busy"] = False
        publish("session.idle", sessionID=SESSION)
        return
    else:
        said = f"echo: {text}"
    part = {
        "id": f"prt_{next(counter)}",
        "messageID": assistant,
        "sessionID": SESSION,
        "type": "text",
        "text": said,
        "time": {"start": 1, "end": 2},
    }
    publish("message.part.updated", sessionID=SESSION, part=part)
    state["busy"] = False
    publish("session.idle", sessionID=SESSION)


async def reply_permission(request: web.Request) -> web.Response:
    permission = request.match_info["id"]
    body = await request.json()
    now = time.monotonic_ns()
    if permission not in pending:
        return web.json_response({"_tag": "PermissionNotFoundError"}, status=404)
    tag, k, _ = pending.pop(permission)
    answers_seen[permission] = answers_seen.get(permission, 0) + 1
    stamp(
        {
            "ev": "answer",
            "tag": tag,
            "k": k,
            "ns": now,
            "decision": body.get("reply"),
            "seen": answers_seen[permission],
        }
    )
    publish("permission.replied", sessionID=SESSION, requestID=permission, reply=body["reply"])
    replied[permission].set()
    return web.json_response(True)


async def abort(request: web.Request) -> web.Response:
    task = state.get("task")
    if isinstance(task, asyncio.Task) and not task.done():
        task.cancel()
        error = {"name": "MessageAbortedError", "data": {"message": "Aborted"}}
        publish("session.error", sessionID=SESSION, error=error)
        state["busy"] = False
        publish("session.idle", sessionID=SESSION)
    return web.json_response(True)


async def list_permissions(request: web.Request) -> web.Response:
    return web.json_response([props for _, _, props in pending.values()])


async def list_questions(request: web.Request) -> web.Response:
    return web.json_response([])


async def statuses(request: web.Request) -> web.Response:
    return web.json_response({SESSION: {"type": "busy"}} if state["busy"] else {})


def main() -> None:
    args = sys.argv[1:]
    port = int(args[args.index("--port") + 1])
    host = args[args.index("--hostname") + 1]
    app = web.Application(middlewares=[basic_auth])
    app.add_routes(
        [
            web.get("/event", events),
            web.post("/session", create_session),
            web.get("/session/status", statuses),
            web.get("/session/{id}", get_session),
            web.post("/session/{id}/prompt_async", prompt_async),
            web.post("/session/{id}/abort", abort),
            web.post("/permission/{id}/reply", reply_permission),
            web.get("/permission", list_permissions),
            web.get("/question", list_questions),
        ]
    )

    def listening(*_: object) -> None:
        print(f"opencode server listening on http://{host}:{port}", flush=True)

    # an open event stream never ends on its own: do not wait the default 60 s for it
    web.run_app(app, host=host, port=port, print=listening, access_log=None, shutdown_timeout=0.5)


if __name__ == "__main__":
    main()
