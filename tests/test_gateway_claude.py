"""Claude Code through the whole gateway: a Bash approval as a card, allowed by a click; a
denial with a message the model reads; the permission mode in force shown in /status."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import tests.servers.fake_anthropic as fm
from gateway.config.model import Config, PermissionMode
from gateway.domain import Answer
from platforms.registry import parse_config
from tests.claude_env import ClaudeHome
from tests.gateway_harness import ALICE, ROOM, running_gateway
from tests.servers.fake_anthropic import CHECKS, COLOR, DONE

pytestmark = [pytest.mark.real_agent("claude"), pytest.mark.timeout(120)]


def claude_config(claude_bin: str, home: ClaudeHome, data_dir: Path) -> Config:
    env = "\n".join(f"{name} = {json.dumps(value)}" for name, value in home.env.items())
    return parse_config(
        f"""
[gateway]
data_dir = {json.dumps(str(data_dir))}

[projects.notes]
work_dir = {json.dumps(str(home.workspace))}
agent = "claude-code"
argv = [{json.dumps(claude_bin)}]

[projects.notes.agent_options.env]
{env}

[projects.notes.auth.memory]
allow_from = ["alice"]
approvers = ["alice"]

[platforms.memory]
""",
        "claude.toml",
    )


async def test_bash_approval_allowed_by_a_click(
    claude_bin: str, claude_home: ClaudeHome, fake_anthropic: fm.FakeAnthropic, tmp_path: Path
) -> None:
    fake_anthropic.enqueue([fm.bash("touch hello.txt", "Create hello.txt"), DONE])
    async with running_gateway(claude_config(claude_bin, claude_home, tmp_path / "d")) as gw:
        await gw.memory.say(ROOM, ALICE, "please create hello.txt")
        shown = await gw.card_where(lambda card: bool(card.actions))
        assert shown.card is not None
        labels = [action.label for action in shown.card.actions]
        assert labels[0] == "Allow once" and "Deny" in labels
        assert any("touch hello.txt" in getattr(b, "code", "") for b in shown.card.blocks)
        ack = await gw.memory.click(ROOM, ALICE, shown.card.actions[0].token)
        assert ack.accepted, ack.text
        await gw.text_where(lambda text: "Done. The tool said" in text)
        assert (claude_home.workspace / "hello.txt").exists()
        await gw.card_where(lambda card: not card.actions and "done" in card.status_line)
        await gw.memory.say(ROOM, ALICE, "/status")
        status = await gw.text_where(lambda text: text.startswith("Session "))
        assert "permission_mode = default" in status


async def test_bash_denied_with_a_message_the_model_reads(
    claude_bin: str, claude_home: ClaudeHome, fake_anthropic: fm.FakeAnthropic, tmp_path: Path
) -> None:
    fake_anthropic.enqueue([fm.bash("touch hello.txt", "Create hello.txt"), DONE])
    async with running_gateway(claude_config(claude_bin, claude_home, tmp_path / "d")) as gw:
        await gw.memory.say(ROOM, ALICE, "please create hello.txt")
        shown = await gw.card_where(lambda card: bool(card.actions))
        interaction_id = shown.card.actions[0].token.split(":")[1] if shown.card else ""
        await gw.memory.say(ROOM, ALICE, f"/deny {interaction_id} not in this folder")
        await gw.text_where(lambda text: "Done. The tool said" in text)
        assert not (claude_home.workspace / "hello.txt").exists()
    told = fake_anthropic.model_requests()[-1].tool_result()
    assert told is not None and "not in this folder" in told[0]


async def test_questions_answered_through_the_form_and_required_answers_enforced(
    claude_bin: str, claude_home: ClaudeHome, fake_anthropic: fm.FakeAnthropic, tmp_path: Path
) -> None:
    fake_anthropic.enqueue([fm.ask_user_question([COLOR, CHECKS]), DONE])
    async with running_gateway(claude_config(claude_bin, claude_home, tmp_path / "d")) as gw:
        await gw.memory.say(ROOM, ALICE, "ask me")
        shown = await gw.card_where(lambda card: card.form is not None)
        assert shown.card is not None and shown.card.form is not None
        form = shown.card.form
        asked = [q.question for q in form.questions]
        assert [q.multi for q in asked] == [False, True]
        incomplete = {asked[0].id: Answer(option_ids=(asked[0].options[1].id,))}
        refused = await gw.memory.submit(ROOM, ALICE, form.submit_token, incomplete)
        assert not refused.accepted  # a required question is unanswered: nothing is sent
        answers = {
            asked[0].id: Answer(option_ids=(asked[0].options[1].id,)),
            asked[1].id: Answer(option_ids=(asked[1].options[0].id, asked[1].options[2].id)),
        }
        ack = await gw.memory.submit(ROOM, ALICE, form.submit_token, answers)
        assert ack.accepted, ack.text
        await gw.text_where(lambda text: "Done. The tool said" in text)
    told = fake_anthropic.model_requests()[-1].tool_result()
    assert told is not None
    assert '"Which color should the button be?"="Blue"' in told[0]
    assert '"Which checks should run?"="Lint, Tests"' in told[0]


async def test_stop_with_a_request_pending_cancels_it_and_interrupts_the_turn(
    claude_bin: str, claude_home: ClaudeHome, fake_anthropic: fm.FakeAnthropic, tmp_path: Path
) -> None:
    fake_anthropic.enqueue([fm.bash("touch hello.txt", "Create hello.txt"), DONE])
    async with running_gateway(claude_config(claude_bin, claude_home, tmp_path / "d")) as gw:
        await gw.memory.say(ROOM, ALICE, "please create hello.txt")
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
        assert not (claude_home.workspace / "hello.txt").exists()


async def test_conversation_resumes_after_a_gateway_restart(
    claude_bin: str, claude_home: ClaudeHome, fake_anthropic: fm.FakeAnthropic, tmp_path: Path
) -> None:
    fake_anthropic.enqueue([fm.text("Remembered: the sky is green.")], [fm.text("Still here.")])
    config = claude_config(claude_bin, claude_home, tmp_path / "d")
    async with running_gateway(config) as gw:
        await gw.memory.say(ROOM, ALICE, "remember that the sky is green")
        await gw.text_where(lambda text: "Remembered" in text)
        first = await gw.gateway.store.sessions.lookup(ROOM)
    async with running_gateway(config) as gw:
        await gw.memory.say(ROOM, ALICE, "what colour is the sky?")
        await gw.text_where(lambda text: "Still here." in text)
        again = await gw.gateway.store.sessions.lookup(ROOM)
    assert first is not None and again is not None
    assert again.id == first.id and again.native_session_id == first.native_session_id
    assert again.current_epoch == 2
    history = " ".join(fake_anthropic.model_requests()[-1].prompts())
    assert "the sky is green" in history  # the resumed process carried the conversation


async def test_a_model_picked_with_model_names_the_next_request(
    claude_bin: str, claude_home: ClaudeHome, fake_anthropic: fm.FakeAnthropic, tmp_path: Path
) -> None:
    fake_anthropic.enqueue([fm.text("One.")], [fm.text("Two.")])
    config = claude_config(claude_bin, claude_home, tmp_path / "d")
    notes = config.projects["notes"]
    options = notes.agent_options.model_copy(update={"models": ("claude-haiku-4-5",)})
    config = config.model_copy(
        update={"projects": {"notes": notes.model_copy(update={"agent_options": options})}}
    )
    async with running_gateway(config) as gw:
        await gw.memory.say(ROOM, ALICE, "first")
        await gw.text_where(lambda text: "One." in text)
        first = fake_anthropic.model_requests()[-1].body["model"]
        assert first != "claude-haiku-4-5"
        await gw.memory.say(ROOM, ALICE, "/model claude-haiku-4-5")
        await gw.text_where(lambda text: text == "Model: claude-haiku-4-5, from the next turn.")
        await gw.memory.say(ROOM, ALICE, "second")
        await gw.text_where(lambda text: "Two." in text)
        assert fake_anthropic.model_requests()[-1].body["model"] == "claude-haiku-4-5"


async def test_a_model_claude_does_not_offer_is_refused_and_changes_nothing(
    claude_bin: str, claude_home: ClaudeHome, fake_anthropic: fm.FakeAnthropic, tmp_path: Path
) -> None:
    fake_anthropic.enqueue([fm.text("One.")], [fm.text("Two.")], [fm.text("Three.")])
    config = claude_config(claude_bin, claude_home, tmp_path / "d")
    notes = config.projects["notes"]
    listed = ("claude-haiku-4-5", "sonnet", "gpt-5.5")
    options = notes.agent_options.model_copy(update={"models": listed})
    config = config.model_copy(
        update={"projects": {"notes": notes.model_copy(update={"agent_options": options})}}
    )
    async with running_gateway(config) as gw:
        await gw.memory.say(ROOM, ALICE, "first")
        await gw.text_where(lambda text: "One." in text)
        first = fake_anthropic.model_requests()[-1].body["model"]
        # the models of Claude's initialize answer: an alias, a model without its snapshot date
        await gw.memory.say(ROOM, ALICE, "/model gpt-5.5")
        refused = await gw.text_where(lambda text: "does not offer gpt-5.5" in text)
        assert refused.startswith("claude-code does not offer gpt-5.5")
        assert refused.endswith("nothing changed. Model: the agent's own default.")
        await gw.memory.say(ROOM, ALICE, "/model")
        card = (await gw.card_where(lambda card: card.title.startswith("Model: "))).card
        assert card is not None
        assert [action.label for action in card.actions] == ["claude-haiku-4-5", "sonnet"]
        assert "Not offered by claude-code: gpt-5.5" in str(card.blocks)
        await gw.memory.say(ROOM, ALICE, "second")
        await gw.text_where(lambda text: "Two." in text)
        assert fake_anthropic.model_requests()[-1].body["model"] == first
        await gw.memory.say(ROOM, ALICE, "/model sonnet")
        await gw.text_where(lambda text: text == "Model: sonnet, from the next turn.")
        await gw.memory.say(ROOM, ALICE, "third")
        await gw.text_where(lambda text: "Three." in text)
        assert fake_anthropic.model_requests()[-1].body["model"] != first


async def test_mode_tightens_at_once_and_loosens_only_by_an_approver_s_click(
    claude_bin: str, claude_home: ClaudeHome, fake_anthropic: fm.FakeAnthropic, tmp_path: Path
) -> None:
    fake_anthropic.enqueue([fm.text("One.")], [fm.text("Two.")], [fm.text("Three.")])
    config = claude_config(claude_bin, claude_home, tmp_path / "d")
    notes = config.projects["notes"]
    options = notes.agent_options.model_copy(
        update={"allowed_modes": (PermissionMode.PLAN, PermissionMode.DEFAULT)}
    )
    config = config.model_copy(
        update={"projects": {"notes": notes.model_copy(update={"agent_options": options})}}
    )
    async with running_gateway(config) as gw:
        await gw.memory.say(ROOM, ALICE, "first")
        await gw.text_where(lambda text: "One." in text)
        await gw.memory.say(ROOM, ALICE, "/mode plan")
        await gw.text_where(lambda text: text == "Permission mode: plan, from the next turn.")
        await gw.memory.say(ROOM, ALICE, "second")
        await gw.text_where(lambda text: "Claude now runs in permission mode plan" in text)
        await gw.text_where(lambda text: "Two." in text)

        await gw.memory.say(ROOM, ALICE, "/mode default")
        await gw.text_where(lambda text: "needs an approver of this project: request" in text)
        shown = await gw.card_where(lambda card: "Loosen the permission mode" in card.title)
        assert shown.card is not None
        ack = await gw.memory.click(ROOM, ALICE, shown.card.actions[0].token)
        assert ack.accepted, ack.text
        await gw.memory.say(ROOM, ALICE, "third")
        await gw.text_where(lambda text: "Claude now runs in permission mode default" in text)
        await gw.text_where(lambda text: "Three." in text)
        await gw.memory.say(ROOM, ALICE, "/status")
        status = await gw.text_where(lambda text: text.startswith("Session "))
        assert "permission_mode = default" in status
        assert "Mode: permission mode default" in status
