"""The real ``@zed-industries/codex-acp`` 0.16.0 (an ACP agent over Codex) through the whole
gateway, against the fake Responses API on loopback, ``approval_policy = "untrusted"``.

codex-acp offers its own option ids: ``approved`` (allow_once), ``approved-execpolicy-amendment``
(allow_always) and ``abort`` (reject_once; there is no reject_always). An approved command runs
in Codex's sandbox, which needs Debian's bubblewrap (scripts/setup.sh installs it).
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway.config.model import Config
from platforms.registry import parse_config
from tests.codex_env import CodexHome, make_codex_home
from tests.gateway_harness import ALICE, ROOM, Running, running_gateway
from tests.servers.fake_responses import FakeResponses, message, shell

pytestmark = [pytest.mark.real_agent("codex-acp"), pytest.mark.timeout(120)]

LABELS = ["Yes, proceed", "Always allow", "Deny"]


@pytest.fixture
def acp_home(fake_model: FakeResponses) -> Iterator[CodexHome]:
    with make_codex_home(fake_model.base_url, approval_policy="untrusted") as home:
        yield home


def acp_config(binary: str, home: CodexHome, data_dir: Path, *, policy: str = "") -> Config:
    env = "\n".join(f"{name} = {json.dumps(value)}" for name, value in home.env.items())
    text = f"""
[gateway]
data_dir = {json.dumps(str(data_dir))}
stop_grace_seconds = 5

[projects.demo]
work_dir = {json.dumps(str(home.workspace))}
agent = "acp"
argv = [{json.dumps(binary)}]

[projects.demo.agent_options.env]
{env}

[projects.demo.auth.memory]
allow_from = ["alice"]
approvers = ["alice"]

[platforms.memory]
{policy}"""
    return parse_config(text, "test.toml")


async def ask(gw: Running, prompt: str) -> dict[str, str]:
    """Say ``prompt``; the labels and tokens of the card it brings."""
    before = len(gw.cards())
    await gw.memory.say(ROOM, ALICE, prompt)

    def fresh() -> dict[str, str] | None:
        for shown in gw.cards()[before:]:
            if shown.card is not None and shown.card.actions:
                return {action.label: action.token for action in shown.card.actions}
        return None

    return await gw.memory.wait_for(fresh, deadline=60)


async def status(gw: Running) -> str:
    before = len(gw.memory.texts(ROOM))
    await gw.memory.say(ROOM, ALICE, "/status")
    return await gw.memory.wait_for(
        lambda: next((t for t in gw.memory.texts(ROOM)[before:] if t.startswith("Session")), None)
    )


def agent_groups(workspace: Path) -> set[int]:
    """The process groups of the codex-acp processes working in ``workspace``."""
    groups: set[int] = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            cwd = os.readlink(entry / "cwd")
            if b"codex-acp" in cmdline and Path(cwd) == workspace:
                groups.add(os.getpgid(int(entry.name)))
        except OSError:
            continue
    return groups


async def test_approved_runs_the_command(
    codex_acp_bin: str, acp_home: CodexHome, fake_model: FakeResponses, tmp_path: Path
) -> None:
    fake_model.enqueue((shell("echo hi > hi.txt"), message("Done.")))
    async with running_gateway(acp_config(codex_acp_bin, acp_home, tmp_path / "d")) as gw:
        tokens = await ask(gw, "make hi.txt")
        assert list(tokens) == LABELS
        ack = await gw.memory.click(ROOM, ALICE, tokens["Yes, proceed"])
        assert ack.accepted, ack.text
        await gw.text_where(lambda text: "Done." in text)
        assert (acp_home.workspace / "hi.txt").read_text() == "hi\n"
        assert "Grants: none" in await status(gw)
    # the npm launcher and the native binary it started were stopped as one group
    assert agent_groups(acp_home.workspace) == set()


async def test_always_allow_is_a_grant_in_status(
    codex_acp_bin: str, acp_home: CodexHome, fake_model: FakeResponses, tmp_path: Path
) -> None:
    fake_model.enqueue((shell("echo hi > hi.txt"), message("Done.")))
    async with running_gateway(acp_config(codex_acp_bin, acp_home, tmp_path / "d")) as gw:
        tokens = await ask(gw, "make hi.txt")
        await gw.memory.click(ROOM, ALICE, tokens["Always allow"])
        await gw.text_where(lambda text: "Done." in text)
        said = await status(gw)
        # the grant names the agent's own option, the rule it keeps
        assert "don't ask again" in said and "always, by Alice" in said, said


async def said(gw: Running, text: str, starts: str) -> str:
    """Say ``text`` as Alice; the first reply since then starting with ``starts``."""
    before = len(gw.memory.texts(ROOM))
    await gw.memory.say(ROOM, ALICE, text)
    return await gw.memory.wait_for(
        lambda: next((t for t in gw.memory.texts(ROOM)[before:] if t.startswith(starts)), None)
    )


async def test_always_allow_is_a_line_of_codex_rules_that_revoke_removes(
    codex_acp_bin: str, acp_home: CodexHome, fake_model: FakeResponses, tmp_path: Path
) -> None:
    """codex-acp writes its "always" to ``$CODEX_HOME/rules/default.rules``, as Codex does:
    /grants names that line (not Claude's settings) and /revoke removes it. The card shows
    the agent's reason and the rule."""
    fake_model.enqueue((shell("echo hi > hi.txt", justification="Need hi.txt"), message("Done.")))
    rules = acp_home.home / "rules" / "default.rules"
    async with running_gateway(acp_config(codex_acp_bin, acp_home, tmp_path / "d")) as gw:
        tokens = await ask(gw, "make hi.txt")
        [card] = [shown.card for shown in gw.cards() if shown.card is not None]
        assert card.summary == "Need hi.txt", card
        assert [a.rule for a in card.actions] == ["", "/bin/bash -c 'echo hi > hi.txt'", ""]
        await gw.memory.click(ROOM, ALICE, tokens["Always allow"])
        await gw.text_where(lambda text: "Done." in text)
        assert 'prefix_rule(pattern=["/bin/bash", "-c", "echo hi > hi.txt"]' in rules.read_text()
        listed = await said(gw, "/grants", "Grants in force")
        assert f"· line 1 of {rules}\n" in listed, listed
        assert "Claude" not in listed
        shown = await said(gw, "/revoke 1", "Grant 1 is line 1")
        assert "/revoke 1 remove deletes that line" in shown, shown
        done = await said(gw, "/revoke 1 remove", "Grant 1 revoked")
        assert f"line 1 removed from {rules}" in done, done
        assert "prefix_rule" not in rules.read_text()


async def test_deny_is_abort_and_nothing_runs(
    codex_acp_bin: str, acp_home: CodexHome, fake_model: FakeResponses, tmp_path: Path
) -> None:
    fake_model.enqueue((shell("echo hi > hi.txt"), message("Understood.")))
    async with running_gateway(acp_config(codex_acp_bin, acp_home, tmp_path / "d")) as gw:
        tokens = await ask(gw, "make hi.txt")
        await gw.memory.click(ROOM, ALICE, tokens["Deny"])
        # codex-acp's "abort" denies and ends the turn
        await gw.memory.wait_for(lambda: "ended interrupted" in gw.memory.turn_signals(ROOM))
        await gw.card_where(lambda card: card.status_line.startswith("Denied"))
        assert not (acp_home.workspace / "hi.txt").exists()
        # how the turn ended, in words: not a bare "interrupted", which nobody did
        ended = "⏹ The turn ended: the request was refused, and the agent ended its turn there."
        await gw.text_where(lambda text: text == ended)
        assert "⏹ The turn was interrupted." not in gw.memory.texts(ROOM)


async def test_stop_while_pending_cancels_and_the_next_prompt_works(
    codex_acp_bin: str, acp_home: CodexHome, fake_model: FakeResponses, tmp_path: Path
) -> None:
    fake_model.enqueue((shell("echo hi > hi.txt"), message("Done.")))
    fake_model.enqueue((message("Still here."),))
    async with running_gateway(acp_config(codex_acp_bin, acp_home, tmp_path / "d")) as gw:
        await ask(gw, "make hi.txt")
        await gw.memory.say(ROOM, ALICE, "/stop")
        await gw.memory.wait_for(lambda: "ended interrupted" in gw.memory.turn_signals(ROOM))
        await gw.card_where(lambda card: card.status_line.startswith("Stopped by Alice"))
        assert not (acp_home.workspace / "hi.txt").exists()
        await gw.memory.say(ROOM, ALICE, "hello")
        await gw.text_where(lambda text: "Still here." in text)


async def test_a_killed_agent_orphans_its_card_and_the_session_is_loaded_again(
    codex_acp_bin: str, acp_home: CodexHome, fake_model: FakeResponses, tmp_path: Path
) -> None:
    fake_model.enqueue((shell("echo hi > hi.txt"), message("Done.")))
    fake_model.enqueue((message("Back again."),))
    async with running_gateway(acp_config(codex_acp_bin, acp_home, tmp_path / "d")) as gw:
        await ask(gw, "make hi.txt")
        groups = agent_groups(acp_home.workspace)
        assert len(groups) == 1, groups
        os.killpg(groups.pop(), signal.SIGKILL)
        await gw.card_where(lambda card: "before anyone answered" in card.status_line)
        await gw.memory.say(ROOM, ALICE, "hello")
        await gw.text_where(lambda text: "Back again." in text)
        said = await status(gw)
        assert "Open requests: none" in said
    # the new process loaded the session: the model saw the first turn's prompt again
    last = fake_model.requests[-1]
    assert "make hi.txt" in json.dumps(last.body)


async def test_a_model_picked_with_model_is_set_as_the_session_s_model_option(
    codex_acp_bin: str, acp_home: CodexHome, fake_model: FakeResponses, tmp_path: Path
) -> None:
    fake_model.enqueue((message("One."),), (message("Two."),))
    config = acp_config(codex_acp_bin, acp_home, tmp_path / "data")
    demo = config.projects["demo"]
    listed = ("gpt-5.5", "gpt-5.4-mini", "o3")
    options = demo.agent_options.model_copy(update={"models": listed})
    config = config.model_copy(
        update={"projects": {"demo": demo.model_copy(update={"agent_options": options})}}
    )
    async with running_gateway(config) as gw:
        await gw.memory.say(ROOM, ALICE, "first")
        await gw.text_where(lambda text: "One." in text)
        assert fake_model.model_requests()[-1].body["model"] == "gpt-5.5"
        # not among the values of the session's model option (codex-acp 0.16 lists five)
        await gw.memory.say(ROOM, ALICE, "/model o3")
        await gw.text_where(lambda text: text.startswith("acp does not offer o3"))
        await gw.memory.say(ROOM, ALICE, "/model gpt-5.4-mini")
        await gw.text_where(lambda text: text == "Model: gpt-5.4-mini, from the next turn.")
        await gw.memory.say(ROOM, ALICE, "second")
        await gw.text_where(lambda text: "Two." in text)
        assert fake_model.model_requests()[-1].body["model"] == "gpt-5.4-mini"


async def test_mode_sets_the_acp_session_mode_tightening_at_once_loosening_by_an_approver(
    codex_acp_bin: str, fake_model: FakeResponses, tmp_path: Path
) -> None:
    # codex-acp 0.16 offers its modes where the configured policy is one of theirs
    # (on-request), none under "untrusted" (acp_home)
    with make_codex_home(fake_model.base_url) as home:
        await _modes_of_codex_acp(codex_acp_bin, home, fake_model, tmp_path)


async def _modes_of_codex_acp(
    codex_acp_bin: str, home: CodexHome, fake_model: FakeResponses, tmp_path: Path
) -> None:
    fake_model.enqueue((message("One."),), (message("Two."),), (message("Three."),))
    config = acp_config(codex_acp_bin, home, tmp_path / "data")
    demo = config.projects["demo"]
    # codex-acp 0.16 offers read-only, auto (its default) and full-access: written tightest
    # first, as the project orders them; "sideways" is not among its modes
    modes = ("read-only", "auto", "full-access", "sideways")
    options = demo.agent_options.model_copy(update={"allowed_modes": modes})
    config = config.model_copy(
        update={"projects": {"demo": demo.model_copy(update={"agent_options": options})}}
    )
    async with running_gateway(config) as gw:
        await gw.memory.say(ROOM, ALICE, "first")
        await gw.text_where(lambda text: "One." in text)
        assert "`sandbox_mode` is `workspace-write`" in json.dumps(fake_model.requests[-1].body)
        await gw.memory.say(ROOM, ALICE, "/mode sideways")
        await gw.text_where(lambda text: text.startswith("acp does not offer the mode sideways"))
        await gw.memory.say(ROOM, ALICE, "/mode read-only")
        await gw.text_where(lambda text: text == "Mode: read-only, from the next turn.")
        await gw.memory.say(ROOM, ALICE, "second")
        await gw.text_where(lambda text: text == "⚙ The agent now runs in mode read-only.")
        await gw.text_where(lambda text: "Two." in text)
        assert "`sandbox_mode` is `read-only`" in json.dumps(fake_model.requests[-1].body)

        await gw.memory.say(ROOM, ALICE, "/mode full-access")
        await gw.text_where(lambda text: "needs an approver of this project: request" in text)
        shown = await gw.card_where(lambda card: "Loosen the permission mode" in card.title)
        assert shown.card is not None and "read-only → full-access" in shown.card.title
        ack = await gw.memory.click(ROOM, ALICE, shown.card.actions[0].token)
        assert ack.accepted, ack.text
        await gw.memory.say(ROOM, ALICE, "third")
        await gw.text_where(lambda text: text == "⚙ The agent now runs in mode full-access.")
        await gw.text_where(lambda text: "Three." in text)
        told = json.dumps(fake_model.requests[-1].body)
        assert "`sandbox_mode` is `danger-full-access`" in told
        await gw.memory.say(ROOM, ALICE, "/status")
        status = await gw.text_where(lambda text: text.startswith("Session "))
        assert "Mode: permission mode full-access" in status
        assert "Policy in force: mode = full-access" in status
