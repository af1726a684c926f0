"""OpenCode (``opencode serve`` 1.18.33) through the whole gateway, against the fake Chat
Completions API: permissions (once, always, reject with a message), questions (single, multi,
typed, dismissed), /stop with a permission pending, the event stream cut mid-turn, the server
killed, and a wrong password refused."""

from __future__ import annotations

import json
import os
import signal
import socket
from pathlib import Path

import aiohttp
import pytest

import tests.servers.fake_chat_completions as fc
from adapters.opencode import SERVER_USER
from adapters.opencode_runtime import OpenCodeAgent, OpenCodeSettings
from gateway.cards import DiffBlock
from gateway.config.model import Config
from gateway.domain import Answer
from platforms.registry import parse_config
from tests.gateway_harness import ALICE, ROOM, running_gateway
from tests.opencode_env import OPENCODE_WAIT, SECOND_MODEL, OpenCodeHome
from tests.servers.fake_chat_completions import DONE, FakeChatCompletions

pytestmark = [pytest.mark.real_agent("opencode"), pytest.mark.timeout(300)]

COLOR = {
    "question": "Which color should the button be?",
    "header": "Color",
    "options": [{"label": "Red", "description": "warm"}, {"label": "Blue", "description": "cool"}],
    "multiple": False,
}
CHECKS = {
    "question": "Which checks should run?",
    "header": "Checks",
    "options": [
        {"label": "Lint", "description": "ruff"},
        {"label": "Types", "description": "mypy"},
        {"label": "Tests", "description": "pytest"},
    ],
    "multiple": True,
}


def opencode_config(opencode_bin: str, home: OpenCodeHome, data_dir: Path) -> Config:
    env = "\n".join(f"{name} = {json.dumps(value)}" for name, value in home.env.items())
    return parse_config(
        f"""
[gateway]
data_dir = {json.dumps(str(data_dir))}
stop_grace_seconds = 2

[projects.notes]
work_dir = {json.dumps(str(home.workspace))}
agent = "opencode"
argv = [{json.dumps(opencode_bin)}]

[projects.notes.agent_options.env]
{env}

[projects.notes.auth.memory]
allow_from = ["alice"]
approvers = ["alice"]

[platforms.memory]
""",
        "opencode.toml",
    )


def _interaction_id(token: str) -> str:
    return token.split(":")[1]


async def test_command_allowed_once_runs_and_status_shows_the_rules(
    opencode_bin: str, opencode_home: OpenCodeHome, fake_chat: FakeChatCompletions, tmp_path: Path
) -> None:
    fake_chat.enqueue([fc.bash("echo hi > made.txt", "Write made.txt"), DONE])
    config = opencode_config(opencode_bin, opencode_home, tmp_path / "d")
    async with running_gateway(config, deadline=OPENCODE_WAIT) as gw:
        await gw.memory.say(ROOM, ALICE, "please make a file")
        shown = await gw.card_where(lambda card: bool(card.actions))
        assert shown.card is not None
        labels = [action.label for action in shown.card.actions]
        assert labels == ["Allow once", "Always allow", "Deny"]
        assert any("echo hi > made.txt" in getattr(b, "code", "") for b in shown.card.blocks)
        ack = await gw.memory.click(ROOM, ALICE, shown.card.actions[0].token)
        assert ack.accepted, ack.text
        await gw.text_where(lambda text: "Done. The tool said" in text)
        assert (opencode_home.workspace / "made.txt").read_text() == "hi\n"
        await gw.card_where(lambda card: not card.actions and "done" in card.status_line)
        await gw.memory.say(ROOM, ALICE, "/status")
        status = await gw.text_where(lambda text: text.startswith("Session "))
        assert "* * → ask" in status
    texts = gw.memory.texts(ROOM)
    assert not any("please make a file" in t for t in texts)  # the prompt is not echoed back


async def test_a_file_write_shows_its_path_and_diff(
    opencode_bin: str, opencode_home: OpenCodeHome, fake_chat: FakeChatCompletions, tmp_path: Path
) -> None:
    target = opencode_home.workspace / "notes.md"
    fake_chat.enqueue([fc.write(str(target), "# Notes\nhello\n"), DONE])
    config = opencode_config(opencode_bin, opencode_home, tmp_path / "d")
    async with running_gateway(config, deadline=OPENCODE_WAIT) as gw:
        await gw.memory.say(ROOM, ALICE, "write notes")
        shown = await gw.card_where(lambda card: bool(card.actions))
        assert shown.card is not None
        assert shown.card.title == "Change a file?"
        [diff] = [b for b in shown.card.blocks if isinstance(b, DiffBlock)]
        assert diff.paths == (str(target),) and "+# Notes\n+hello" in diff.diff
        assert shown.card.actions[1].rule == "*"  # "always" would allow every edit: said whole
        ack = await gw.memory.click(ROOM, ALICE, shown.card.actions[0].token)
        assert ack.accepted, ack.text
        await gw.text_where(lambda text: "Done. The tool said" in text)
        assert target.read_text() == "# Notes\nhello\n"


async def test_command_denied_with_a_message_the_model_reads(
    opencode_bin: str, opencode_home: OpenCodeHome, fake_chat: FakeChatCompletions, tmp_path: Path
) -> None:
    fake_chat.enqueue([fc.bash("echo hi > made.txt", "Write made.txt"), DONE])
    config = opencode_config(opencode_bin, opencode_home, tmp_path / "d")
    async with running_gateway(config, deadline=OPENCODE_WAIT) as gw:
        await gw.memory.say(ROOM, ALICE, "please make a file")
        shown = await gw.card_where(lambda card: bool(card.actions))
        assert shown.card is not None
        interaction_id = _interaction_id(shown.card.actions[0].token)
        await gw.memory.say(ROOM, ALICE, f"/deny {interaction_id} not in this folder")
        await gw.text_where(lambda text: "Done. The tool said" in text)
        assert not (opencode_home.workspace / "made.txt").exists()
        # refused, not failed; with a message the agent goes on and the turn completes
        assert "✗ `echo hi > made.txt` (denied)" in gw.memory.texts(ROOM)
        await gw.memory.wait_for(lambda: "ended completed" in gw.memory.turn_signals(ROOM))
    told = fake_chat.model_requests()[-1].tool_result()
    assert told is not None and "not in this folder" in told


async def test_a_plain_deny_says_denied_and_that_the_turn_ended_there(
    opencode_bin: str, opencode_home: OpenCodeHome, fake_chat: FakeChatCompletions, tmp_path: Path
) -> None:
    """OpenCode stops its turn at a refusal without a message (the model is not asked again):
    the tool line says denied, not failed, and the turn is not reported done ("✓ Done.")."""
    fake_chat.enqueue([fc.bash("echo hi > made.txt", "Write made.txt"), DONE])
    config = opencode_config(opencode_bin, opencode_home, tmp_path / "d")
    async with running_gateway(config, deadline=OPENCODE_WAIT) as gw:
        await gw.memory.say(ROOM, ALICE, "please make a file")
        shown = await gw.card_where(lambda card: bool(card.actions))
        assert shown.card is not None
        [deny] = [action for action in shown.card.actions if action.label == "Deny"]
        assert "OpenCode ends its turn" in deny.explanation
        ack = await gw.memory.click(ROOM, ALICE, deny.token)
        assert ack.accepted, ack.text
        await gw.text_where(
            lambda text: text.startswith("⏹ The turn ended: the request was refused")
        )
        assert gw.memory.turn_signals(ROOM)[-1] == "ended interrupted"
        assert "✗ `echo hi > made.txt` (denied)" in gw.memory.texts(ROOM)
        assert not any("(failed)" in text for text in gw.memory.texts(ROOM))
    assert len(fake_chat.model_requests()) == 1  # the model was not asked again
    assert not (opencode_home.workspace / "made.txt").exists()


async def test_always_is_a_grant_kept_by_the_server_until_it_stops(
    opencode_bin: str, opencode_home: OpenCodeHome, fake_chat: FakeChatCompletions, tmp_path: Path
) -> None:
    fake_chat.enqueue(
        [fc.bash("echo one > one.txt", "Write one.txt"), DONE],
        [fc.bash("echo two > two.txt", "Write two.txt"), DONE],
        [fc.bash("echo three > three.txt", "Write three.txt"), DONE],
    )
    config = opencode_config(opencode_bin, opencode_home, tmp_path / "d")
    async with running_gateway(config, deadline=OPENCODE_WAIT) as gw:
        await gw.memory.say(ROOM, ALICE, "write one")
        shown = await gw.card_where(lambda card: bool(card.actions))
        assert shown.card is not None
        always = shown.card.actions[1]
        assert always.label == "Always allow" and always.rule == "echo *"
        ack = await gw.memory.click(ROOM, ALICE, always.token)
        assert ack.accepted, ack.text
        await gw.text_where(lambda text: "Done. The tool said" in text)
        await gw.memory.say(ROOM, ALICE, "write two")
        await gw.wait_for(lambda: (opencode_home.workspace / "two.txt").exists() or None)
        await gw.wait_for(
            lambda: sum("Done. The tool said" in t for t in gw.memory.texts(ROOM)) >= 2 or None
        )
        assert len([c for c in gw.cards() if c.card is not None]) == 1  # not asked again
        await gw.memory.say(ROOM, ALICE, "/status")
        status = await gw.text_where(lambda text: text.startswith("Session "))
        assert "Always allow `echo *`" in status
    # a new gateway, a new server process: the server forgot it, so it asks again
    async with running_gateway(config, deadline=OPENCODE_WAIT) as gw:
        await gw.memory.say(ROOM, ALICE, "write three")
        shown = await gw.card_where(lambda card: bool(card.actions))
        assert shown.card is not None
        assert any("echo three" in getattr(b, "code", "") for b in shown.card.blocks)


async def test_questions_answered_single_multi_and_typed(
    opencode_bin: str, opencode_home: OpenCodeHome, fake_chat: FakeChatCompletions, tmp_path: Path
) -> None:
    fake_chat.enqueue([fc.question([COLOR, CHECKS]), DONE])
    config = opencode_config(opencode_bin, opencode_home, tmp_path / "d")
    async with running_gateway(config, deadline=OPENCODE_WAIT) as gw:
        await gw.memory.say(ROOM, ALICE, "ask me")
        shown = await gw.card_where(lambda card: card.form is not None)
        assert shown.card is not None and shown.card.form is not None
        form = shown.card.form
        asked = [q.question for q in form.questions]
        assert [q.multi for q in asked] == [False, True]
        assert all(q.allow_other for q in asked)  # custom answers: on unless the agent says no
        answers = {
            asked[0].id: Answer(other="Green"),
            asked[1].id: Answer(option_ids=(asked[1].options[0].id, asked[1].options[2].id)),
        }
        ack = await gw.memory.submit(ROOM, ALICE, form.submit_token, answers)
        assert ack.accepted, ack.text
        await gw.text_where(lambda text: "Done. The tool said" in text)
    told = fake_chat.model_requests()[-1].tool_result()
    assert told is not None
    assert '"Which color should the button be?"="Green"' in told
    assert '"Which checks should run?"="Lint, Tests"' in told


async def test_question_dismissed_ends_the_turn_and_the_model_reads_it_next(
    opencode_bin: str, opencode_home: OpenCodeHome, fake_chat: FakeChatCompletions, tmp_path: Path
) -> None:
    fake_chat.enqueue([fc.question([COLOR]), DONE], [fc.text("Understood.")])
    config = opencode_config(opencode_bin, opencode_home, tmp_path / "d")
    async with running_gateway(config, deadline=OPENCODE_WAIT) as gw:
        await gw.memory.say(ROOM, ALICE, "ask me")
        shown = await gw.card_where(lambda card: card.form is not None)
        assert shown.card is not None
        dismiss = shown.card.actions[-1]
        assert dismiss.label == "Dismiss"
        ack = await gw.memory.click(ROOM, ALICE, dismiss.token)
        assert ack.accepted, ack.text
        await gw.card_where(lambda card: card.status_line.startswith("Denied and stopped"))
        await gw.memory.say(ROOM, ALICE, "never mind")
        await gw.text_where(lambda text: "Understood." in text)
        assert not any("Done. The tool said" in t for t in gw.memory.texts(ROOM))
    history = json.dumps(fake_chat.model_requests()[-1].messages)
    assert "dismissed this question" in history


async def test_stop_with_a_permission_pending_then_the_next_prompt_works(
    opencode_bin: str, opencode_home: OpenCodeHome, fake_chat: FakeChatCompletions, tmp_path: Path
) -> None:
    fake_chat.enqueue(
        [fc.bash("echo hi > made.txt", "Write made.txt"), DONE], [fc.text("Fresh start.")]
    )
    config = opencode_config(opencode_bin, opencode_home, tmp_path / "d")
    async with running_gateway(config, deadline=OPENCODE_WAIT) as gw:
        await gw.memory.say(ROOM, ALICE, "please make a file")
        shown = await gw.card_where(lambda card: bool(card.actions))
        assert shown.card is not None
        token = shown.card.actions[0].token
        await gw.memory.say(ROOM, ALICE, "/stop")
        await gw.text_where(lambda text: text == "⏹ Stopped by Alice.")
        await gw.card_where(
            lambda card: not card.actions and card.status_line.startswith("Stopped by Alice")
        )
        late = await gw.memory.click(ROOM, ALICE, token)
        assert not late.accepted
        await gw.memory.say(ROOM, ALICE, "hello again")
        await gw.text_where(lambda text: "Fresh start." in text)
        assert len([c for c in gw.cards() if c.card is not None]) == 1  # no second card
        assert not (opencode_home.workspace / "made.txt").exists()
        # the aborted tool's end, sent late by the server, is not said again in the new turn
        said = [t for t in gw.memory.texts(ROOM) if "echo hi > made.txt" in t]
        assert len(said) == 1, said


async def test_server_killed_orphans_the_pending_permission(
    opencode_bin: str, opencode_home: OpenCodeHome, fake_chat: FakeChatCompletions, tmp_path: Path
) -> None:
    fake_chat.enqueue([fc.bash("echo hi > made.txt", "Write made.txt"), DONE])
    config = opencode_config(opencode_bin, opencode_home, tmp_path / "d")
    async with running_gateway(config, deadline=OPENCODE_WAIT) as gw:
        await gw.memory.say(ROOM, ALICE, "please make a file")
        shown = await gw.card_where(lambda card: bool(card.actions))
        assert shown.card is not None
        session = await gw.gateway.store.sessions.lookup(ROOM)
        assert session is not None
        epoch = await gw.gateway.store.sessions.get_epoch(session.id, session.current_epoch)
        assert epoch is not None and epoch.pgid is not None
        os.killpg(epoch.pgid, signal.SIGKILL)
        ended = await gw.card_where(
            lambda card: not card.actions and "agent" in card.status_line.lower()
        )
        assert ended.card is not None
        assert ended.card.status_line.startswith("The agent process ended (killed by a signal)")
        assert "no answer can reach it now" in ended.card.status_line
        await gw.text_where(lambda text: text.startswith("⚠ The agent process ended"))
        assert not (opencode_home.workspace / "made.txt").exists()


def _cut_connections_to(port: int) -> None:
    """Cut every TCP connection this process holds to ``port`` on loopback, as a dropped link
    would: a shutdown of our end sends the server a FIN and our reader sees the stream end.
    (``ss -K`` would do it from outside, but needs a kernel with socket destroy.)"""
    ours: dict[str, int] = {}
    for fd in os.listdir("/proc/self/fd"):
        try:
            ours[os.readlink(f"/proc/self/fd/{fd}")] = int(fd)
        except FileNotFoundError:  # the listing's own descriptor, closed by now
            continue
    cut = 0
    for line in Path("/proc/self/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        remote_port = int(fields[2].split(":")[1], 16)
        fd = ours.get(f"socket:[{fields[9]}]")
        if remote_port != port or fd is None:
            continue
        with socket.socket(fileno=os.dup(fd)) as sock:
            sock.shutdown(socket.SHUT_RDWR)
        cut += 1
    assert cut, f"no connection to port {port} to cut"


def _server_port(pid: int) -> int:
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    return int(argv[argv.index(b"--port") + 1])


async def test_event_stream_cut_mid_turn_is_reopened_and_the_turn_goes_on(
    opencode_bin: str, opencode_home: OpenCodeHome, fake_chat: FakeChatCompletions, tmp_path: Path
) -> None:
    fake_chat.enqueue([fc.bash("echo hi > made.txt", "Write made.txt"), DONE])
    config = opencode_config(opencode_bin, opencode_home, tmp_path / "d")
    async with running_gateway(config, deadline=OPENCODE_WAIT) as gw:
        await gw.memory.say(ROOM, ALICE, "please make a file")
        shown = await gw.card_where(lambda card: bool(card.actions))
        assert shown.card is not None
        session = await gw.gateway.store.sessions.lookup(ROOM)
        assert session is not None
        epoch = await gw.gateway.store.sessions.get_epoch(session.id, session.current_epoch)
        assert epoch is not None and epoch.pid is not None
        _cut_connections_to(_server_port(epoch.pid))
        ack = await gw.memory.click(ROOM, ALICE, shown.card.actions[0].token)
        assert ack.accepted, ack.text
        await gw.text_where(lambda text: "Done. The tool said" in text)
        await gw.card_where(lambda card: not card.actions and "done" in card.status_line)
        assert (opencode_home.workspace / "made.txt").exists()
        assert len([c for c in gw.cards() if c.card is not None]) == 1  # not reopened


async def test_a_wrong_password_or_user_is_refused(
    opencode_bin: str, opencode_home: OpenCodeHome
) -> None:
    settings = OpenCodeSettings(
        command=[opencode_bin], cwd=opencode_home.workspace, env=opencode_home.env
    )
    async with OpenCodeAgent(settings, password="the-right-one") as agent:
        url = f"{agent.base_url}/session/status"
        async with aiohttp.ClientSession() as http:
            for user, password in (("opencode", "a-wrong-one"), ("someone", "the-right-one")):
                headers = {"Authorization": aiohttp.encode_basic_auth(user, password)}
                async with http.get(url, headers=headers) as answer:
                    assert answer.status == 401, user
            async with http.get(url) as answer:
                assert answer.status == 401
            headers = {"Authorization": aiohttp.encode_basic_auth(SERVER_USER, "the-right-one")}
            async with http.get(url, headers=headers) as answer:
                assert answer.status == 200


async def test_a_port_taken_before_the_server_binds_it_is_not_a_failed_start(
    opencode_bin: str, opencode_home: OpenCodeHome, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The port is free when the gateway picks it; any process's connection may take it before
    # opencode binds it (seen in CI: "ServeError", exit 1). Here the first pick is held.
    import adapters.opencode_runtime as runtime

    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    held.listen()
    picks = [held.getsockname()[1]]
    real_pick = runtime.free_loopback_port
    monkeypatch.setattr(
        runtime, "free_loopback_port", lambda: picks.pop() if picks else real_pick()
    )
    settings = OpenCodeSettings(
        command=[opencode_bin], cwd=opencode_home.workspace, env=opencode_home.env
    )
    try:
        async with OpenCodeAgent(settings, password="secret") as agent:
            assert not picks  # the held port was tried first
            assert agent.base_url != f"http://127.0.0.1:{held.getsockname()[1]}"
            assert agent.started.native_id  # its session was made: the server works
    finally:
        held.close()


async def test_a_model_picked_with_model_is_the_next_prompt_s(
    opencode_bin: str, opencode_home: OpenCodeHome, fake_chat: FakeChatCompletions, tmp_path: Path
) -> None:
    fake_chat.enqueue([fc.text("One.")], [fc.text("Two.")])
    config = opencode_config(opencode_bin, opencode_home, tmp_path / "d")
    notes = config.projects["notes"]
    listed = (f"fake/{SECOND_MODEL}", "fake/absent")  # the second: not in opencode.json
    options = notes.agent_options.model_copy(update={"models": listed})
    config = config.model_copy(
        update={"projects": {"notes": notes.model_copy(update={"agent_options": options})}}
    )
    async with running_gateway(config, deadline=OPENCODE_WAIT) as gw:
        await gw.memory.say(ROOM, ALICE, "first")
        await gw.text_where(lambda text: "One." in text)
        assert fake_chat.model_requests()[-1].body["model"] == fc.MODEL
        # checked against the models of its /config/providers
        await gw.memory.say(ROOM, ALICE, "/model fake/absent")
        await gw.text_where(lambda text: text.startswith("opencode does not offer fake/absent"))
        await gw.memory.say(ROOM, ALICE, f"/model fake/{SECOND_MODEL}")
        await gw.text_where(lambda text: text == f"Model: fake/{SECOND_MODEL}, from the next turn.")
        await gw.memory.say(ROOM, ALICE, "second")
        await gw.text_where(lambda text: "Two." in text)
        assert fake_chat.model_requests()[-1].body["model"] == SECOND_MODEL
