#!/usr/bin/env python3
"""Record the project's own Codex app-server transcripts from the real, pinned binary.

Each scenario runs ``codex app-server`` against the scripted fake model
(``tests/servers/fake_responses.py``) in a hermetic CODEX_HOME (``tests/codex_env.py``) and
writes ``tests/transcripts/codex-0.171/<scenario>.jsonl``: one line per JSON-RPC message,
``{"t": seconds since the first spawn, "dir": ">>" (to the agent) | "<<" (from it), "msg"}``,
with the real paths replaced by ``$CODEX_HOME`` and ``$WORKSPACE``. A line
``{"dir": "--", "msg": {"note": ...}}`` marks a new app-server process (resume).

A dev tool with its own tiny JSON-RPC driver, so that each transcript shows exactly what was
sent. Each scenario prints what a user would notice (files, turn status, what the model was
told) and fails loudly if the binary did not do what the scenario expects.

    .venv/bin/python scripts/record_codex_transcripts.py [--only NAME ...] [--out DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.codex_env import CodexHome, make_codex_home  # noqa: E402
from tests.servers import fake_responses as fm  # noqa: E402

DEFAULT_BIN = ROOT / ".cache" / "agents" / "node_modules" / ".bin" / "codex"
DEFAULT_OUT = ROOT / "tests" / "transcripts" / "codex-0.171"
TIMEOUT = 30.0
Msg = dict[str, Any]


class ScenarioFailed(Exception):
    pass


def check(condition: bool, what: str) -> None:
    print(f"    {'ok ' if condition else 'BAD'} {what}")
    if not condition:
        raise ScenarioFailed(what)


@dataclass
class Transcript:
    substitutions: list[tuple[str, str]]
    t0: float = field(default_factory=time.monotonic)
    lines: list[str] = field(default_factory=list)

    def add(self, direction: str, msg: Msg) -> None:
        text = json.dumps(msg)
        for real, placeholder in self.substitutions:
            text = text.replace(real, placeholder)
        record = {"t": round(time.monotonic() - self.t0, 4), "dir": direction}
        self.lines.append(json.dumps(record)[:-1] + f', "msg": {text}}}')


class AppServer:
    """One ``codex app-server`` process and its JSON-RPC bookkeeping."""

    def __init__(self, codex: str, home: CodexHome, transcript: Transcript, args: list[str]):
        self.argv = [codex, "app-server", *args]
        self.home = home
        self.transcript = transcript
        self.next_id = 0
        self.pending: dict[int, asyncio.Future[Msg]] = {}
        self.inbox: asyncio.Queue[Msg | None] = asyncio.Queue()
        self.proc: asyncio.subprocess.Process | None = None
        self.reader: asyncio.Task[None] | None = None

    async def __aenter__(self) -> AppServer:
        self.proc = await asyncio.create_subprocess_exec(
            *self.argv,
            cwd=self.home.workspace,
            env=self.home.env,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            limit=16 * 1024 * 1024,
        )
        self.reader = asyncio.create_task(self._read())
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            async with asyncio.timeout(10):
                await self.proc.wait()
        except TimeoutError:
            self.proc.kill()
            await self.proc.wait()
        if self.reader is not None:
            self.reader.cancel()

    async def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        while line := await self.proc.stdout.readline():
            msg = json.loads(line)
            self.transcript.add("<<", msg)
            if "method" not in msg and msg.get("id") in self.pending:
                self.pending.pop(msg["id"]).set_result(msg)
            else:
                await self.inbox.put(msg)
        await self.inbox.put(None)

    async def send(self, msg: Msg) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        self.transcript.add(">>", msg)
        self.proc.stdin.write(json.dumps(msg).encode() + b"\n")
        await self.proc.stdin.drain()

    async def request(self, method: str, params: Msg) -> Msg:
        self.next_id += 1
        future: asyncio.Future[Msg] = asyncio.get_running_loop().create_future()
        self.pending[self.next_id] = future
        await self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        async with asyncio.timeout(TIMEOUT):
            reply = await future
        if "error" in reply:
            raise ScenarioFailed(f"{method}: {reply['error']}")
        result: Msg = reply["result"]
        return result

    async def respond(self, request: Msg, result: Msg) -> None:
        await self.send({"jsonrpc": "2.0", "id": request["id"], "result": result})

    async def expect(self, *methods: str) -> Msg:
        """The next message from the agent with one of ``methods`` (others are skipped)."""
        async with asyncio.timeout(TIMEOUT):
            while (msg := await self.inbox.get()) is not None:
                if msg.get("method") in methods:
                    return msg
        raise ScenarioFailed(f"app-server exited while waiting for {methods}")

    async def initialize(self, *, experimental: bool = False) -> None:
        await self.request(
            "initialize",
            {
                "clientInfo": {"name": "agent-gateway", "title": None, "version": "0.1.0"},
                "capabilities": {"experimentalApi": experimental, "requestAttestation": False},
            },
        )
        await self.send({"jsonrpc": "2.0", "method": "initialized"})

    async def start_thread(self, **params: Any) -> str:
        result = await self.request("thread/start", {**self.thread_params(), **params})
        return str(result["thread"]["id"])

    def thread_params(self) -> Msg:
        """What the gateway asks of every thread: our cwd, approvals by a person."""
        return {
            "cwd": str(self.home.workspace),
            "approvalPolicy": "on-request",
            "approvalsReviewer": "user",
            "sandbox": "workspace-write",
        }

    async def open_thread(self, *, experimental: bool = False, **params: Any) -> str:
        await self.initialize(experimental=experimental)
        return await self.start_thread(**params)

    async def start_turn(self, thread_id: str, text: str, **params: Any) -> str:
        items = [{"type": "text", "text": text, "text_elements": []}]
        result = await self.request("turn/start", {"threadId": thread_id, "input": items, **params})
        return str(result["turn"]["id"])

    async def turn_completed(self) -> Msg:
        turn: Msg = (await self.expect("turn/completed"))["params"]["turn"]
        return turn


@dataclass
class Run:
    """What a scenario gets: the fake model, the home, and a way to start app-servers."""

    codex: str
    fake: fm.FakeResponses
    home: CodexHome
    transcript: Transcript
    processes: int = 0

    def app_server(self, *args: str) -> AppServer:
        if self.processes:
            self.transcript.add("--", {"note": "new app-server process"})
        self.processes += 1
        return AppServer(self.codex, self.home, self.transcript, list(args))

    def exists(self, name: str) -> bool:
        return (self.home.workspace / name).exists()

    def told(self, call_id: str | None = None) -> str:
        """The tool output the model got last (what the agent reported back)."""
        return next(
            (out for r in reversed(self.fake.model_requests()) if (out := r.tool_output(call_id))),
            "",
        )


DONE = fm.message(lambda r: f"Done. Tool said: {(r.tool_output() or '')[:300]}")
TOUCH = "touch hello.txt"


def add_file(name: str, text: str = "hello") -> str:
    return f"*** Begin Patch\n*** Add File: {name}\n+{text}\n*** End Patch\n"


UPDATE_ONE = "*** Begin Patch\n*** Update File: one.txt\n@@\n-hello\n+hello again\n*** End Patch\n"


def question(qid: str, header: str, text: str, *labels: str) -> dict[str, Any]:
    options = [{"label": label, "description": f"use {label}"} for label in labels]
    return {"id": qid, "header": header, "question": text, "options": options}


QUESTIONS = [
    question("color", "Color", "Which color should I use?", "Red (Recommended)", "Blue"),
    question("name", "Name", "What should the file be called?", "notes.txt", "notes.md"),
]


async def approve_one_command(run: Run, decision: str) -> Msg:
    run.fake.enqueue([fm.shell(TOUCH, escalated=True), DONE])
    async with run.app_server() as srv:
        thread = await srv.open_thread()
        await srv.start_turn(thread, "please create hello.txt")
        ask = await srv.expect("item/commandExecution/requestApproval")
        print(f"    availableDecisions: {json.dumps(ask['params'].get('availableDecisions'))}")
        await srv.respond(ask, {"decision": decision})
        return await srv.turn_completed()


async def shell_accept(run: Run) -> None:
    turn = await approve_one_command(run, "accept")
    check(turn["status"] == "completed" and run.exists("hello.txt"), "completed, file created")


async def shell_decline(run: Run) -> None:
    turn = await approve_one_command(run, "decline")
    check(turn["status"] == "completed", f"turn {turn['status']} (decline is not listed)")
    check(not run.exists("hello.txt"), "file not created")
    check("rejected" in run.told(), f"model told: {run.told()!r}")


async def shell_cancel(run: Run) -> None:
    turn = await approve_one_command(run, "cancel")
    check(turn["status"] == "interrupted", f"turn {turn['status']}")
    check(not run.exists("hello.txt"), "file not created")


async def shell_execpolicy_amendment(run: Run) -> None:
    first = [fm.shell(TOUCH, escalated=True, prefix_rule=["touch"]), DONE]
    second = [fm.shell("touch second.txt", escalated=True, prefix_rule=["touch"]), DONE]
    run.fake.enqueue(first, second)
    async with run.app_server() as srv:
        thread = await srv.open_thread()
        await srv.start_turn(thread, "please create hello.txt")
        ask = await srv.expect("item/commandExecution/requestApproval")
        proposed = ask["params"].get("proposedExecpolicyAmendment")
        print(f"    proposedExecpolicyAmendment: {proposed}")
        amendment = {"execpolicy_amendment": proposed}
        await srv.respond(ask, {"decision": {"acceptWithExecpolicyAmendment": amendment}})
        check((await srv.turn_completed())["status"] == "completed", "first turn completed")
        await srv.start_turn(thread, "now create second.txt")
        nxt = await srv.expect("item/commandExecution/requestApproval", "turn/completed")
        check(nxt["method"] == "turn/completed", "second matching command not asked")
        check(run.exists("second.txt"), "second.txt created")
    check((run.home.home / "rules" / "default.rules").is_file(), "rule kept in $CODEX_HOME/rules")


async def patch(run: Run, decisions: list[str], steps: list[fm.Step]) -> list[Msg]:
    run.fake.enqueue([*steps, DONE])
    asks = []
    async with run.app_server() as srv:
        thread = await srv.open_thread(sandbox="read-only")
        await srv.start_turn(thread, "please write the files")
        for decision in decisions:
            ask = await srv.expect("item/fileChange/requestApproval", "turn/completed")
            if ask["method"] == "turn/completed":
                asks.append(ask)
                return asks
            asks.append(ask)
            await srv.respond(ask, {"decision": decision})
        asks.append(await srv.expect("item/fileChange/requestApproval", "turn/completed"))
        if asks[-1]["method"] != "turn/completed":
            raise ScenarioFailed("asked once more than expected")
    return asks


async def patch_accept(run: Run) -> None:
    asks = await patch(run, ["accept"], [fm.apply_patch(add_file("patched.txt"))])
    check(asks[-1]["params"]["turn"]["status"] == "completed", "turn completed")
    check(run.exists("patched.txt"), "patched.txt created")


async def patch_accept_for_session(run: Run) -> None:
    # the session grant covers the paths of the approved patch (a patch to another file is
    # asked again), so the second patch edits the same file
    steps = [fm.apply_patch(add_file("one.txt")), fm.apply_patch(UPDATE_ONE)]
    asks = await patch(run, ["acceptForSession"], steps)
    check(len(asks) == 2 and asks[-1]["method"] == "turn/completed", "second patch not asked")
    text = (run.home.workspace / "one.txt").read_text()
    check(text == "hello again\n", f"one.txt written twice: {text!r}")


async def patch_accept_for_session_other_file(run: Run) -> None:
    steps = [fm.apply_patch(add_file("one.txt")), fm.apply_patch(add_file("two.txt"))]
    asks = await patch(run, ["acceptForSession", "accept"], steps)
    check(len(asks) == 3, "a patch to another file is asked again")
    check(run.exists("one.txt") and run.exists("two.txt"), "both files created")


async def patch_decline(run: Run) -> None:
    asks = await patch(run, ["decline"], [fm.apply_patch(add_file("patched.txt"))])
    check(asks[-1]["params"]["turn"]["status"] == "completed", "turn completed")
    check(not run.exists("patched.txt"), "patched.txt not created")
    print(f"    model told: {run.told()!r}")


async def user_input_other(run: Run) -> None:
    run.fake.enqueue([fm.request_user_input(QUESTIONS), DONE])
    async with run.app_server("--enable", "default_mode_request_user_input") as srv:
        thread = await srv.open_thread()
        await srv.start_turn(thread, "ask me first")
        ask = await srv.expect("item/tool/requestUserInput")
        answers = {
            "color": {"answers": ["Blue"]},
            "name": {"answers": ["user_note: call it shopping-list.txt"]},
        }
        await srv.respond(ask, {"answers": answers})
        turn = await srv.turn_completed()
    check(turn["status"] == "completed", "turn completed")
    check("shopping-list.txt" in run.told(), f"model told: {run.told()!r}")


async def interrupt_pending_approval(run: Run) -> None:
    run.fake.enqueue([fm.shell(TOUCH, escalated=True), DONE])
    async with run.app_server() as srv:
        thread = await srv.open_thread()
        turn_id = await srv.start_turn(thread, "please create hello.txt")
        ask = await srv.expect("item/commandExecution/requestApproval")
        await srv.request("turn/interrupt", {"threadId": thread, "turnId": turn_id})
        turn = await srv.turn_completed()
        resolved = await srv.expect("serverRequest/resolved")
    check(turn["status"] == "interrupted", "turn interrupted")
    check(resolved["params"]["requestId"] == ask["id"], "pending request resolved by the agent")
    check(not run.exists("hello.txt"), "file not created")


async def resume(run: Run) -> None:
    run.fake.enqueue([fm.message("first answer")], [fm.message("second answer")])
    async with run.app_server() as srv:
        thread = await srv.open_thread()
        await srv.start_turn(thread, "hello")
        check((await srv.turn_completed())["status"] == "completed", "first turn completed")
    async with run.app_server() as srv:
        await srv.initialize()
        params = {"threadId": thread, **srv.thread_params()}
        resumed = await srv.request("thread/resume", params)
        check(resumed["thread"]["id"] == thread, "resumed thread has the same id")
        await srv.start_turn(thread, "again")
        check((await srv.turn_completed())["status"] == "completed", "resumed turn completed")
    last = run.fake.model_requests()[-1]
    check("hello" in last.user_texts(), "the model saw the first turn's history")


async def model_failed(run: Run) -> None:
    run.fake.enqueue([fm.failure("fake model failure")])
    async with run.app_server() as srv:
        thread = await srv.open_thread()
        await srv.start_turn(thread, "hello")
        turn = await srv.turn_completed()
    check(turn["status"] == "failed", "turn failed")
    check("fake model failure" in json.dumps(turn.get("error")), f"error: {turn.get('error')}")


async def model_http_500(run: Run) -> None:
    run.fake.enqueue([fm.failure("fake internal error", http_status=500)])
    async with run.app_server() as srv:
        thread = await srv.open_thread()
        await srv.start_turn(thread, "hello")
        turn = await srv.turn_completed()
    check(turn["status"] == "failed", f"turn failed: {turn.get('error')}")


PERMISSIONS_TOOL = ("--enable", "request_permissions_tool")


def ask_write_outside(run: Run) -> fm.Step:
    permissions = {"file_system": {"write": [str(run.home.outside)]}}
    reason = "I need to write the report outside the workspace"
    return fm.function_call("request_permissions", {"permissions": permissions, "reason": reason})


async def permissions(run: Run, scope: str, *, grant: bool) -> None:
    """The model asks for write access outside the workspace, then writes there, in two
    turns; only the first turn asks."""
    first = [ask_write_outside(run), fm.shell(f"touch {run.home.outside}/one.txt"), DONE]
    second = [fm.shell(f"touch {run.home.outside}/two.txt"), DONE]
    run.fake.enqueue(first, second)
    async with run.app_server(*PERMISSIONS_TOOL) as srv:
        thread = await srv.open_thread()
        await srv.start_turn(thread, "write one.txt outside")
        ask = await srv.expect("item/permissions/requestApproval")
        granted = ask["params"]["permissions"] if grant else {}
        await srv.respond(ask, {"permissions": granted, "scope": scope})
        check((await srv.turn_completed())["status"] == "completed", "first turn completed")
        check((run.home.outside / "one.txt").exists() == grant, f"one.txt written: {grant}")
        print(f"    model told: {run.told(ask['params']['itemId'])!r}")
        await srv.start_turn(thread, "write two.txt outside")
        nxt = await srv.expect("item/permissions/requestApproval", "turn/completed")
        check(nxt["method"] == "turn/completed", "second turn did not ask")
    session = grant and scope == "session"
    check((run.home.outside / "two.txt").exists() == session, f"two.txt written: {session}")


async def permissions_grant_turn(run: Run) -> None:
    await permissions(run, "turn", grant=True)


async def permissions_grant_session(run: Run) -> None:
    await permissions(run, "session", grant=True)


async def permissions_deny(run: Run) -> None:
    await permissions(run, "turn", grant=False)


async def permissions_tool_off(run: Run) -> None:
    """Without the feature flag the tool is not offered and a call to it is refused."""
    run.fake.enqueue([ask_write_outside(run), DONE])
    async with run.app_server() as srv:
        thread = await srv.open_thread()
        await srv.start_turn(thread, "write outside")
        nxt = await srv.expect("item/permissions/requestApproval", "turn/completed")
    check(nxt["method"] == "turn/completed", "nothing asked")
    check("request_permissions" not in run.fake.model_requests()[0].tool_names, "not offered")
    check("unsupported call" in run.told(), f"model told: {run.told()!r}")


async def shell_additional_permissions(run: Run) -> None:
    """With exec_permission_approvals, a command may ask for sandboxed extra access; it comes
    as a command approval carrying additionalPermissions, not as a permissions request."""
    cmd = f"touch {run.home.outside}/extra.txt"
    extra = {"file_system": {"write": [str(run.home.outside)]}}
    run.fake.enqueue(
        [
            fm.shell(
                cmd,
                justification="write outside",
                sandbox_permissions="with_additional_permissions",
                additional_permissions=extra,
            ),
            DONE,
        ]
    )
    async with run.app_server("--enable", "exec_permission_approvals") as srv:
        # without the experimental API, additionalPermissions is left out of the request
        thread = await srv.open_thread(experimental=True)
        await srv.start_turn(thread, "write outside")
        ask = await srv.expect("item/commandExecution/requestApproval")
        print(f"    availableDecisions: {json.dumps(ask['params'].get('availableDecisions'))}")
        check(bool(ask["params"].get("additionalPermissions")), "additionalPermissions present")
        await srv.respond(ask, {"decision": "accept"})
        turn = await srv.turn_completed()
    check(turn["status"] == "completed", "turn completed")
    check((run.home.outside / "extra.txt").exists(), "extra.txt written outside")


Scenario = Callable[[Run], Awaitable[None]]
SCENARIOS: dict[str, Scenario] = {
    "shell_accept": shell_accept,
    "shell_decline": shell_decline,
    "shell_cancel": shell_cancel,
    "shell_execpolicy_amendment": shell_execpolicy_amendment,
    "patch_accept": patch_accept,
    "patch_accept_for_session": patch_accept_for_session,
    "patch_accept_for_session_other_file": patch_accept_for_session_other_file,
    "patch_decline": patch_decline,
    "user_input_other": user_input_other,
    "interrupt_pending_approval": interrupt_pending_approval,
    "resume": resume,
    "model_failed": model_failed,
    "model_http_500": model_http_500,
    "permissions_grant_turn": permissions_grant_turn,
    "permissions_grant_session": permissions_grant_session,
    "permissions_deny": permissions_deny,
    "permissions_tool_off": permissions_tool_off,
    "shell_additional_permissions": shell_additional_permissions,
}


async def record(name: str, scenario: Scenario, codex: str) -> list[str] | None:
    """Run one scenario; its transcript lines, or None if the binary did not behave."""
    print(f"{name}:")
    async with fm.FakeResponses() as fake:
        with make_codex_home(fake.base_url) as home:
            transcript = Transcript(home.substitutions())
            run = Run(codex=codex, fake=fake, home=home, transcript=transcript)
            try:
                await scenario(run)
            except (ScenarioFailed, TimeoutError) as exc:
                print(f"    FAILED: {exc!r}; transcript not written")
                return None
    return transcript.lines


async def record_all(names: Iterable[str], codex: str) -> dict[str, list[str] | None]:
    return {name: await record(name, SCENARIOS[name], codex) for name in names}


def main() -> int:
    parser = argparse.ArgumentParser(description="Record Codex app-server transcripts.")
    parser.add_argument("--codex", default=str(DEFAULT_BIN))
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--only", nargs="*", choices=sorted(SCENARIOS), default=None)
    args = parser.parse_args()
    recorded = asyncio.run(record_all(args.only or list(SCENARIOS), args.codex))
    args.out.mkdir(parents=True, exist_ok=True)
    for name, lines in recorded.items():
        if lines is not None:
            (args.out / f"{name}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return 0 if all(lines is not None for lines in recorded.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
