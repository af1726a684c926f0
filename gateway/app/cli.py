"""``agent-gateway``: run, check, init, ledger, audit, prune, demo, service, slack-manifest,
discord-invite (``python -m gateway`` is the same program)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import re
import shutil
import signal
import socket
import sys
import tomllib
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gateway import __version__
from gateway.app.init_config import AGENTS as INIT_AGENTS
from gateway.app.init_config import PLATFORMS as INIT_PLATFORMS
from gateway.app.init_config import (
    InitChoice,
    config_text,
    default_config_path,
    default_data_dir,
    next_steps,
)
from gateway.app.init_config import write as write_config
from gateway.config.model import (
    DEFAULT_DATA_DIR,
    HOST_PATTERN,
    Config,
    LogLevel,
    ProjectConfig,
    check_config,
)
from gateway.config.platform_tables import PlatformConfig
from gateway.errors import ConfigError, GatewayError
from gateway.interactions.machine import Interaction
from gateway.platform import Platform, SharesRates
from platforms.registry import PLATFORMS, load_config

if TYPE_CHECKING:
    from gateway.config.ledger_url import PgTarget
    from gateway.sessions.engine import Gateway

__all__ = ["SDK_LOGGERS", "configure_logging", "main"]

log = logging.getLogger("agent-gateway")
_LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_LEVELS = {
    LogLevel.DEBUG: logging.DEBUG,
    LogLevel.INFO: logging.INFO,
    LogLevel.WARNING: logging.WARNING,
    LogLevel.ERROR: logging.ERROR,
}
# SDK loggers that write secrets below WARNING, kept at WARNING (or above) at any log_level:
# httpx logs every request's URL, and a Telegram URL carries the bot token; PTB's debug lines
# carry that URL too, and every update it receives (secret answers typed in a DM included);
# httpcore writes a debug line per request (noise); psycopg its connection attempts (the
# ledger on PostgreSQL: its target, never the password, but kept quiet all the same);
# slack_sdk and slack_bolt write every Socket Mode envelope, modal answers included;
# discord.py logs gateway events and request bodies (modal answers, tokens) at DEBUG
SDK_LOGGERS = (
    "httpx",
    "httpcore",
    "telegram",
    "psycopg",
    "slack_sdk",
    "slack_bolt",
    "discord",
)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agent-gateway",
        description="Drive local coding agents from chat; answer their approvals with buttons.",
    )
    parser.add_argument("--version", action="version", version=f"agent-gateway {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="run the gateway")
    run.add_argument("--config", type=Path, required=True)
    run.add_argument("--host", type=_host_name, default=None, help=_HOST_HELP)
    check = commands.add_parser("check", help="validate a config and probe each agent binary")
    check.add_argument("--config", type=Path, required=True)
    check.add_argument("--host", type=_host_name, default=None, help=_HOST_HELP)
    check.add_argument(
        "--probe-timeout",
        type=float,
        default=20.0,
        help="seconds each agent gets to answer --version (default 20)",
    )
    init = commands.add_parser(
        "init", help="write a first config for one platform and one agent (never overwrites)"
    )
    init.add_argument("--config", type=Path, help="where to write it (default: %(default)s)")
    init.add_argument("--platform", choices=INIT_PLATFORMS)
    init.add_argument("--agent", choices=tuple(INIT_AGENTS))
    init.add_argument("--work-dir", type=Path, help="the folder the agent works in (default: .)")
    init.add_argument("--data-dir", type=Path, help="ledger and key (default: %(default)s)")
    init.add_argument("--user-id", help="your id on the platform: allow_from and approvers")
    init.add_argument("--project", default="main", help="the project's name (default: main)")
    init.set_defaults(config=default_config_path(), data_dir=default_data_dir())
    commands.add_parser(
        "mcp",
        help="the MCP server an agent starts for send_file (the gateway configures it; "
        "a person never runs it)",
    )
    ledger = commands.add_parser("ledger", help="pending and recent interactions")
    where = ledger.add_mutually_exclusive_group()
    where.add_argument("--config", type=Path)
    where.add_argument("--data-dir", type=Path)
    ledger.add_argument("--limit", type=int, default=20)
    audit = commands.add_parser(
        "audit", help="export every interaction since a date (votes, decisions, escalations)"
    )
    where = audit.add_mutually_exclusive_group()
    where.add_argument("--config", type=Path)
    where.add_argument("--data-dir", type=Path)
    audit.add_argument("--since", required=True, help="a date or time: 2026-12-01[T09:00]")
    audit.add_argument("--project", help="only this project's interactions")
    audit.add_argument("--format", choices=("jsonl", "csv"), default="jsonl")
    prune = commands.add_parser(
        "prune", help="prune the ledger as [gateway.retention] says (--dry-run: say what would go)"
    )
    prune.add_argument("--config", type=Path, required=True)
    prune.add_argument(
        "--dry-run", action="store_true", help="count what would be pruned; change nothing"
    )
    demo = commands.add_parser(
        "demo", help="the web console with a built-in demo agent: no account, no API key"
    )
    demo.add_argument(
        "--data-dir", type=Path, help="ledger and key (default ~/.local/share/agent-gateway/demo)"
    )
    demo.add_argument("--host", default="127.0.0.1", help="the console's address")
    demo.add_argument("--port", type=int, default=0, help="the console's port (0: a free one)")
    demo.add_argument("--pace", type=float, default=1.0, help="demo agent speed (0: no pauses)")
    demo.add_argument(
        "--public-url",
        help="the https address of a TLS proxy in front of the console (to show it to others)",
    )
    manifest = commands.add_parser(
        "slack-manifest", help="print the Slack app manifest to paste into api.slack.com/apps"
    )
    manifest.add_argument("--name", default="Agent Gateway", help="the app's name in Slack")
    manifest.add_argument("--command", dest="slash", default="/agent", help="its slash command")
    manifest.add_argument(
        "--request-url", help="HTTP mode: the public https address Slack posts to"
    )
    service = commands.add_parser(
        "service", help="print (or --write) a systemd unit that keeps the gateway running"
    )
    service.add_argument("--config", type=Path, required=True)
    service.add_argument(
        "--write", action="store_true", help="write the unit and an empty environment file"
    )
    service.add_argument(
        "--system-user",
        metavar="USER",
        help="a system-wide unit (/etc/systemd/system) that runs as this dedicated user",
    )
    service.add_argument(
        "--env-file", type=Path, help="the tokens' file (default: beside the config, 'env')"
    )
    move = commands.add_parser(
        "move-ledger",
        help="copy the SQLite ledger of the config's data dir into its (empty) PostgreSQL store",
    )
    move.add_argument("--config", type=Path, required=True)
    url = commands.add_parser(
        "console-url", help="print the web console's address with its access token"
    )
    url.add_argument("--config", type=Path, required=True)
    rotate = commands.add_parser(
        "console-token", help="change the web console's access token (--rotate)"
    )
    rotate.add_argument("--config", type=Path, required=True)
    rotate.add_argument(
        "--rotate",
        action="store_true",
        required=True,
        help="a new token: the old one, and the browsers it opened, are logged out",
    )
    invite = commands.add_parser(
        "discord-invite",
        help="print the URL that adds the Discord bot to a server, with the permissions it needs",
    )
    whose = invite.add_mutually_exclusive_group(required=True)
    whose.add_argument(
        "--config",
        type=Path,
        help="take application_id from [platforms.discord] (absent: ask Discord with the token)",
    )
    whose.add_argument("--application-id", help="the application's id (Developer Portal)")
    return parser


_HOST_HELP = (
    "this machine's name, as projects' host keys name it (default: its hostname); "
    "with several hosts on one PostgreSQL store it runs only its own projects"
)


def _host_name(text: str) -> str:
    if re.fullmatch(HOST_PATTERN, text) is None:
        raise argparse.ArgumentTypeError(f"{text!r}: letters, digits, '.', '_', '-' (up to 58)")
    return text


def this_host(named: str | None) -> str:
    """``--host``, or the machine's hostname."""
    return named if named is not None else socket.gethostname()


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    configure_logging(LogLevel.INFO)  # until a config says otherwise
    try:
        if args.command == "check":
            return asyncio.run(_check(args.config, this_host(args.host), args.probe_timeout))
        if args.command == "ledger":
            return asyncio.run(_ledger(args.config, args.data_dir, args.limit))
        if args.command == "audit":
            return asyncio.run(
                _audit(args.config, args.data_dir, args.since, args.project, args.format)
            )
        if args.command == "prune":
            return asyncio.run(_prune(args.config, dry_run=args.dry_run))
        if args.command == "init":
            return _init(args)
        if args.command == "mcp":
            from gateway.app.mcp_command import run_mcp_server

            return asyncio.run(run_mcp_server())
        if args.command == "slack-manifest":
            from platforms.slack.manifest import manifest_json

            print(manifest_json(name=args.name, command=args.slash, request_url=args.request_url))
            return 0
        if args.command == "service":
            return _service(args)
        if args.command == "move-ledger":
            return asyncio.run(_move_ledger(args.config))
        if args.command in ("console-url", "console-token"):
            return _console_token(args.config, rotate=args.command == "console-token")
        if args.command == "discord-invite":
            print(_discord_invite(args.config, args.application_id))
            return 0
        if args.command == "demo":
            from gateway.app.demo.command import DEFAULT_DEMO_DATA_DIR, run_demo

            data_dir = args.data_dir or DEFAULT_DEMO_DATA_DIR
            return asyncio.run(
                run_demo(
                    data_dir,
                    host=args.host,
                    port=args.port,
                    pace=args.pace,
                    public_url=args.public_url,
                )
            )
        return asyncio.run(_run(args.config, this_host(args.host)))
    except GatewayError as exc:
        print(f"agent-gateway: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


def _init(args: argparse.Namespace) -> int:
    """Write the first config; what is not given is asked in a terminal, else refused."""
    platform = args.platform or _ask("Platform", INIT_PLATFORMS)
    agent = args.agent or _ask("Agent", tuple(INIT_AGENTS))
    choice = InitChoice(
        platform=platform,
        agent=agent,
        work_dir=args.work_dir or Path.cwd(),
        data_dir=args.data_dir,
        user_id=args.user_id,
        project=args.project,
    )
    text = config_text(choice)
    write_config(args.config, text)
    print(next_steps(choice, args.config))
    return 0


def _service(args: argparse.Namespace) -> int:
    """Print the systemd unit, or write it and its environment file (never over a file)."""
    from gateway.app import service_unit as unit

    config = args.config.expanduser().resolve()
    text, raw = _raw_toml(config)
    grace = raw.get("gateway", {}).get("stop_grace_seconds", 5.0)
    installed = Path(sys.argv[0]).resolve() if Path(sys.argv[0]).name == "agent-gateway" else None
    argv = (str(installed),) if installed is not None else (sys.executable, "-m", "gateway")
    here = str(Path(sys.executable).parent)
    path = os.pathsep.join(dict.fromkeys([here, *os.environ.get("PATH", "").split(os.pathsep)]))
    choice = unit.UnitChoice(
        argv=argv,
        config=config,
        env_file=(args.env_file or config.parent / "env").expanduser().resolve(),
        path=path,
        stop_timeout=unit.stop_timeout(float(grace)),
        system_user=args.system_user,
    )
    written = unit.unit_text(choice)
    if not args.write:
        print(written, end="")
        return 0
    if args.system_user is not None:
        target = Path("/etc/systemd/system") / unit.UNIT_NAME
    else:
        base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
        target = Path(base) / "systemd" / "user" / unit.UNIT_NAME
    if not unit.write_new(target, written, mode=0o644):
        raise ConfigError(f"{target} exists: not overwritten (remove it to write it again)")
    env_text = unit.env_file_text(unit.referenced_variables(text))
    made = unit.write_new(choice.env_file, env_text, mode=0o600)
    print(f"Wrote {target}" + (f" and {choice.env_file}" if made else "") + ". Next:")
    print(unit.next_steps(choice, target))
    return 0


async def _move_ledger(path: Path) -> int:
    """The SQLite ledger in the config's data dir, copied into the PostgreSQL ledger its
    ``store`` names (docs/operations.md, "Moving to PostgreSQL")."""
    config = _load_config(path)
    target = config.gateway.ledger_target()
    if target is None:
        raise ConfigError(
            "[gateway] store: set it to the new PostgreSQL ledger's postgresql:// URL first "
            "(the SQLite ledger is read from data_dir)"
        )
    from gateway.store.ledger_move import move_to_postgresql

    copied = await move_to_postgresql(config.gateway.data_dir, target)
    rows = sum(copied.values())
    print(f"Moved {rows} rows of {len(copied)} tables into {target}.")
    print(
        "The SQLite file is left as it was (a backup); the gateway now uses PostgreSQL: "
        "start it again."
    )
    return 0


def _raw_toml(path: Path) -> tuple[str, dict[str, Any]]:
    """The config file's text and its TOML, unvalidated and without resolving its
    ``${VARS}`` (for the commands that read one key of it: a shell that runs them need not
    hold the tokens the service's environment file has)."""
    try:
        text = path.read_text(encoding="utf-8")
        return text, tomllib.loads(text)
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: {exc}") from exc


def _data_dir_of(path: Path) -> Path:
    """The config's data dir, read from the file as it is (:func:`_raw_toml`)."""
    _, raw = _raw_toml(path)
    found = Path(str(raw.get("gateway", {}).get("data_dir", DEFAULT_DATA_DIR))).expanduser()
    return found if found.is_absolute() else path.resolve().parent / found


def _console_token(path: Path, *, rotate: bool) -> int:
    """``console-url``: the address the console last served on, with its token (asked for
    by the person who runs it: printed); ``console-token --rotate``: a new token, then the
    same."""
    from platforms.console.token_file import TokenFile

    tokens = TokenFile(_data_dir_of(path))
    token = tokens.rotate() if rotate else tokens.read()
    if token is None:
        raise ConfigError(f"no console token in {tokens.data_dir}: has the console run yet?")
    address = tokens.address()
    if rotate:
        print("New console token: the old one, and the browsers it opened, are logged out.")
    if address is None:
        print(f"(the console has not served yet) its token is in {tokens.path}")
        return 0
    print(f"{address}?token={token}")
    return 0


def _ask(what: str, choices: tuple[str, ...]) -> str:
    flag = f"--{what.lower()}"
    if not sys.stdin.isatty():
        raise ConfigError(f"{flag}: one of {', '.join(choices)}")
    answer = input(f"{what} ({', '.join(choices)}) [{choices[0]}]: ").strip() or choices[0]
    if answer not in choices:
        raise ConfigError(f"{flag}: one of {', '.join(choices)}")
    return answer


def _discord_invite(path: Path | None, application_id: str | None) -> str:
    """The invite URL; from a config, only its ``application_id`` is read (no token or
    environment needed), else the token's application is asked of Discord."""
    from platforms.discord.config import DiscordConfig, invite_url, written_application_id

    if path is not None:
        _, raw = _raw_toml(path)
        application_id = written_application_id(raw)
        if application_id is None:
            from platforms.discord.probe import asked_application_id

            settings = load_config(path).platforms.get("discord", DiscordConfig)
            if settings is None:  # pragma: no cover - written_application_id found the table
                raise ConfigError(f"{path} has no [platforms.discord] table")
            application_id = asyncio.run(asked_application_id(settings))
    if not application_id or not application_id.isdigit():
        raise ConfigError("--application-id: the application's id is a number (a snowflake)")
    return invite_url(application_id)


def configure_logging(level: LogLevel) -> None:
    """Log to stderr at ``level``; the :data:`SDK_LOGGERS` never below WARNING."""
    logging.basicConfig(format=_LOG_FORMAT)  # a handler once (none added if one is there)
    numeric = _LEVELS[level]
    logging.getLogger().setLevel(numeric)
    for name in SDK_LOGGERS:
        logging.getLogger(name).setLevel(max(numeric, logging.WARNING))


def _load_config(path: Path) -> Config:
    """Read the config and apply its ``[gateway] log_level``."""
    config = load_config(path)
    configure_logging(config.gateway.log_level)
    log.debug(
        "config %s: projects %s; platforms %s",
        path,
        ", ".join(config.projects),
        ", ".join(config.platforms.enabled()) or "none",
    )
    return config


async def _check(path: Path, host: str, probe_timeout: float) -> int:
    """Validate the config, then probe the agent of every project of this host (side by
    side): one line per project, OK or its problem, and one naming the projects skipped
    (another host's); non-zero if anything failed."""
    config = _load_config(path)
    problems = check_config(config, host)
    for problem in problems:
        print(problem)
    here = config.projects_on(host)
    skipped = [
        f"{name} (host {project.host})"
        for name, project in config.projects.items()
        if name not in here
    ]
    if skipped:
        print(f"host {host}: skipped, run elsewhere: {', '.join(skipped)}")
    async with asyncio.TaskGroup() as tasks:
        probes = {
            name: tasks.create_task(_probe(name, project, probe_timeout))
            for name, project in here.items()
            # else said once above; an attached server is probed at its url
            if project.attached or shutil.which(project.argv()[0]) is not None
        }
        asked = {
            name: tasks.create_task(_ask_platform(name, settings))
            for name, settings in config.platforms.items()
        }
    failed = 0
    for probe in probes.values():
        ok, lines = probe.result()
        failed += not ok
        for line in lines:
            print(line)
    for answer in asked.values():  # what each platform's servers say of its settings
        said = answer.result()
        if said is not None:
            ok, lines = said
            failed += 0 if ok else len(lines)
            for line in lines:
                print(line)
    count = len(problems) + failed
    print("config OK" if not count else f"{count} problem(s)")
    return 1 if count else 0


async def _probe(name: str, project: ProjectConfig, deadline: float) -> tuple[bool, list[str]]:
    """Whether the project's agent answered ``--version``, the line that says so, and a
    warning line for a version other than the one proven or a sandbox that cannot start
    (said, not failed)."""
    from adapters.launch import probe_version
    from adapters.proven_versions import sandbox_warning, version_warning

    via = project.agent_options.url if project.attached else " ".join(project.argv())
    agent = f"{name}: {project.agent.value} via {via}"
    try:
        version = await probe_version(project, deadline=deadline)
    except GatewayError as exc:
        return False, [f"{agent}: FAILED: {exc}"]
    warnings = [version_warning(project, version), sandbox_warning(project)]
    return True, [f"{agent}: {version}", *(f"{name}: warning: {w}" for w in warnings if w)]


async def _ask_platform(name: str, settings: PlatformConfig) -> tuple[bool, list[str]] | None:
    """What the platform's servers say of its settings (Slack: the tokens, scopes, Socket
    Mode); None for a platform that asks nothing. Never raises: a failure is a line."""
    try:
        PLATFORMS.require_sdk(name)
        return await PLATFORMS.probe(name, settings)
    except ConfigError as exc:  # its SDK is not installed: which extra to install
        return False, [str(exc)]
    except Exception as exc:
        return False, [f"{name}: could not be asked: {type(exc).__name__}: {exc}"]


def _platforms(config: Config) -> dict[str, Platform]:
    """The configured platforms, unstarted, built by the registry in its order; a platform's
    module (and its SDK) is imported only when it is configured. (The console prints its
    address with the access token once, to stderr, when it starts serving.)"""
    platforms = {
        name: PLATFORMS.build(name, settings)
        for name, settings in config.platforms.items()
        if PLATFORMS.runs(name)
    }
    if not platforms:
        runnable = ", ".join(name for name in PLATFORMS.names() if PLATFORMS.runs(name))
        configured = ", ".join(config.platforms.enabled())
        why = f"{configured}: for tests and embedding" if configured else "none configured"
        raise GatewayError(f"no chat platform to run ({why}); add one of: {runnable}")
    return platforms


@asynccontextmanager
async def shared_rates(config: Config, platforms: Mapping[str, Platform]) -> AsyncIterator[None]:
    """With a shared ledger (PostgreSQL: several hosts, one bot), every platform that can
    paces by the bot's budgets in it (design point 7), told before it connects and kept
    until it is closed; with SQLite, nothing: each outbox's own windows, as ever."""
    target = config.gateway.ledger_target()
    if target is None:
        yield
        return
    from gateway.store.rate_buckets import LedgerRates

    async with LedgerRates(target, in_flight_cap=config.gateway.host_lease_seconds) as rates:
        for platform in platforms.values():
            if isinstance(platform, SharesRates):
                platform.share_rates(rates)
        yield


async def _run(path: Path, host: str) -> int:
    from adapters.launch import ConfiguredLauncher
    from adapters.transcription import transcriber_for
    from gateway.platform_links import linked
    from gateway.sessions.engine import Gateway
    from gateway.sessions.receivers import lease_receivers

    config = _load_config(path)
    platforms = _platforms(config)
    lease_receivers(config, platforms)  # several hosts: one receives Telegram, Discord
    launcher = ConfiguredLauncher(stop_grace_seconds=config.gateway.stop_grace_seconds)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    # every platform is connected before the gateway's recovery (one whose servers are out:
    # tried again meanwhile, gateway/platform_links.py) and closed after its ledger; the
    # gateway attaches them, and tells them to stop taking input before its runners stop
    async with (
        shared_rates(config, platforms),
        linked(platforms) as links,
        Gateway(
            config,
            platforms=platforms,
            launcher=launcher,
            host=host,
            transcriber=transcriber_for(config.transcription),
        ) as gateway,
    ):
        links.attach(gateway)
        reloading = asyncio.Lock()
        reloads: set[asyncio.Task[None]] = set()

        def reload() -> None:  # SIGHUP, `systemctl reload`: one reload at a time, in order
            task = asyncio.create_task(_reload(path, gateway, reloading))
            reloads.add(task)
            task.add_done_callback(reloads.discard)

        loop.add_signal_handler(signal.SIGHUP, reload)
        log.info(
            "agent-gateway running (host %s, data dir %s, ledger %s)",
            host,
            config.gateway.data_dir,
            gateway.store.location,  # a PostgreSQL target without its password
        )
        stopping = asyncio.create_task(stop.wait())
        left = asyncio.create_task(links.none_left.wait())
        await asyncio.wait({stopping, left}, return_when=asyncio.FIRST_COMPLETED)
        stopping.cancel()
        left.cancel()
        loop.remove_signal_handler(signal.SIGHUP)
        for task in reloads:
            task.cancel()
    if links.none_left.is_set() and not stop.is_set():
        return 1  # every platform refused its configuration while running (logged)
    return 0


async def _reload(path: Path, gateway: Gateway, lock: asyncio.Lock) -> None:
    """Reread the config and apply what may change while agents run; a file that does not
    parse, or a change that needs a restart, is refused, said in the log, and nothing of
    it applied (the gateway runs on with the config it had)."""
    async with lock:
        try:
            config = load_config(path)
            changed = await gateway.reload(config)
        except GatewayError as exc:
            log.error("reload of %s refused: %s", path, exc)
            return
        if changed:
            log.info("reloaded %s: %s", path, ", ".join(changed))
        else:
            log.info("reloaded %s: nothing a reload applies changed", path)


def _ledger_location(
    config_path: Path | None, data_dir: Path | None
) -> tuple[Path, PgTarget | None]:
    """``--data-dir``'s SQLite ledger; else the config's ledger (its ``[gateway] store``, a
    PostgreSQL one, or SQLite in its data dir); else SQLite in the default data dir."""
    if data_dir is not None:
        return data_dir, None
    if config_path is None:
        return DEFAULT_DATA_DIR.expanduser(), None
    section = _load_config(config_path).gateway
    target = section.ledger_target()
    return section.data_dir, None if target is None else target.for_a_command()


async def _ledger(config_path: Path | None, data_dir: Path | None, limit: int) -> int:
    from gateway.store.store import Store

    data_dir, target = _ledger_location(config_path, data_dir)
    if target is None and not data_dir.is_dir():
        print(f"no ledger in {data_dir}")
        return 1
    async with Store.open(data_dir, postgresql=target) as store:
        pending = await store.interactions.list_open()
        print(f"Pending ({len(pending)}):")
        for interaction in pending:
            print(_describe(interaction))
        recent = await store.interactions.list_recent(limit=limit)
        print(f"\nRecent ({len(recent)}):")
        for interaction in recent:
            print(_describe(interaction))
    return 0


async def _audit(
    config_path: Path | None,
    data_dir: Path | None,
    since_text: str,
    project: str | None,
    form: str,
) -> int:
    from gateway.store.audit_export import audit_records, to_csv, to_jsonl
    from gateway.store.store import Store

    try:
        since = datetime.fromisoformat(since_text)
    except ValueError:
        said = f"--since {since_text!r} is not a date (2026-12-01 or 2026-12-01T09:00)"
        print(f"agent-gateway: {said}", file=sys.stderr)
        return 2
    if since.tzinfo is None:
        since = since.replace(tzinfo=UTC)
    data_dir, target = _ledger_location(config_path, data_dir)
    if target is None and not data_dir.is_dir():
        print(f"agent-gateway: no ledger in {data_dir}", file=sys.stderr)
        return 1
    async with Store.open(data_dir, postgresql=target) as store:
        records = await audit_records(store, since.astimezone(UTC), project)
    sys.stdout.write(to_csv(records) if form == "csv" else to_jsonl(records))
    return 0


async def _prune(config_path: Path, *, dry_run: bool) -> int:
    """What ``[gateway.retention]`` prunes now: counted (``--dry-run``), or pruned in the
    same batches the gateway's background pruning uses (beside a running gateway too)."""
    from gateway.store.retention import rules_of
    from gateway.store.store import Store

    section = _load_config(config_path).gateway
    data_dir, target = section.data_dir, section.ledger_target()
    target = None if target is None else target.for_a_command()
    if target is None and not data_dir.is_dir():
        print(f"agent-gateway: no ledger in {data_dir}", file=sys.stderr)
        return 1
    rules = rules_of(section.retention)
    kept = f"texts older than {section.retention.text_days:g} days, the audit older than "
    kept += f"{section.retention.audit_days:g} days"
    async with Store.open(data_dir, postgresql=target) as store:
        if dry_run:
            counts = await store.retention.count(rules)
            print(f"Would prune ({kept}):")
        else:
            pruned = await store.retention.prune(rules, holder=f"prune:{socket.gethostname()}")
            if pruned is None:
                print("Another host is pruning this ledger now: nothing done.")
                return 1
            counts = pruned
            print(f"Pruned ({kept}):")
    for line in counts.lines():
        print(f"  {line}")
    return 0


def _describe(interaction: Interaction) -> str:
    lines = [
        f"  {interaction.id}  {interaction.state.value:<9} {interaction.kind.value:<8} "
        f"{interaction.title}  (session {interaction.session_id}, epoch "
        f"{interaction.runtime_epoch}, {interaction.created_at:%Y-%m-%d %H:%M:%S})"
    ]
    if interaction.decision is not None:
        d = interaction.decision
        what = d.decision.action_id or "answers: " + ", ".join(sorted(d.decision.answers))
        lines.append(f"      decided   {d.at:%H:%M:%S} by {d.actor}: {what}")
    if interaction.delivery is not None:
        v = interaction.delivery
        error = f" ({v.error})" if v.error else ""
        lines.append(f"      delivered {v.at:%H:%M:%S}: {v.outcome.value}{error}")
    if interaction.resolution is not None:
        r = interaction.resolution
        lines.append(f"      resolved  {r.at:%H:%M:%S}: {r.how.value} by {r.by}")
    return "\n".join(lines)
