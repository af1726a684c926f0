"""The test's side of a gateway running in its own process (``tests/harness/gateway_proc.py``).

    config = write_config(tmp_path / "gateway.toml", data_dir, [codex_project(...), ...])
    async with gateway_process(config, tmp_path) as gw:        # recovery over, ready
        await gw.say(room("demo"), "alice", "hello")
        shown = await gw.card_where(lambda card: bool(card["actions"]), room("demo"))
        gw.kill()                                              # SIGKILL, as in a real crash
    async with gateway_process(config, tmp_path) as gw:        # a new process, same data dir
        ...

Everything the gateway process renders is mirrored here (``gw.messages``) as it happens; a
wait is an awaited change under a deadline, never a sleep. When the process dies, every wait
fails at once with the end of its log. ``crash_at`` arms a crash point (gateway/sessions/faults.py);
the process then ends with ``CRASH_EXIT_CODE`` when it gets there.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import signal
import socket
import sys
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from adapters.process_group import end_leftover_process_group
from gateway.config.hmac_key import HMAC_KEY_BYTES
from gateway.config.ledger_url import PgTarget
from gateway.domain import ConversationRef
from gateway.store.store import Store
from tests.codex_env import CodexHome

__all__ = [
    "DEADLINE",
    "ROOT",
    "SCRIPTED_AGENT",
    "GatewayExited",
    "GatewayProcess",
    "ProjectSpec",
    "Shown",
    "codex_project",
    "conv_json",
    "end_leftover_agents",
    "gateway_process",
    "process_alive",
    "room",
    "scripted_project",
    "write_config",
]

T = TypeVar("T")

ROOT = Path(__file__).resolve().parents[2]
SCRIPTED_AGENT = ROOT / "tests" / "agents" / "codex_scripted.py"
DEADLINE = 60.0
_STDOUT_LIMIT = 16 * 1024 * 1024


def room(channel: str, thread: str = "t1") -> ConversationRef:
    """A conversation of the memory platform; its channel picks the project."""
    return ConversationRef(platform="memory", space="team", channel=channel, thread=thread)


# --- configuration ---------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class ProjectSpec:
    name: str
    work_dir: Path
    argv: Sequence[str]
    channel: str  # conversations in this memory channel go to this project
    env: Mapping[str, str] = field(default_factory=dict)
    features: Sequence[str] = ()
    scope: str = "thread"  # "channel": one session for the channel, shown in each thread
    expire_after_seconds: float | None = None  # [projects.X.expiry] after_seconds


def codex_project(
    name: str, codex_bin: str, home: CodexHome, *, channel: str, scope: str = "thread"
) -> ProjectSpec:
    """The real codex app-server, against the fake model of ``home``."""
    return ProjectSpec(
        name=name,
        work_dir=home.workspace,
        argv=[codex_bin],
        channel=channel,
        env=home.env,
        scope=scope,
    )


def scripted_project(
    name: str,
    mode: str,
    work_dir: Path,
    *,
    channel: str,
    prompt_log: Path | None = None,
    scope: str = "thread",
) -> ProjectSpec:
    """``tests/agents/codex_scripted.py MODE`` (see there for the modes and cues)."""
    work_dir.mkdir(parents=True, exist_ok=True)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    if prompt_log is not None:
        env["SCRIPTED_PROMPT_LOG"] = str(prompt_log)
    return ProjectSpec(
        name=name,
        work_dir=work_dir,
        argv=[sys.executable, str(SCRIPTED_AGENT), mode],
        channel=channel,
        env=env,
        scope=scope,
    )


def write_config(
    path: Path,
    data_dir: Path,
    projects: Sequence[ProjectSpec],
    *,
    allow_from: Sequence[str] = ("alice", "bob"),
    approvers: Sequence[str] = ("alice", "bob"),
    stop_grace_seconds: float = 5,
    store: PgTarget | None = None,
    hosts: Mapping[str, str] | None = None,
    host_lease_seconds: float | None = None,
) -> Path:
    """A gateway config file: the memory platform and one section per project; the ledger
    in ``store`` (PostgreSQL) if given, and :func:`open_ledger` of ``data_dir`` opens it.
    ``hosts``: each project's host (by default this machine's name)."""
    q = json.dumps
    ledger = host = ""
    if store is not None:
        # a PostgreSQL store needs the hosts' key file and each project's host (issue 19):
        # one host, this machine, which the gateway process is by default
        key = path.parent / "hmac.key"
        if not key.exists():
            key.write_bytes(os.urandom(HMAC_KEY_BYTES))
            key.chmod(0o600)
        ledger = f"store = {q(store.url)}\nhmac_key_file = {q(str(key))}\n"
        if host_lease_seconds is not None:
            ledger += f"host_lease_seconds = {host_lease_seconds}\n"
        host = f"host = {q(socket.gethostname())}\n"
        _POSTGRESQL[data_dir] = store
    parts = [
        f"[gateway]\ndata_dir = {q(str(data_dir))}\nstop_grace_seconds = {stop_grace_seconds}\n"
        + ledger,
        "[platforms.memory]\n",
    ]

    def _host_line(name: str) -> str:
        assert hosts is not None
        return f"host = {q(hosts[name])}\n"

    for project in projects:
        env = "\n".join(f"{key} = {q(value)}" for key, value in project.env.items())
        parts.append(
            f"[projects.{project.name}]\n"
            f"work_dir = {q(str(project.work_dir))}\n"
            'agent = "codex-app-server"\n'
            f"{_host_line(project.name) if store is not None and hosts else host}"
            f"scope = {q(project.scope)}\n"
            f"argv = {q([str(a) for a in project.argv])}\n"
            'approval_policy = "on-request"\n'
            'sandbox = "workspace-write"\n'
            f"features = {q(list(project.features))}\n\n"
            f"[projects.{project.name}.agent_options.env]\n{env}\n\n"
            f"[projects.{project.name}.auth.memory]\n"
            f"allow_from = {q(list(allow_from))}\n"
            f"approvers = {q(list(approvers))}\n"
            f"channels = {q([project.channel])}\n"
        )
        if project.expire_after_seconds is not None:
            parts.append(
                f"[projects.{project.name}.expiry]\n"
                f"after_seconds = {project.expire_after_seconds}\n"
            )
    path.write_text("\n".join(parts), encoding="utf-8")
    return path


# --- the process -------------------------------------------------------------------------------


class GatewayExited(AssertionError):
    """The gateway process ended while the test waited for it."""


@dataclass(kw_only=True)
class Shown:
    """One message as the gateway process's platform shows it now."""

    id: str
    conversation: ConversationRef
    text: str | None
    card: dict[str, Any] | None
    edits: int
    seq: int  # order of first appearance

    @classmethod
    def from_json(cls, raw: dict[str, Any], seq: int) -> Shown:
        return cls(
            id=raw["id"],
            conversation=ConversationRef(**raw["conversation"]),
            text=raw["text"],
            card=raw["card"],
            edits=raw["edits"],
            seq=seq,
        )


class GatewayProcess:
    def __init__(
        self,
        config: Path,
        log_path: Path,
        *,
        crash_at: str | None = None,
        handshake_timeout: float = 60.0,
        host: str | None = None,
        data_dir: Path | None = None,
        scripted_approvals: int | None = None,
    ) -> None:
        self.config = config
        self.scripted_approvals = scripted_approvals  # in-process scripted agents
        self.host = host  # run --host (None: this machine's name)
        self.data_dir = data_dir  # None: the config's
        self.log_path = log_path
        self.crash_at = crash_at
        self.handshake_timeout = handshake_timeout
        self.messages: dict[str, Shown] = {}
        # the same messages by conversation: a wait on one conversation reads only its own
        # (a bench of hundreds of conversations waits on each at once)
        self._by_conversation: dict[ConversationRef, dict[str, Shown]] = {}
        self.returncode: int | None = None
        self._proc: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None
        self._changed = asyncio.Condition()
        self._replies: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._numbers = itertools.count(1)
        self._seq = itertools.count()
        self._ready = False
        self._eof = False
        self.leases_lost = 0  # how often the host lost its lease (a shared ledger)
        self.starts_over = 0  # how often it started over after that

    @property
    def pid(self) -> int:
        assert self._proc is not None
        return self._proc.pid

    # --- lifetime ---------------------------------------------------------------------------

    async def start(self) -> None:
        env = {k: v for k, v in os.environ.items() if k != "AGENT_GATEWAY_CRASH_AT"}
        if self.crash_at is not None:
            env["AGENT_GATEWAY_CRASH_AT"] = self.crash_at
        with self.log_path.open("ab") as log:
            self._proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "tests.harness.gateway_proc",
                "--config",
                str(self.config),
                "--handshake-timeout",
                str(self.handshake_timeout),
                *(["--host", self.host] if self.host is not None else []),
                *(["--data-dir", str(self.data_dir)] if self.data_dir is not None else []),
                *(
                    ["--scripted-approvals", str(self.scripted_approvals)]
                    if self.scripted_approvals is not None
                    else []
                ),
                cwd=ROOT,
                env=env,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=log,
                start_new_session=True,  # its own group: a signal meant for pytest spares it
                limit=_STDOUT_LIMIT,
            )
        self._reader = asyncio.get_running_loop().create_task(self._read())
        await self.wait_for(lambda: self._ready or None, what="the gateway to be ready")

    def kill(self) -> None:
        """SIGKILL the gateway process only: its agents, in their own groups, live on."""
        assert self._proc is not None
        with contextlib.suppress(ProcessLookupError):
            os.kill(self._proc.pid, signal.SIGKILL)

    def freeze(self) -> None:
        """SIGSTOP the gateway process (frozen, not dead: its sockets stay open)."""
        assert self._proc is not None
        os.kill(self._proc.pid, signal.SIGSTOP)

    def thaw(self) -> None:
        """SIGCONT: a frozen gateway process runs on from where it stopped."""
        assert self._proc is not None
        os.kill(self._proc.pid, signal.SIGCONT)

    async def started_over(self, times: int = 1) -> None:
        """Wait until the host lost its lease and started over ``times`` times in all."""
        await self.wait_for(
            lambda: self.starts_over >= times or None, what=f"start over number {times}"
        )

    async def exited(self, deadline: float = DEADLINE) -> int:
        """Wait for the process to end; its exit code (negative: the signal)."""
        assert self._proc is not None
        async with asyncio.timeout(deadline):
            code = await self._proc.wait()
            if self._reader is not None:
                await self._reader
        self.returncode = code
        return code

    async def stop(self) -> int:
        """Shut the gateway down cleanly ("quit"), as at the end of a run; its exit code."""
        assert self._proc is not None
        if self._proc.returncode is None and not self._eof:
            self._send({"cmd": "quit"})
        try:
            return await self.exited()
        except TimeoutError:
            self.kill()
            await self.exited()
            raise AssertionError(
                "the gateway did not shut down in time\n" + self.log_tail()
            ) from None

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    # --- commands ---------------------------------------------------------------------------

    def _send(self, command: dict[str, Any]) -> int:
        assert self._proc is not None and self._proc.stdin is not None
        number = next(self._numbers)
        self._proc.stdin.write((json.dumps({"n": number, **command}) + "\n").encode())
        return number

    async def command(self, name: str, **fields: Any) -> dict[str, Any]:
        """Send a command and wait for its reply (a failed command raises here)."""
        number = self._send({"cmd": name, **fields})
        future = self._replies.setdefault(number, asyncio.get_running_loop().create_future())
        reply = await self.wait_for(
            lambda: future.result() if future.done() else None, what=f"the reply to {name}"
        )
        if "error" in reply:
            raise AssertionError(f"{name} failed in the gateway: {reply['error']}")
        return reply

    def send_only(self, name: str, **fields: Any) -> None:
        """Send a command whose reply will never come (the gateway is armed to crash)."""
        self._send({"cmd": name, **fields})

    async def say(
        self, conversation: ConversationRef, user: str, text: str, *, message_id: str | None = None
    ) -> None:
        fields: dict[str, Any] = {
            "conversation": conv_json(conversation),
            "user": user,
            "text": text,
        }
        if message_id is not None:
            fields["message_id"] = message_id
        await self.command("say", **fields)

    async def click(self, conversation: ConversationRef, user: str, token: str) -> dict[str, Any]:
        return await self.command(
            "click", conversation=conv_json(conversation), user=user, token=token
        )

    async def until_cards_recorded(self, copies: int = 1) -> list[dict[str, Any]]:
        """Wait until the gateway's ledger records every card copy of its open requests as
        sent (at least ``copies`` of them), with the message ref that a later edit needs.
        (A process killed between a platform's send and that record leaves a copy that the
        next process cannot edit: it sends a new card instead.) Each look is a command
        answered by the gateway; returns the copies."""
        async with asyncio.timeout(DEADLINE):
            while True:
                found = (await self.command("copies"))["copies"]
                if len(found) >= copies and all(c["state"] in ("sent", "edited") for c in found):
                    return list(found)

    async def until_turn_saved(self, fragment: str) -> list[str]:
        """Wait until the ledger holds a running turn whose saved text says ``fragment``, and
        the message that shows it (the timeline is saved every second: what a process killed
        now leaves for the next one). Each look is a command answered by the gateway; returns
        the ids of the turn's messages."""
        async with asyncio.timeout(DEADLINE):
            while True:
                for turn in (await self.command("running"))["turns"]:
                    if fragment in turn["text"] and turn["messages"]:
                        return list(turn["messages"])

    # --- what the platform shows ----------------------------------------------------------

    def shown(self, conversation: ConversationRef | None = None) -> list[Shown]:
        if conversation is None:
            found = list(self.messages.values())
        else:
            found = list(self._by_conversation.get(conversation, {}).values())
        return sorted(found, key=lambda m: m.seq)

    def texts(self, conversation: ConversationRef | None = None) -> list[str]:
        return [m.text for m in self.shown(conversation) if m.text is not None]

    def cards(self, conversation: ConversationRef | None = None) -> list[dict[str, Any]]:
        return [m.card for m in self.shown(conversation) if m.card is not None]

    async def wait_for(
        self, probe: Callable[[], T | None], *, what: str = "", deadline: float = DEADLINE
    ) -> T:
        """Wait until ``probe()`` returns something (not None, not False)."""
        try:
            async with asyncio.timeout(deadline), self._changed:
                while True:
                    value = probe()
                    if value is not None and value is not False:
                        return value
                    if self._eof:
                        raise GatewayExited(
                            f"the gateway process ended (code {self._proc_code()}) while "
                            f"waiting for {what or probe}\n{self._report()}"
                        )
                    await self._changed.wait()
        except TimeoutError:
            raise AssertionError(
                f"timed out waiting for {what or probe}\n{self._report()}"
            ) from None

    async def card_where(
        self, probe: Callable[[dict[str, Any]], bool], conversation: ConversationRef
    ) -> Shown:
        def find() -> Shown | None:
            return next(
                (m for m in self.shown(conversation) if m.card is not None and probe(m.card)),
                None,
            )

        return await self.wait_for(find, what=f"a card in {conversation.channel}")

    async def text_where(self, probe: Callable[[str], bool], conversation: ConversationRef) -> str:
        def find() -> str | None:
            return next((t for t in self.texts(conversation) if probe(t)), None)

        return await self.wait_for(find, what=f"a text in {conversation.channel}")

    async def text_containing(self, fragment: str, conversation: ConversationRef) -> str:
        def find() -> str | None:
            return next((t for t in self.texts(conversation) if fragment in t), None)

        return await self.wait_for(find, what=f"a text with {fragment!r} in {conversation.channel}")

    # --- internals ----------------------------------------------------------------------------

    def _proc_code(self) -> int | None:
        return None if self._proc is None else self._proc.returncode

    def _report(self) -> str:
        shown = "\n".join(
            f"  [{m.conversation.channel}] "
            + (f"card {m.card['title']!r}: {m.card['status_line']}" if m.card else repr(m.text))
            for m in self.shown()
        )
        return f"shown:\n{shown}\nlog tail:\n{self.log_tail()}"

    async def _read(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        try:
            while line := await self._proc.stdout.readline():
                try:
                    obj = json.loads(line)
                except ValueError:
                    continue  # not ours (a stray print)
                async with self._changed:
                    self._take(obj)
                    self._changed.notify_all()
        finally:
            await self._proc.wait()
            async with self._changed:
                self._eof = True
                self._changed.notify_all()

    def _take(self, obj: dict[str, Any]) -> None:
        if "reply" in obj:
            future = self._replies.setdefault(
                obj["reply"], asyncio.get_running_loop().create_future()
            )
            if not future.done():
                future.set_result(obj)
        elif obj.get("event") == "ready":
            self._ready = True
        elif obj.get("event") == "lease_lost":
            self.leases_lost += 1
        elif obj.get("event") == "started_over":
            self.starts_over += 1
        elif obj.get("event") == "rendered":
            raw = obj["message"]
            before = self.messages.get(raw["id"])
            seq = before.seq if before is not None else next(self._seq)
            shown = self.messages[raw["id"]] = Shown.from_json(raw, seq)
            self._by_conversation.setdefault(shown.conversation, {})[shown.id] = shown


def conv_json(conversation: ConversationRef) -> dict[str, Any]:
    return {
        "platform": conversation.platform,
        "space": conversation.space,
        "channel": conversation.channel,
        "thread": conversation.thread,
    }


def _next_log(log_dir: Path) -> Path:
    """``gateway-1.log``, ``gateway-2.log``...: one log per gateway process of a test."""
    log_dir.mkdir(parents=True, exist_ok=True)
    return log_dir / f"gateway-{len(list(log_dir.glob('gateway-*.log'))) + 1}.log"


@asynccontextmanager
async def gateway_process(
    config: Path,
    log_dir: Path,
    *,
    crash_at: str | None = None,
    handshake_timeout: float = 60.0,
    host: str | None = None,
    data_dir: Path | None = None,
    scripted_approvals: int | None = None,
) -> AsyncIterator[GatewayProcess]:
    """A started gateway process; left running at the end it is shut down cleanly.
    ``host`` and ``data_dir``: one of several hosts sharing the config's PostgreSQL ledger;
    ``scripted_approvals``: in-process scripted agents (see gateway_proc) instead of the
    config's agent processes."""
    gw = GatewayProcess(
        config,
        _next_log(log_dir),
        crash_at=crash_at,
        handshake_timeout=handshake_timeout,
        host=host,
        data_dir=data_dir,
        scripted_approvals=scripted_approvals,
    )
    await gw.start()
    try:
        yield gw
    finally:
        if gw.returncode is None and gw._proc is not None and gw._proc.returncode is None:
            try:
                await gw.stop()
            except BaseException:
                gw.kill()
                raise


# --- processes, seen from outside --------------------------------------------------------------


def process_alive(pid: int, start_time: int | None) -> bool:
    """Whether the process ``pid`` started at ``start_time`` still runs (a zombie does not)."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    fields = raw[raw.rfind(b")") + 2 :].split()
    state, started = fields[0].decode(), int(fields[19])
    if start_time is not None and started != start_time:
        return False  # the pid names another process now
    return state not in ("Z", "X")


# data dir -> the PostgreSQL ledger write_config gave the gateway of that data dir
_POSTGRESQL: dict[Path, PgTarget] = {}


def open_ledger(data_dir: Path) -> contextlib.AbstractAsyncContextManager[Store]:
    """The ledger of the gateway whose config names ``data_dir``: SQLite in it, or the
    PostgreSQL database its config (:func:`write_config`) names."""
    return Store.open(data_dir, postgresql=_POSTGRESQL.get(data_dir))


async def end_leftover_agents(data_dir: Path) -> None:
    """Clean-up after a test that left a gateway dead: end the agents its ledger says live."""
    if data_dir not in _POSTGRESQL and not (data_dir / "ledger.sqlite3").exists():
        return
    async with open_ledger(data_dir) as store:
        epochs = await store.sessions.live_epochs()
    for epoch in epochs:
        if epoch.pid is not None and epoch.process_start_time is not None:
            await end_leftover_process_group(
                epoch.pid, epoch.pgid or epoch.pid, int(epoch.process_start_time), 2.0
            )
