"""``agent-gateway demo``: the web console and the demo agent, with nothing to configure.

:func:`build_demo` prepares everything a demo gateway needs and returns it unstarted:

- the data dir (default ``~/.local/share/agent-gateway/demo``; the ledger and HMAC key);
- the demo work dir, the data dir's sibling ``<data dir>-work`` (never inside each other:
  an agent must not reach the ledger), seeded with a README the first time;
- a :class:`~gateway.config.model.Config` made by :func:`platforms.registry.parse_config` from a
  generated TOML file: one ``codex-app-server`` project, ``demo``, whose argv is
  ``[sys.executable, "-m", "gateway.app.demo.agent"]`` (the launcher appends ``app-server``),
  with ``you`` as the only person allowed and the only approver;
- the platforms: the web console acting as ``local:you``, or, ``headless``, the in-memory
  platform (tests and embedding; the person is then ``memory:you``);
- the real :class:`~adapters.launch.ConfiguredLauncher`.

:func:`run_demo` runs it until SIGINT or SIGTERM, after printing the console's address with
its access token once.
"""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import gateway
from adapters.launch import ConfiguredLauncher
from gateway.app.demo.scenarios import SCENARIOS
from gateway.config.model import DEFAULT_DATA_DIR, Config
from gateway.errors import GatewayError
from gateway.platform import Platform, connected
from platforms.console.config import ConsoleConfig
from platforms.console.platform import ConsolePlatform
from platforms.memory.platform import MemoryPlatform
from platforms.registry import parse_config

__all__ = [
    "DEFAULT_DEMO_DATA_DIR",
    "DEMO_PROJECT",
    "DEMO_USER",
    "Demo",
    "build_demo",
    "demo_config_text",
    "demo_work_dir",
    "run_demo",
]

log = logging.getLogger("agent-gateway")

DEFAULT_DEMO_DATA_DIR = DEFAULT_DATA_DIR / "demo"
DEMO_PROJECT = "demo"
DEMO_USER = "you"
CONSOLE_IDENTITY = f"local:{DEMO_USER}"

_README = """\
# The agent-gateway demo's work dir

The demo agent (`python -m gateway.app.demo.agent`) works here. Its `command` scenario writes
`hello.txt` and its `patch` scenario writes `greeting.py`, each only after you allow it in the
console. Delete this folder whenever you like; `agent-gateway demo` makes it again.
"""


@dataclass(frozen=True, kw_only=True, slots=True)
class Demo:
    config: Config
    platforms: Mapping[str, Platform]
    launcher: ConfiguredLauncher
    work_dir: Path
    console: ConsolePlatform | None = None  # entered (serving) by run_demo
    memory: MemoryPlatform | None = None  # the platform of a headless demo


def demo_work_dir(data_dir: Path) -> Path:
    """``<data dir>-work``, beside the data dir."""
    data = data_dir.expanduser().resolve()
    return data.parent / f"{data.name}-work"


def _source_root() -> Path:
    """Where the ``gateway`` package can be imported from (the agent runs in its work dir)."""
    return Path(gateway.__file__).resolve().parent.parent


def demo_config_text(
    data_dir: Path,
    work_dir: Path,
    *,
    headless: bool = False,
    host: str = "127.0.0.1",
    port: int = 0,
    pace: float = 1.0,
    public_url: str | None = None,
) -> str:
    """The demo's configuration, as a TOML file a person could have written."""
    argv = [sys.executable, "-m", "gateway.app.demo.agent", "--pace", f"{pace:g}"]
    auth, platform = ("memory", "[platforms.memory]") if headless else ("local", "")
    if not headless:
        platform = f"""[platforms.console]
identity = "{CONSOLE_IDENTITY}"
host = {json.dumps(host)}
port = {port}"""
        if public_url is not None:  # behind a TLS proxy: the only address it answers to
            platform += f"\npublic_url = {json.dumps(public_url)}"
    return f"""# agent-gateway demo (generated)
[gateway]
data_dir = {json.dumps(str(data_dir))}
stop_grace_seconds = 5

[projects.{DEMO_PROJECT}]
work_dir = {json.dumps(str(work_dir))}
agent = "codex-app-server"
argv = {json.dumps(argv)}
approval_policy = "on-request"
sandbox = "workspace-write"
features = ["default_mode_request_user_input"]

[projects.{DEMO_PROJECT}.agent_options.env]
PYTHONPATH = {json.dumps(str(_source_root()))}

[projects.{DEMO_PROJECT}.auth.{auth}]
allow_from = ["{DEMO_USER}"]
approvers = ["{DEMO_USER}"]

{platform}
"""


def build_demo(
    data_dir: Path = DEFAULT_DEMO_DATA_DIR,
    *,
    headless: bool = False,
    host: str = "127.0.0.1",
    port: int = 0,
    pace: float = 1.0,
    public_url: str | None = None,
) -> Demo:
    """Create the demo's folders and return its config, platforms and launcher, unstarted.

    A headless demo has the in-memory platform instead of the console. The console does not
    print its address itself: :func:`run_demo` prints it once the gateway is ready for it.
    """
    if pace < 0:
        raise GatewayError(f"the demo agent's pace must not be negative (got {pace:g})")
    data_dir = data_dir.expanduser().resolve()
    work_dir = demo_work_dir(data_dir)
    try:
        work_dir.mkdir(parents=True, exist_ok=True)
        readme = work_dir / "README.md"
        if not readme.exists():
            readme.write_text(_README, encoding="utf-8")
    except OSError as exc:
        raise GatewayError(f"cannot prepare the demo work dir {work_dir}: {exc}") from exc
    text = demo_config_text(
        data_dir, work_dir, headless=headless, host=host, port=port, pace=pace,
        public_url=public_url,
    )  # fmt: skip
    config = parse_config(text, "<demo config>")
    launcher = ConfiguredLauncher(stop_grace_seconds=config.gateway.stop_grace_seconds)
    if headless:
        memory = MemoryPlatform()
        return Demo(
            config=config,
            platforms={"memory": memory},
            launcher=launcher,
            work_dir=work_dir,
            memory=memory,
        )
    settings = config.platforms.get("console", ConsoleConfig)
    assert settings is not None
    words = [(scenario.name, scenario.about) for scenario in SCENARIOS]
    console = ConsolePlatform(settings, announce=None, words=words)
    return Demo(
        config=config,
        platforms={"console": console},
        launcher=launcher,
        work_dir=work_dir,
        console=console,
    )


async def run_demo(
    data_dir: Path = DEFAULT_DEMO_DATA_DIR,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    pace: float = 1.0,
    public_url: str | None = None,
) -> int:
    """Serve the console with the demo agent until SIGINT or SIGTERM; 0 on a clean stop.
    ``public_url``: the https address of a TLS proxy in front (the console answers to it
    only, and prints it)."""
    from gateway.sessions.engine import Gateway

    demo = build_demo(data_dir, host=host, port=port, pace=pace, public_url=public_url)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    gateway = Gateway(demo.config, platforms=demo.platforms, launcher=demo.launcher)
    async with connected(demo.platforms), gateway:
        log.info("agent-gateway demo running (data dir %s)", demo.config.gateway.data_dir)
        if demo.console is not None:
            # the access token: printed once, to the terminal only, never logged
            print(f"agent-gateway demo: {demo.console.login_url}", flush=True)
        print(
            "Open the address above in your browser (it carries the access token and is shown "
            "only once) and click one of the demo's words (command, patch, form, ...) or type "
            "anything.\n"
            f"The demo agent works in {demo.work_dir}. Ctrl-C stops the demo.",
            flush=True,
        )
        await stop.wait()
    return 0
