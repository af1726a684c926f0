"""``idle_minutes`` (issue 31): an idle agent's process is ended, quietly, and the next message
resumes its session natively, with the real Codex app-server and Claude Code against the
fake model servers. What is asserted is what a person and the model see: nothing said in the
chat at the end, ``/status`` saying why the agent stopped, and the model's next request
carrying the earlier messages. A session whose card waits is never ended.

The quiet time is a fraction of a minute here (``idle_minutes = 0.02``: 1.2 s), and each
test waits on the runner's events (the end recorded, the session found busy), not on time."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

import tests.servers.fake_anthropic as fm
import tests.servers.fake_chat_completions as fc
from gateway.config.model import Config, ExpiryPolicy
from gateway.errors import ConfigError
from gateway.sessions.runner import SessionRunner
from platforms.registry import parse_config
from tests.claude_env import ClaudeHome
from tests.codex_env import CodexHome, make_codex_home
from tests.gateway_flows import DONE, WHEN, ask, session_of, settles
from tests.gateway_harness import ALICE, ROOM, Running, gateway_config, running_gateway
from tests.opencode_env import OPENCODE_WAIT, OpenCodeHome
from tests.scripted_gateway import REQUESTS, scripted_config, scripted_gateway
from tests.scripted_launcher import ScriptedLauncher
from tests.servers.fake_chat_completions import FakeChatCompletions
from tests.servers.fake_responses import FakeResponses, message, shell
from tests.test_acp_real import acp_config
from tests.test_gateway_opencode import opencode_config

pytestmark = pytest.mark.timeout(120)

IDLE = "idle_minutes = 0.02"
ENDED = "ended (stopped after 0.02 idle minutes; your next message resumes it)"


async def runner_of(gw: Running) -> SessionRunner:
    runner = gw.gateway.existing_runner((await session_of(gw)).id)
    assert runner is not None
    return runner


async def status_of(gw: Running) -> str:
    before = len(gw.memory.texts(ROOM))
    await gw.memory.say(ROOM, ALICE, "/status")
    return await gw.wait_for(
        lambda: next((t for t in gw.memory.texts(ROOM)[before:] if t.startswith("Session ")), None)
    )


@pytest.mark.real_agent("codex")
async def test_an_idle_codex_is_ended_quietly_and_the_next_message_resumes_its_thread(
    codex_bin: str, codex_home: CodexHome, fake_model: FakeResponses, tmp_path: Path
) -> None:
    config = gateway_config(codex_bin, codex_home, tmp_path / "data", project_extra=IDLE)
    async with running_gateway(config) as gw:
        fake_model.enqueue([message("Noted: pelican.")])
        await gw.memory.say(ROOM, ALICE, "remember the codeword pelican")
        await gw.text_where(lambda text: "Noted: pelican." in text)
        first = await session_of(gw)
        runner = await runner_of(gw)
        await runner.ended_idle.wait()
        shown = list(gw.memory.texts(ROOM))
        assert runner.agent is None
        ended = await gw.gateway.store.sessions.get_epoch(first.id, first.current_epoch)
        assert ended is not None and not ended.is_live
        assert f"Agent: {ended.agent_version}, {ENDED}" in (await status_of(gw)).splitlines()
        assert gw.memory.texts(ROOM)[: len(shown)] == shown  # nothing said at the end
        assert not any("stopped" in text or "ended" in text for text in shown)

        fake_model.enqueue([message("It was pelican.")])
        await gw.memory.say(ROOM, ALICE, "what was the codeword?")
        await gw.text_where(lambda text: "It was pelican." in text)
        resumed = await session_of(gw)
        assert resumed.id == first.id and resumed.current_epoch == first.current_epoch + 1
        assert resumed.native_session_id == first.native_session_id
    last = fake_model.model_requests()[-1].user_texts()
    assert any("remember the codeword pelican" in text for text in last)
    assert any("what was the codeword?" in text for text in last)


@pytest.mark.real_agent("codex")
async def test_a_codex_whose_card_waits_is_not_ended_until_it_is_answered_and_idle(
    codex_bin: str, codex_home: CodexHome, fake_model: FakeResponses, tmp_path: Path
) -> None:
    config = gateway_config(codex_bin, codex_home, tmp_path / "data", project_extra=IDLE)
    async with running_gateway(config) as gw:
        asked = await ask(gw, fake_model, [shell("touch idle.txt", escalated=True), DONE])
        runner = await runner_of(gw)
        await runner.idle.kept_at_least(2)  # twice the quiet time, the card still waiting
        assert runner.agent is not None and not runner.ended_idle.is_set()
        card = asked.shown.card
        assert card is not None and card.status_line == "Waiting for a decision"
        [allow] = [a for a in card.actions if a.label == "Allow once"]
        ack = await gw.memory.click(ROOM, ALICE, allow.token)
        assert ack.accepted, ack.text
        await settles(
            gw, asked, rf'Approved \("Allow once"\) by Alice at {WHEN} · sent to the agent · done'
        )
        await gw.text_where(lambda text: "Done." in text)
        assert (codex_home.workspace / "idle.txt").exists()
        await runner.ended_idle.wait()  # answered, its turn over: idle now
        assert runner.agent is None


@pytest.mark.real_agent("codex")
async def test_a_codex_whose_mode_change_waits_for_an_approver_is_not_ended(
    codex_bin: str, codex_home: CodexHome, fake_model: FakeResponses, tmp_path: Path
) -> None:
    modes = 'allowed_modes = ["read-only", "workspace-write"]'
    config = gateway_config(
        codex_bin,
        codex_home,
        tmp_path / "data",
        sandbox="read-only",
        project_extra=f"{modes}\n{IDLE}",
    )
    async with running_gateway(config) as gw:
        fake_model.enqueue([message("One.")])
        await gw.memory.say(ROOM, ALICE, "first")
        await gw.text_where(lambda text: "One." in text)
        runner = await runner_of(gw)
        await gw.memory.say(ROOM, ALICE, "/mode workspace-write")
        shown = await gw.card_where(lambda card: "Loosen the sandbox" in card.title)
        assert shown.card is not None
        await runner.idle.kept_at_least(runner.idle.kept + 2)  # a setting's card waits
        assert runner.agent is not None and not runner.ended_idle.is_set()
        [deny] = [a for a in shown.card.actions if a.label == "Deny"]
        ack = await gw.memory.click(ROOM, ALICE, deny.token)
        assert ack.accepted, ack.text
        await runner.ended_idle.wait()  # nothing open now: idle
        assert runner.agent is None


def claude_config(claude_bin: str, home: ClaudeHome, data_dir: Path) -> Config:
    env = "\n".join(f"{name} = {json.dumps(value)}" for name, value in home.env.items())
    return parse_config(
        f"""
[gateway]
data_dir = {json.dumps(str(data_dir))}

[projects.demo]
work_dir = {json.dumps(str(home.workspace))}
agent = "claude-code"
argv = [{json.dumps(claude_bin)}]
{IDLE}

[projects.demo.agent_options.env]
{env}

[projects.demo.auth.memory]
allow_from = ["alice"]
approvers = ["alice"]

[platforms.memory]
""",
        "claude-idle.toml",
    )


@pytest.mark.real_agent("claude")
async def test_an_idle_claude_is_ended_and_the_next_message_resumes_its_session(
    claude_bin: str, claude_home: ClaudeHome, fake_anthropic: fm.FakeAnthropic, tmp_path: Path
) -> None:
    fake_anthropic.enqueue([fm.text("Noted: pelican.")], [fm.text("It was pelican.")])
    async with running_gateway(claude_config(claude_bin, claude_home, tmp_path / "d")) as gw:
        await gw.memory.say(ROOM, ALICE, "remember the codeword pelican")
        await gw.text_where(lambda text: "Noted: pelican." in text)
        first = await session_of(gw)
        runner = await runner_of(gw)
        await runner.ended_idle.wait()
        assert runner.agent is None
        assert ENDED in await status_of(gw)
        await gw.memory.say(ROOM, ALICE, "what was the codeword?")
        await gw.text_where(lambda text: "It was pelican." in text)
        resumed = await session_of(gw)
        assert resumed.current_epoch == first.current_epoch + 1
    prompts = fake_anthropic.model_requests()[-1].prompts()
    assert any("remember the codeword pelican" in text for text in prompts)
    assert any("what was the codeword?" in text for text in prompts)


def test_idle_minutes_is_refused_for_an_attached_opencode_server_and_when_not_positive(
    tmp_path: Path,
) -> None:
    def load(project: str) -> Config:
        return parse_config(
            f"""
[projects.demo]
work_dir = {json.dumps(str(tmp_path))}
{project}

[projects.demo.auth.memory]
allow_from = ["alice"]

[platforms.memory]
""",
            "idle.toml",
        )

    password = tmp_path / "password"
    password.write_text("secret")
    with pytest.raises(ConfigError, match=r"idle_minutes.*attached OpenCode server"):
        load(
            f'agent = "opencode"\nurl = "http://127.0.0.1:4096"\n'
            f"password_file = {json.dumps(str(password))}\nidle_minutes = 30"
        )
    with pytest.raises(ConfigError, match="idle_minutes"):
        load('agent = "codex-app-server"\nidle_minutes = 0')
    assert load('agent = "codex-app-server"\nidle_minutes = 30').projects["demo"].idle_minutes == 30


def idling(config: Config) -> Config:
    """``config`` with every project's ``idle_minutes`` set to 0.02."""
    projects = {
        name: project.model_copy(update={"idle_minutes": 0.02})
        for name, project in config.projects.items()
    }
    return config.model_copy(update={"projects": projects})


async def test_a_running_turn_is_not_idle_and_the_next_start_resumes_the_native_session(
    tmp_path: Path,
) -> None:
    launcher = ScriptedLauncher(REQUESTS, streams={"work": ("Working on it. ", "Done now.")})
    config = idling(scripted_config(tmp_path, ExpiryPolicy()))
    async with scripted_gateway(config, launcher) as (gw, _):
        await gw.memory.say(ROOM, ALICE, "work")
        await gw.text_where(lambda text: text.startswith("Working on it."))
        runner = await runner_of(gw)
        await runner.idle.kept_at_least(2)  # twice the quiet time, the turn still running
        assert runner.turn_running and runner.agent is not None
        launcher.go_on.set()
        await gw.text_where(lambda text: text == "Working on it. Done now.")
        await runner.ended_idle.wait()
        await gw.memory.say(ROOM, ALICE, "hello again")
        await gw.text_where(lambda text: text == "echo: hello again")
        assert launcher.resumed == [None, "scripted-thread-1"]  # the same native session


@pytest.mark.real_agent("opencode")
@pytest.mark.timeout(300)
async def test_an_idle_opencode_server_is_ended_and_the_next_message_resumes_its_session(
    opencode_bin: str, opencode_home: OpenCodeHome, fake_chat: FakeChatCompletions, tmp_path: Path
) -> None:
    fake_chat.enqueue([fc.text("Noted: pelican.")], [fc.text("It was pelican.")])
    config = idling(opencode_config(opencode_bin, opencode_home, tmp_path / "d"))
    async with running_gateway(config, deadline=OPENCODE_WAIT) as gw:
        await gw.memory.say(ROOM, ALICE, "remember the codeword pelican")
        await gw.text_where(lambda text: "Noted: pelican." in text)
        first = await session_of(gw)
        runner = await runner_of(gw)
        await runner.ended_idle.wait()
        assert runner.agent is None
        await gw.memory.say(ROOM, ALICE, "what was the codeword?")
        await gw.text_where(lambda text: "It was pelican." in text)
        resumed = await session_of(gw)
        assert resumed.current_epoch == first.current_epoch + 1
        assert resumed.native_session_id == first.native_session_id
    prompts = fake_chat.model_requests()[-1].prompts()
    assert any("remember the codeword pelican" in text for text in prompts)
    assert any("what was the codeword?" in text for text in prompts)


@pytest.fixture
def acp_home(fake_model: FakeResponses) -> Iterator[CodexHome]:
    with make_codex_home(fake_model.base_url) as home:
        yield home


@pytest.mark.real_agent("codex-acp")
async def test_an_idle_acp_agent_is_ended_and_the_next_message_loads_its_session(
    codex_acp_bin: str, acp_home: CodexHome, fake_model: FakeResponses, tmp_path: Path
) -> None:
    fake_model.enqueue((message("Noted: pelican."),), (message("It was pelican."),))
    config = idling(acp_config(codex_acp_bin, acp_home, tmp_path / "d"))
    async with running_gateway(config) as gw:
        await gw.memory.say(ROOM, ALICE, "remember the codeword pelican")
        await gw.text_where(lambda text: "Noted: pelican." in text)
        first = await session_of(gw)
        runner = await runner_of(gw)
        await runner.ended_idle.wait()
        assert runner.agent is None
        await gw.memory.say(ROOM, ALICE, "what was the codeword?")
        await gw.text_where(lambda text: "It was pelican." in text)
        assert (await session_of(gw)).current_epoch == first.current_epoch + 1
    last = fake_model.model_requests()[-1].user_texts()
    assert any("remember the codeword pelican" in text for text in last)
    assert any("what was the codeword?" in text for text in last)
