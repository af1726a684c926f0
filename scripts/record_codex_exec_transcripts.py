#!/usr/bin/env python3
"""Record the project's ``codex exec --json`` transcripts from the real, pinned binary.

Each scenario runs one or more turns of ``codex exec`` (one process each, the argv built by
``adapters.codex_exec_process.exec_argv`` and the environment the session gives it) against the
scripted fake model (``tests/servers/fake_responses.py``) in a hermetic CODEX_HOME
(``tests/codex_env.py``), and writes ``tests/transcripts/codex-exec-0.171/<scenario>.jsonl``,
one record a line, ``{"t": seconds since the scenario began, "dir", "msg"}``:

- ``"--"`` ``{"spawn": {"argv": [...], "settings": {...}}}``: a turn's process starts (argv[0]
  is written ``codex``; ``settings`` are the CodexExecSettings that built the argv);
- ``">>"`` ``{"stdin": text}``: the prompt as written to stdin, which is then closed;
- ``"<<"`` a JSON line from stdout (a line that is not JSON is kept as a string);
- ``"--"`` ``{"signal": "SIGTERM"}``: the recorder ended the process group (an interrupt);
- ``"--"`` ``{"exit": {"code", "signal", "interrupted", "stderr"}}``: the process ended.

Paths are replaced by ``$CODEX_HOME``, ``$WORKSPACE`` and ``$OUTSIDE``. Each scenario prints
what a user would notice (files, events, what the model was told) and fails loudly if the
binary did not do what it expects.

    .venv/bin/python scripts/record_codex_exec_transcripts.py [--only NAME ...] [--out DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from adapters.codex_exec_process import (  # noqa: E402
    RUST_LOG,
    CodexExecSettings,
    exec_argv,
    prompt_lines,
)
from tests.codex_env import CodexHome, make_codex_home  # noqa: E402
from tests.servers import fake_responses as fm  # noqa: E402
from tests.transcript_recording import ScenarioFailed, Transcript, check  # noqa: E402

DEFAULT_BIN = ROOT / ".cache" / "agents" / "node_modules" / ".bin" / "codex"
DEFAULT_OUT = ROOT / "tests" / "transcripts" / "codex-exec-0.171"
TIMEOUT = 60.0
Msg = dict[str, Any]


@dataclass
class Turn:
    events: list[Msg]
    code: int | None
    signal: int | None
    stderr: str

    def of_type(self, kind: str) -> list[Msg]:
        return [e for e in self.events if e.get("type") == kind]

    def items(self, kind: str) -> list[Msg]:
        return [e["item"] for e in self.of_type("item.completed") if e["item"]["type"] == kind]

    @property
    def thread_id(self) -> str | None:
        started = self.of_type("thread.started")
        return started[0]["thread_id"] if started else None


@dataclass
class Run:
    codex: str
    home: CodexHome
    fake: fm.FakeResponses
    transcript: Transcript

    def settings(self, **overrides: Any) -> CodexExecSettings:
        values: dict[str, Any] = {
            "command": [self.codex],
            "cwd": str(self.home.workspace),
            "skip_git_repo_check": True,  # the scratch workspace is no git repository
            **overrides,
        }
        return CodexExecSettings(**values)

    async def turn(
        self,
        prompt: str,
        settings: CodexExecSettings,
        *,
        thread_id: str | None = None,
        interrupt_on: Callable[[Msg], bool] | None = None,
    ) -> Turn:
        argv = exec_argv(settings, resume_thread_id=thread_id)
        recorded = {k: v for k, v in asdict(settings).items() if k not in ("command", "cwd")}
        self.transcript.add("--", {"spawn": {"argv": ["codex", *argv[1:]], "settings": recorded}})
        proc = await asyncio.create_subprocess_exec(
            *argv,
            cwd=self.home.workspace,
            env={**self.home.env, "RUST_LOG": RUST_LOG},
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
            limit=16 * 1024 * 1024,
        )
        assert proc.stdin and proc.stdout and proc.stderr
        written = b"".join(line + b"\n" for line in prompt_lines(prompt))
        self.transcript.add(">>", {"stdin": written.decode()})
        proc.stdin.write(written)
        proc.stdin.close()
        stderr_task = asyncio.create_task(proc.stderr.read())
        events: list[Msg] = []
        interrupted = False
        async with asyncio.timeout(TIMEOUT):
            while line := await proc.stdout.readline():
                try:
                    msg: Any = json.loads(line)
                except ValueError:
                    msg = line.decode(errors="replace").rstrip("\n")
                self.transcript.add("<<", msg)
                if isinstance(msg, dict):
                    events.append(msg)
                    if interrupt_on is not None and not interrupted and interrupt_on(msg):
                        interrupted = True
                        self.transcript.add("--", {"signal": "SIGTERM"})
                        os.killpg(proc.pid, signal.SIGTERM)
            returncode = await proc.wait()
            stderr = (await stderr_task).decode(errors="replace")
        code = returncode if returncode >= 0 else None
        killed_by = -returncode if returncode < 0 else None
        exit_record = {"code": code, "signal": killed_by, "interrupted": interrupted}
        self.transcript.add("--", {"exit": {**exit_record, "stderr": stderr}})
        return Turn(events, code, killed_by, stderr)


# --- scenarios -----------------------------------------------------------------------------


async def command(run: Run) -> None:
    run.fake.enqueue([fm.shell("echo hello from exec; exit 3"), fm.message("The command failed.")])
    turn = await run.turn("run the script", run.settings())
    commands = turn.items("command_execution")
    check(len(commands) == 1 and commands[0]["exit_code"] == 3, "the command's exit code is 3")
    check(commands[0]["aggregated_output"] == "hello from exec\n", "its output is reported")
    check(bool(turn.of_type("turn.completed")), "the turn completed")
    check(turn.code == 0, "codex exec exited 0")


async def resume(run: Run) -> None:
    run.fake.enqueue(
        [fm.message("First answer.")],
        [fm.message(lambda r: "I remember: " + " | ".join(r.user_texts()[-2:]))],
    )
    first = await run.turn("remember the word kumquat", run.settings())
    check(first.thread_id is not None, "the first turn started a thread")
    second = await run.turn("which word?", run.settings(), thread_id=first.thread_id)
    check(second.thread_id == first.thread_id, "the resumed turn runs in the same thread")
    texts = run.fake.model_requests()[-1].user_texts()
    check(any("kumquat" in t for t in texts), "the model saw the first turn's prompt")
    usage = [t.of_type("turn.completed")[0]["usage"]["input_tokens"] for t in (first, second)]
    check(usage[1] > usage[0], f"turn.completed reports the thread's running total {usage}")


async def patch(run: Run) -> None:
    run.fake.enqueue([fm.apply_patch(fm.PATCH_EXAMPLE), fm.DONE])
    turn = await run.turn("add a file", run.settings())
    changes = turn.items("file_change")
    check(len(changes) == 1 and changes[0]["status"] == "completed", "one file change completed")
    check((run.home.workspace / "patched.txt").is_file(), "patched.txt was written")


async def refused_escalation(run: Run) -> None:
    run.fake.enqueue([fm.shell("touch escalated.txt", escalated=True), fm.DONE])
    turn = await run.turn("create escalated.txt outside the sandbox", run.settings())
    told = run.fake.model_requests()[-1].tool_output() or ""
    check("reject command" in told, f"the model was told it was refused: {told[:80]!r}")
    check(not turn.items("command_execution"), "stdout shows no command item for it")
    check("codex_core::tools::router" in turn.stderr, "stderr records the router's refusal")
    check(not (run.home.workspace / "escalated.txt").exists(), "the file was not created")


async def refused_sandbox_write(run: Run) -> None:
    target = run.home.outside / "escaped.txt"
    run.fake.enqueue([fm.shell(f"touch {target}"), fm.DONE])
    turn = await run.turn("create a file outside the workspace", run.settings())
    check(not turn.items("command_execution"), "stdout shows no command item for it")
    check("recorded sandbox violation" in turn.stderr, "stderr records the sandbox violation")
    check(not target.exists(), "the file outside the workspace was not created")


async def refused_patch_read_only(run: Run) -> None:
    run.fake.enqueue([fm.apply_patch(fm.PATCH_EXAMPLE), fm.DONE])
    turn = await run.turn("add a file", run.settings(sandbox="read-only"))
    check(not turn.items("file_change"), "stdout shows no file change for it")
    check("patch rejected" in turn.stderr, "stderr records the rejected patch")
    check(not (run.home.workspace / "patched.txt").exists(), "nothing was written")


async def refused_patch_outside(run: Run) -> None:
    target = run.home.outside / "patched.txt"
    patch_text = f"*** Begin Patch\n*** Add File: {target}\n+outside\n*** End Patch\n"
    run.fake.enqueue([fm.apply_patch(patch_text), fm.DONE])
    turn = await run.turn("add a file outside", run.settings())
    check("writing outside of the project" in turn.stderr, "stderr records the rejected patch")
    check(not target.exists(), "nothing was written outside the workspace")


async def refused_execpolicy(run: Run) -> None:
    rules = run.home.home / "rules"
    rules.mkdir(exist_ok=True)
    (rules / "default.rules").write_text('prefix_rule(pattern=["touch"], decision="forbidden")\n')
    run.fake.enqueue([fm.shell("touch forbidden.txt"), fm.DONE])
    turn = await run.turn("create forbidden.txt", run.settings())
    check("policy forbids" in turn.stderr, "stderr records the execpolicy refusal")
    check(not (run.home.workspace / "forbidden.txt").exists(), "the file was not created")


async def network_blocked(run: Run) -> None:
    connect = "import socket; socket.create_connection(('127.0.0.1', 9))"
    run.fake.enqueue([fm.shell(f'python3 -c "{connect}"'), fm.DONE])
    turn = await run.turn("open a socket", run.settings())
    commands = turn.items("command_execution")
    check(len(commands) == 1 and commands[0]["status"] == "failed", "the command item failed")
    check("recorded sandbox violation" in turn.stderr, "stderr records the sandbox violation")


async def question_in_exec(run: Run) -> None:
    run.fake.enqueue([fm.request_user_input([fm.COLOR]), fm.DONE])
    settings = run.settings(enable=("default_mode_request_user_input",))
    turn = await run.turn("ask me a colour", settings)
    # the gateway silences the warning about the feature it enabled (codex_launch.quieted)
    check(not turn.items("error"), "no unstable-feature warning")
    told = run.fake.model_requests()[-1].tool_output() or ""
    check(told == '{"answers":{}}', f"exec answered the question empty: {told!r}")


async def model_failed(run: Run) -> None:
    run.fake.enqueue([fm.failure("the model broke")])
    turn = await run.turn("hello", run.settings())
    check(bool(turn.of_type("error")), "an error event")
    check(bool(turn.of_type("turn.failed")), "turn.failed")
    check(turn.code == 1, "codex exec exited 1")


async def interrupted(run: Run) -> None:
    run.fake.enqueue([fm.shell("sleep 300"), fm.DONE])

    def command_started(msg: Msg) -> bool:
        return msg.get("type") == "item.started"

    turn = await run.turn("wait a long time", run.settings(), interrupt_on=command_started)
    check(turn.signal == signal.SIGTERM, "codex exec ended by SIGTERM")
    check(not turn.of_type("turn.completed"), "no turn.completed after the interrupt")


SCENARIOS: dict[str, Callable[[Run], Awaitable[None]]] = {
    "command": command,
    "resume": resume,
    "patch": patch,
    "refused_escalation": refused_escalation,
    "refused_sandbox_write": refused_sandbox_write,
    "refused_patch_read_only": refused_patch_read_only,
    "refused_patch_outside": refused_patch_outside,
    "refused_execpolicy": refused_execpolicy,
    "network_blocked": network_blocked,
    "question_in_exec": question_in_exec,
    "model_failed": model_failed,
    "interrupted": interrupted,
}


async def record(name: str, codex: str, out: Path) -> bool:
    print(f"== {name}")
    async with fm.FakeResponses() as fake:
        with make_codex_home(fake.base_url) as home:
            run = Run(codex, home, fake, Transcript(home.substitutions()))
            try:
                await SCENARIOS[name](run)
            except (ScenarioFailed, TimeoutError) as exc:
                print(f"    FAILED: {exc!r}")
                return False
    run.transcript.write(out / f"{name}.jsonl")
    return True


async def record_all(names: list[str], codex: str, out: Path) -> bool:
    results = [await record(name, codex, out) for name in names]
    return all(results)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--codex", default=os.environ.get("AGENT_GATEWAY_CODEX_BIN", DEFAULT_BIN))
    parser.add_argument("--only", nargs="+", choices=sorted(SCENARIOS), default=list(SCENARIOS))
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    return 0 if asyncio.run(record_all(args.only, str(args.codex), args.out)) else 1


if __name__ == "__main__":
    sys.exit(main())
