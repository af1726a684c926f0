"""Starting a project's agent from its configuration: the core's AgentLauncher.

The core (gateway/) never imports an adapter; ``agent-gateway run`` hands it this launcher,
which picks the codec for the project's agent, builds its argv and its environment (an
allowlist plus the project's ``env`` table, never the gateway's whole environment), and
starts it through the one stdio runtime.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import tempfile
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager

from adapters.acp import AcpCodec
from adapters.claude_code import ClaudeCodeCodec
from adapters.claude_launch import ClaudeLaunch
from adapters.codec import AgentCodec
from adapters.codex_app_server import CodexAppServerCodec
from adapters.codex_exec_process import CodexExecSettings
from adapters.codex_exec_session import CodexExecSession
from adapters.codex_launch import codex_app_server_argv, config_args
from adapters.jsonrpc import ErrorResponse, JsonObject, JsonRpcPeer, Response
from adapters.mcp_config import (
    acp_mcp_servers,
    claude_allowed_tools,
    claude_mcp_config,
    codex_exec_overrides,
    codex_mcp_servers,
    opencode_added_server,
    opencode_config_content,
    opencode_other_sessions_tools,
    opencode_tool_name,
)
from adapters.opencode import basic_auth
from adapters.process_group import end_leftover_process_group
from adapters.proven_versions import runs_codex_acp
from adapters.runtime import AgentRuntime
from adapters.stdio import DEFAULT_ENV_ALLOWLIST, AgentProcess, ProcessSpec, build_agent_env
from gateway.config.model import ProjectConfig, read_password
from gateway.domain import AgentKind
from gateway.errors import AgentStartError, ConfigError
from gateway.events import AgentCommand, AgentEvent, Capabilities, SessionStarted
from gateway.sessions.agents import GatewayMcpServer, RunningAgent

__all__ = [
    "ConfiguredLauncher",
    "RuntimeAgent",
    "probe_acp",
    "probe_attached",
    "probe_cli_version",
    "probe_version",
]


class RuntimeAgent:
    """An :class:`AgentRuntime` as the core sees a running agent."""

    def __init__(self, runtime: AgentRuntime) -> None:
        self._runtime = runtime

    @property
    def pid(self) -> int | None:
        return self._runtime.pid

    @property
    def pgid(self) -> int | None:
        return self._runtime.pgid

    @property
    def start_time(self) -> int | None:
        return self._runtime.start_time

    @property
    def capabilities(self) -> Capabilities:
        return self._runtime.codec.capabilities

    @property
    def started(self) -> SessionStarted:
        assert self._runtime.session is not None  # the handshake is over
        return self._runtime.session

    async def send(self, command: AgentCommand) -> None:
        await self._runtime.send(command)

    def events(self) -> AsyncIterator[AgentEvent]:
        return self._runtime.events()

    async def stop(self) -> None:
        await self._runtime.stop()


@contextlib.contextmanager
def _private_json(value: JsonObject) -> Iterator[str]:
    """A 0600 file holding ``value`` for as long as the agent runs (it holds a token)."""
    fd, path = tempfile.mkstemp(prefix="agent-gateway-mcp-", suffix=".json")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            json.dump(value, file)
        yield path
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


class ConfiguredLauncher:
    def __init__(
        self,
        *,
        env_source: Mapping[str, str] | None = None,
        handshake_timeout: float = 60.0,
        stop_grace_seconds: float = 5.0,
    ) -> None:
        self._env_source = os.environ if env_source is None else env_source
        self._handshake_timeout = handshake_timeout
        self._stop_grace = stop_grace_seconds

    def codec_and_argv(
        self,
        project: ProjectConfig,
        *,
        resume_native_id: str | None,
        mcp_server: GatewayMcpServer | None = None,
        mcp_config_file: str | None = None,
    ) -> tuple[AgentCodec, list[str]]:
        options = project.agent_options
        if project.agent is AgentKind.CODEX_APP_SERVER:
            codec = CodexAppServerCodec(
                mcp_servers=None if mcp_server is None else codex_mcp_servers(mcp_server),
                cwd=str(project.work_dir),
                approval_policy=options.approval_policy.value,
                sandbox=options.sandbox.value,
                model=options.model,
                resume_thread_id=resume_native_id,
                collaboration_mode=(
                    options.collaboration_mode.value if options.collaboration_mode else None
                ),
                # turn/start's collaborationMode is EXPERIMENTAL in 0.171 (schema)
                experimental_api=True,
            )
            return codec, codex_app_server_argv(project.argv(), enable=options.features)
        if project.agent is AgentKind.CLAUDE_CODE:
            launch = ClaudeLaunch(
                command=project.argv(),
                permission_mode=options.permission_mode.value,
                allow_dangerous=options.allow_dangerous,
                model=options.model,
                allowed_tools=(
                    options.allowed_tools
                    if mcp_server is None or mcp_config_file is None
                    else (*options.allowed_tools, *claude_allowed_tools(mcp_server))
                ),
                disallowed_tools=options.disallowed_tools,
                extra_args=options.extra_args,
                mcp_config=mcp_config_file,
            )
            if resume_native_id is not None:
                launch = launch.resumed(resume_native_id)
            return ClaudeCodeCodec(launch, cwd=str(project.work_dir)), launch.argv()
        if project.agent is AgentKind.ACP:
            argv = list(project.argv())
            mcp_servers = None
            if mcp_server is not None and runs_codex_acp(project):
                # Codex's own config, pre-approved; an mcpServers entry of the same name
                # would replace it with one that asks (adapters/mcp_config.py)
                argv += config_args(codex_exec_overrides(mcp_server)[0])
            elif mcp_server is not None:
                mcp_servers = acp_mcp_servers(mcp_server)
            codec_acp = AcpCodec(
                cwd=str(project.work_dir),
                resume_session_id=resume_native_id,
                mcp_servers=mcp_servers,
            )
            return codec_acp, argv
        raise ConfigError(f"agent {project.agent.value} cannot be started by this gateway yet")

    def _env(self, project: ProjectConfig) -> dict[str, str]:
        options = project.agent_options
        return build_agent_env(
            (*DEFAULT_ENV_ALLOWLIST, *options.env_allowlist),
            options.agent_env(),
            source=self._env_source,
        )

    def launch(
        self,
        project: ProjectConfig,
        *,
        resume_native_id: str | None,
        mcp_server: GatewayMcpServer | None = None,
    ) -> AbstractAsyncContextManager[RunningAgent]:
        if project.agent is AgentKind.CODEX_EXEC:
            return self._launch_exec(
                project, resume_native_id=resume_native_id, mcp_server=mcp_server
            )
        if project.agent is AgentKind.OPENCODE:
            return self._launch_opencode(
                project, resume_native_id=resume_native_id, mcp_server=mcp_server
            )
        return self._launch_runtime(
            project, resume_native_id=resume_native_id, mcp_server=mcp_server
        )

    @asynccontextmanager
    async def _launch_exec(
        self,
        project: ProjectConfig,
        *,
        resume_native_id: str | None,
        mcp_server: GatewayMcpServer | None = None,
    ) -> AsyncIterator[RunningAgent]:
        options = project.agent_options
        env = self._env(project)
        overrides: dict[str, str | int | list[str]] = {}
        if mcp_server is not None:
            overrides, server_env = codex_exec_overrides(mcp_server)
            env.update(server_env)
        try:
            settings = CodexExecSettings(
                command=project.argv(),
                cwd=str(project.work_dir),
                sandbox=options.sandbox.value,
                model=options.model,
                enable=options.features,
                config=overrides or None,
            )
        except ConfigError as exc:
            raise AgentStartError(str(exc)) from exc
        async with CodexExecSession(
            settings,
            env=env,
            thread_id=resume_native_id,
            stop_grace_seconds=self._stop_grace,
        ) as session:
            yield session

    @asynccontextmanager
    async def _launch_opencode(
        self,
        project: ProjectConfig,
        *,
        resume_native_id: str | None,
        mcp_server: GatewayMcpServer | None = None,
    ) -> AsyncIterator[RunningAgent]:
        # imported here: `agent-gateway check` (probe_version) must not load aiohttp
        from adapters.opencode_runtime import OpenCodeAgent, OpenCodeSettings

        options = project.agent_options
        env = self._env(project)
        allowed: tuple[str, ...] = ()
        denied: tuple[str, ...] = ()
        added: JsonObject | None = None
        if mcp_server is not None and options.url is None:  # a server we start ourselves
            # merged over its own config files (the project's opencode.json stays in force)
            env["OPENCODE_CONFIG_CONTENT"] = json.dumps(opencode_config_content(mcp_server))
            allowed = tuple(opencode_tool_name(mcp_server, tool) for tool in mcp_server.tools)
        elif mcp_server is not None:  # attached: given at runtime, under this session's name
            named, added = opencode_added_server(mcp_server)
            allowed = tuple(opencode_tool_name(named, tool) for tool in named.tools)
            denied = opencode_other_sessions_tools(mcp_server)
        settings = OpenCodeSettings(
            command=project.argv(),
            cwd=project.work_dir,
            env=env,
            allowed_tools=allowed,
            denied_tools=denied,
            added_mcp=added,
            resume_session_id=resume_native_id,
            handshake_timeout=self._handshake_timeout,
            stop_grace_seconds=self._stop_grace,
            attach_url=options.url,
        )
        password = None
        if options.password_file is not None:  # attached: the server's own password
            try:
                password = read_password(options.password_file)
            except ConfigError as exc:
                raise AgentStartError(str(exc)) from exc
        async with OpenCodeAgent(settings, password=password) as agent:
            yield agent

    async def still_asked(self, project: ProjectConfig, native_session_id: str) -> frozenset[str]:
        """The native keys an attached project's server still lists for the session (what a
        restart may leave pending); AgentError when the server cannot be asked."""
        from adapters.opencode_runtime import still_asked

        options = project.agent_options
        if options.url is None or options.password_file is None:
            raise AgentStartError(f"agent {project.agent} is not attached to a server")
        try:
            password = read_password(options.password_file)
        except ConfigError as exc:
            raise AgentStartError(str(exc)) from exc
        return await still_asked(options.url, password, native_session_id)

    @asynccontextmanager
    async def _launch_runtime(
        self,
        project: ProjectConfig,
        *,
        resume_native_id: str | None,
        mcp_server: GatewayMcpServer | None = None,
    ) -> AsyncIterator[RunningAgent]:
        with contextlib.ExitStack() as files:
            config_file = None
            if mcp_server is not None and project.agent is AgentKind.CLAUDE_CODE:
                config_file = files.enter_context(_private_json(claude_mcp_config(mcp_server)))
            try:
                codec, argv = self.codec_and_argv(
                    project,
                    resume_native_id=resume_native_id,
                    mcp_server=mcp_server,
                    mcp_config_file=config_file,
                )
            except ConfigError as exc:
                raise AgentStartError(str(exc)) from exc
            env = self._env(project)
            if (
                mcp_server is not None
                and project.agent is AgentKind.ACP
                and runs_codex_acp(project)
            ):
                env.update(codex_exec_overrides(mcp_server)[1])  # named in its env_vars
            spec = ProcessSpec(
                argv=argv,
                cwd=project.work_dir,
                env=env,
                stop_grace_seconds=self._stop_grace,
            )
            async with AgentRuntime(
                spec, codec, handshake_timeout=self._handshake_timeout
            ) as runtime:
                yield RuntimeAgent(runtime)

    async def end_leftover(self, *, pid: int, pgid: int | None, start_time: int | None) -> str:
        if start_time is None:
            # without a start time the pid may name another process now: never signal it
            return "not signalled: no start time recorded"
        outcome = await end_leftover_process_group(
            pid, pgid if pgid is not None else pid, start_time, self._stop_grace
        )
        return outcome.value


async def probe_version(project: ProjectConfig, *, deadline: float = 20.0) -> str:
    """What ``agent-gateway check`` prints of the agent: :func:`probe_acp` for an ACP agent,
    :func:`probe_attached` for a server the gateway attaches to, else
    :func:`probe_cli_version`."""
    if project.attached:
        return await probe_attached(project, deadline=deadline)
    if project.agent is AgentKind.ACP:
        return await probe_acp(project, deadline=deadline)
    return await probe_cli_version(project, deadline=deadline)


async def probe_attached(project: ProjectConfig, *, deadline: float = 20.0) -> str:
    """An attached OpenCode server's ``GET /global/health`` with its password (the standard
    library's HTTP client in a thread: ``check`` loads no aiohttp). Nothing is started."""
    options = project.agent_options
    assert options.url is not None and options.password_file is not None
    url = options.url.rstrip("/") + "/global/health"
    try:
        password = read_password(options.password_file)
    except ConfigError as exc:
        raise AgentStartError(str(exc)) from exc
    request = urllib.request.Request(url, headers={"Authorization": basic_auth(password)})

    def ask() -> object:
        with urllib.request.urlopen(request, timeout=deadline) as response:
            return json.loads(response.read())

    try:
        health = await asyncio.to_thread(ask)
    except urllib.error.HTTPError as exc:
        raise AgentStartError(f"{url} answered HTTP {exc.code}") from exc
    except (OSError, ValueError) as exc:
        raise AgentStartError(f"{url} could not be asked: {exc}") from exc
    version = health.get("version") if isinstance(health, dict) else None
    if not isinstance(health, dict) or health.get("healthy") is not True:
        raise AgentStartError(f"{url} did not say it is healthy: {str(health)[:200]}")
    return f"opencode {version} (attached, healthy)"


async def probe_acp(project: ProjectConfig, *, deadline: float = 20.0) -> str:
    """An ACP agent's answer to ``initialize`` (it has no ``--version``): its name and
    version, and whether it can load a session. The process group is stopped after."""
    env = build_agent_env(
        (*DEFAULT_ENV_ALLOWLIST, *project.agent_options.env_allowlist),
        project.agent_options.agent_env(),
    )
    spec = ProcessSpec(argv=list(project.argv()), cwd=project.work_dir, env=env)
    peer = JsonRpcPeer()
    peer.send_request("initialize", AcpCodec.initialize_params())
    name = project.argv()[0]
    async with AgentProcess.spawn(spec) as process:
        try:
            async with asyncio.timeout(deadline):
                for outgoing in peer.data_to_send():
                    await process.write_line(outgoing)
                while (answer := await process.read_line()) is not None:
                    incoming = peer.receive_line(answer)
                    if isinstance(incoming, ErrorResponse):
                        raise AgentStartError(
                            f"{name} refused initialize: {incoming.error.message}"
                        )
                    if isinstance(incoming, Response):
                        return _describe_acp(incoming.result)
        except TimeoutError:
            raise AgentStartError(
                f"{name} did not answer initialize within {deadline:g} s"
            ) from None
    raise AgentStartError(f"{name} ended without answering initialize")


def _describe_acp(result: object) -> str:
    if not isinstance(result, dict):
        return "ACP agent (initialize answered without a result object)"
    info = result.get("agentInfo") if isinstance(result.get("agentInfo"), dict) else {}
    assert isinstance(info, dict)
    label = " ".join(str(info[key]) for key in ("name", "version") if info.get(key)) or "ACP agent"
    version = result.get("protocolVersion")
    capabilities = result.get("agentCapabilities")
    loads = isinstance(capabilities, dict) and capabilities.get("loadSession") is True
    return f"{label} (ACP v{version}{', loads sessions' if loads else ''})"


async def probe_cli_version(project: ProjectConfig, *, deadline: float = 20.0) -> str:
    """``<agent> --version`` through the stdio runtime: what ``agent-gateway check`` prints.

    Raises AgentStartError if it cannot start, fails, or has not answered within
    ``deadline`` seconds (it is then stopped with its process group).
    """
    env = build_agent_env(
        (*DEFAULT_ENV_ALLOWLIST, *project.agent_options.env_allowlist),
        project.agent_options.agent_env(),
    )
    spec = ProcessSpec(argv=[*project.argv(), "--version"], cwd=project.work_dir, env=env)
    async with AgentProcess.spawn(spec) as process:
        lines: list[str] = []
        try:
            async with asyncio.timeout(deadline):
                while (line := await process.read_line()) is not None:
                    lines.append(line.decode(errors="replace"))
                status = await process.wait()
        except TimeoutError:
            raise AgentStartError(
                f"{project.argv()[0]} --version did not answer within {deadline:g} s"
            ) from None
    if status.code != 0:
        raise AgentStartError(f"{project.argv()[0]} --version failed: {status.describe()}")
    return " ".join(lines).strip() or "(no version printed)"
