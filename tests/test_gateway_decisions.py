"""Every Codex request type, round trip through the whole gateway and the real codex app-server.

A person sees a card with exactly the choices the agent offered, clicks or submits, and then
sees the same card edited to one final status line with no buttons left. Behind it the
ledger holds three facts (who decided what and when; that the answer was delivered; how the
agent closed the request) and the model was told what the person chose: the command ran or
was rejected, the patch was applied or rejected, the answers arrived as given.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from gateway.cards import CodeBlock, DiffBlock, FieldsBlock
from gateway.domain import Actor, Answer, InteractionState, Resolution
from gateway.interactions.machine import DeliveryOutcome, Interaction
from gateway.platform import Ack
from gateway.store.codec import SECRET_MARKER
from tests.codex_env import CodexHome
from tests.gateway_flows import (
    DONE,
    WHEN,
    Asked,
    add_file,
    ask,
    count_rows,
    interaction,
    session_of,
    settles,
    told,
)
from tests.gateway_harness import ALICE, ROOM, Running, gateway_config, running_gateway
from tests.servers.fake_responses import (
    FakeResponses,
    apply_patch,
    message,
    request_user_input,
    shell,
)

pytestmark = [pytest.mark.real_agent("codex"), pytest.mark.timeout(90)]

# what codex 0.171 offers for an escalated command ("decline" is accepted though not listed)
COMMAND_ACTIONS = [
    "Allow once",
    "Always allow commands like this",
    "Deny",
    "Deny and stop the turn",
]
SESSION_FILES = "Allow these files for this session"
FILE_ACTIONS = ["Allow once", SESSION_FILES, "Deny", "Deny and stop the turn"]
QUESTIONS_FEATURE = ("default_mode_request_user_input",)


def assert_answered(
    record: Interaction, actor: Actor, since: datetime, action_id: str | None
) -> None:
    """The three facts of a decision that reached the agent and that it confirmed."""
    assert record.state is InteractionState.RESOLVED
    assert record.decision is not None
    assert record.decision.actor == actor
    assert record.decision.decision.action_id == action_id
    assert record.delivery is not None
    assert record.delivery.outcome is DeliveryOutcome.OK
    assert record.resolution is not None
    assert (record.resolution.how, record.resolution.by) == (Resolution.ANSWERED, "agent")
    assert since <= record.decision.at <= record.delivery.at <= record.resolution.at


async def click(
    gw: Running, asked: Asked, label: str, actor: Actor = ALICE
) -> tuple[Ack, datetime]:
    since = datetime.now(UTC)
    return await gw.memory.click(ROOM, actor, asked.token(label)), since


async def status(gw: Running) -> str:
    """What /status answers in the room, as the person reads it."""
    before = len(gw.memory.texts(ROOM))
    await gw.memory.say(ROOM, ALICE, "/status")
    return await gw.memory.wait_for(
        lambda: next((t for t in gw.memory.texts(ROOM)[before:] if t.startswith("Session")), None)
    )


# --- command approvals ---------------------------------------------------------------------


async def ask_to_touch(
    gw: Running, fake: FakeResponses, prefix_rule: list[str] | None = None
) -> Asked:
    steps = [shell("touch hello.txt", escalated=True, prefix_rule=prefix_rule), DONE]
    asked = await ask(gw, fake, steps, "please create hello.txt")
    assert asked.first.title == "Run a command"
    assert asked.first.status_line == "Waiting for a decision"
    [code] = [b for b in asked.first.blocks if isinstance(b, CodeBlock)]
    assert "touch hello.txt" in code.code
    return asked


async def test_accepted_command_runs_and_every_fact_is_recorded(
    codex_bin: str, codex_home: CodexHome, fake_model: FakeResponses, tmp_path: Path
) -> None:
    async with running_gateway(gateway_config(codex_bin, codex_home, tmp_path / "data")) as gw:
        asked = await ask_to_touch(gw, fake_model)
        assert asked.labels == COMMAND_ACTIONS
        ack, since = await click(gw, asked, "Allow once")
        assert ack == Ack(text="Approved: Allow once. Sent to the agent.", accepted=True)
        record = await settles(
            gw, asked, rf'Approved \("Allow once"\) by Alice at {WHEN} · sent to the agent · done'
        )
        await gw.text_where(lambda text: "Done." in text)
        assert len(gw.cards()) == 1  # one card, edited; never a second one
        assert count_rows(gw, "deliveries", record.id) == 1
    assert_answered(record, ALICE, since, "accept")
    assert (codex_home.workspace / "hello.txt").exists()
    assert "Process exited with code 0" in told(fake_model)


async def test_declined_command_is_not_run_and_the_model_is_told(
    codex_bin: str, codex_home: CodexHome, fake_model: FakeResponses, tmp_path: Path
) -> None:
    # 0.171 does not list "decline" for commands, yet takes it: the gateway offers "Deny"
    async with running_gateway(gateway_config(codex_bin, codex_home, tmp_path / "data")) as gw:
        asked = await ask_to_touch(gw, fake_model)
        ack, since = await click(gw, asked, "Deny")
        assert ack == Ack(text="Denied. Sent to the agent.", accepted=True)
        record = await settles(
            gw, asked, rf'Denied \("Deny"\) by Alice at {WHEN} · sent to the agent · done'
        )
        await gw.text_where(lambda text: "Done." in text)  # the turn went on
        # the command's line stays where it started, before the card, marked declined
        await gw.text_where(lambda text: "(declined)" in text)
    assert_answered(record, ALICE, since, "decline")
    assert not (codex_home.workspace / "hello.txt").exists()
    assert "rejected by user" in told(fake_model)


async def test_deny_and_stop_interrupts_the_turn_and_the_model_hears_nothing(
    codex_bin: str, codex_home: CodexHome, fake_model: FakeResponses, tmp_path: Path
) -> None:
    async with running_gateway(gateway_config(codex_bin, codex_home, tmp_path / "data")) as gw:
        asked = await ask_to_touch(gw, fake_model)
        ack, since = await click(gw, asked, "Deny and stop the turn")
        assert ack == Ack(
            text="Denied and stopped. Sent to the agent.",
            accepted=True,
        )
        record = await settles(
            gw,
            asked,
            rf'Denied and stopped \("Deny and stop the turn"\) by Alice at {WHEN}'
            " · sent to the agent · done",
        )
        await gw.text_where(lambda text: text == "⏹ The turn was interrupted.")
    assert_answered(record, ALICE, since, "cancel")
    assert not (codex_home.workspace / "hello.txt").exists()
    assert len(fake_model.model_requests()) == 1  # the model never heard back in that turn


async def test_always_allowed_prefix_is_not_asked_again_and_status_lists_the_rule(
    codex_bin: str, codex_home: CodexHome, fake_model: FakeResponses, tmp_path: Path
) -> None:
    async with running_gateway(gateway_config(codex_bin, codex_home, tmp_path / "data")) as gw:
        asked = await ask_to_touch(gw, fake_model, ["touch"])
        assert asked.labels == [
            "Allow once",
            "Always allow commands like this",
            "Deny",
            "Deny and stop the turn",
        ]
        ack, since = await click(gw, asked, "Always allow commands like this")
        assert ack == Ack(
            text="Approved: Always allow commands like this. Sent to the agent.",
            accepted=True,
        )
        record = await settles(
            gw,
            asked,
            rf'Approved \("Always allow commands like this"\) by Alice at {WHEN}'
            " · sent to the agent · done",
        )
        await gw.text_where(lambda text: "Done." in text)
        fake_model.enqueue([shell("touch second.txt", escalated=True, prefix_rule=["touch"]), DONE])
        await gw.memory.say(ROOM, ALICE, "now create second.txt")
        await gw.memory.wait_for(lambda: sum("Done." in t for t in gw.memory.texts(ROOM)) == 2)
        assert len(gw.cards()) == 1  # the second command was not asked
        shown = await status(gw)
    assert_answered(record, ALICE, since, "rule")
    assert (codex_home.workspace / "second.txt").exists()
    assert "Process exited with code 0" in told(fake_model)
    # the rule it added, whole
    assert (
        "Grants: \n  · Always allow commands like this `touch`: Run a command (always, by Alice)"
        in shown
    )


async def test_stop_while_an_approval_waits_withdraws_it_and_a_late_click_is_refused(
    codex_bin: str, codex_home: CodexHome, fake_model: FakeResponses, tmp_path: Path
) -> None:
    async with running_gateway(gateway_config(codex_bin, codex_home, tmp_path / "data")) as gw:
        asked = await ask_to_touch(gw, fake_model)
        await gw.memory.say(ROOM, ALICE, "/stop")
        stopped = (
            rf"Stopped by Alice at {WHEN} before anyone answered · nothing was sent to the agent"
        )
        record = await settles(gw, asked, stopped)
        await gw.text_where(lambda text: text == "⏹ Stopped by Alice.")
        ack, _ = await click(gw, asked, "Allow once")
        assert not ack.accepted
        assert ack.text.startswith("This request is no longer open. Stopped by Alice at ")
        notices = [t for t in gw.memory.texts(ROOM) if t.startswith("⏹")]
        assert notices == ["⏹ Stopped by Alice."]
        assert count_rows(gw, "decisions", record.id) == 0
    assert record.state is InteractionState.CANCELLED
    assert record.decision is None
    assert record.delivery is not None and record.delivery.outcome is DeliveryOutcome.SKIPPED
    assert record.resolution is not None
    assert record.resolution.how is Resolution.STOPPED
    assert record.resolution.by == ALICE.key()
    assert not (codex_home.workspace / "hello.txt").exists()
    assert len(fake_model.model_requests()) == 1


# --- file changes ---------------------------------------------------------------------------


async def ask_to_patch(gw: Running, fake: FakeResponses, *patches: str) -> Asked:
    steps = [apply_patch(patch) for patch in patches]
    asked = await ask(gw, fake, [*steps, DONE], "please write the file")
    assert asked.first.title == "Apply file changes"
    assert asked.labels == FILE_ACTIONS
    return asked


async def test_accepted_file_change_is_written(
    codex_bin: str, codex_home: CodexHome, fake_model: FakeResponses, tmp_path: Path
) -> None:
    config = gateway_config(codex_bin, codex_home, tmp_path / "data", sandbox="read-only")
    async with running_gateway(config) as gw:
        asked = await ask_to_patch(gw, fake_model, add_file("patched.txt", "patched by the model"))
        [diff] = [b for b in asked.first.blocks if isinstance(b, DiffBlock)]
        assert "patched by the model" in diff.diff
        assert any(path.endswith("patched.txt") for path in diff.paths)
        ack, since = await click(gw, asked, "Allow once")
        assert ack == Ack(text="Approved: Allow once. Sent to the agent.", accepted=True)
        record = await settles(
            gw, asked, rf'Approved \("Allow once"\) by Alice at {WHEN} · sent to the agent · done'
        )
        await gw.text_where(lambda text: "Done." in text)
    assert_answered(record, ALICE, since, "accept")
    assert (codex_home.workspace / "patched.txt").read_text() == "patched by the model\n"
    assert told(fake_model).startswith("Exit code: 0")


async def test_file_changes_allowed_for_the_session_are_not_asked_again(
    codex_bin: str, codex_home: CodexHome, fake_model: FakeResponses, tmp_path: Path
) -> None:
    update = "*** Begin Patch\n*** Update File: one.txt\n@@\n-hello\n+hello again\n*** End Patch\n"
    config = gateway_config(codex_bin, codex_home, tmp_path / "data", sandbox="read-only")
    async with running_gateway(config) as gw:
        asked = await ask_to_patch(gw, fake_model, add_file("one.txt"), update)
        ack, since = await click(gw, asked, SESSION_FILES)
        assert ack == Ack(text=f"Approved: {SESSION_FILES}. Sent to the agent.", accepted=True)
        record = await settles(
            gw,
            asked,
            rf'Approved \("{SESSION_FILES}"\) by Alice at {WHEN} · sent to the agent · done',
        )
        await gw.text_where(lambda text: "Done." in text)
        assert len(gw.cards()) == 1  # the second patch was applied without asking
        shown = await status(gw)
    assert_answered(record, ALICE, since, "session")
    assert (codex_home.workspace / "one.txt").read_text() == "hello again\n"
    assert "Policy in force: approval_policy = on-request, approvals_reviewer = user" in shown
    assert "sandbox = read-only" in shown
    assert f"Grants: \n  · {SESSION_FILES}: Apply file changes (session, by Alice)" in shown
    assert "Open requests: none" in shown


async def test_declined_file_change_is_not_written_and_the_model_is_told(
    codex_bin: str, codex_home: CodexHome, fake_model: FakeResponses, tmp_path: Path
) -> None:
    config = gateway_config(codex_bin, codex_home, tmp_path / "data", sandbox="read-only")
    async with running_gateway(config) as gw:
        asked = await ask_to_patch(gw, fake_model, add_file("patched.txt"))
        ack, since = await click(gw, asked, "Deny")
        assert ack == Ack(text="Denied. Sent to the agent.", accepted=True)
        record = await settles(
            gw, asked, rf'Denied \("Deny"\) by Alice at {WHEN} · sent to the agent · done'
        )
        await gw.text_where(lambda text: "Done." in text)
        shown = await status(gw)
    assert_answered(record, ALICE, since, "decline")
    assert not (codex_home.workspace / "patched.txt").exists()
    assert told(fake_model) == "patch rejected by user"
    assert "Grants: none" in shown


# --- questions ------------------------------------------------------------------------------


def question(qid: str, header: str, text: str, *labels: str, **extra: object) -> dict[str, object]:
    options = [{"label": label, "description": f"use {label}"} for label in labels]
    return {"id": qid, "header": header, "question": text, "options": options, **extra}


async def test_questions_answered_in_the_form_with_an_option_and_free_text(
    codex_bin: str, codex_home: CodexHome, fake_model: FakeResponses, tmp_path: Path
) -> None:
    questions = [
        question("color", "Color", "Which color should I use?", "Red", "Blue"),
        question("name", "Name", "What should the file be called?", "notes.txt", "notes.md"),
    ]
    config = gateway_config(codex_bin, codex_home, tmp_path / "data", features=QUESTIONS_FEATURE)
    async with running_gateway(config) as gw:
        asked = await ask(gw, fake_model, [request_user_input(questions), DONE], "ask me first")
        form = asked.first.form
        assert form is not None
        assert asked.first.actions == ()  # codex offers answers, not buttons
        assert asked.first.status_line == "Waiting for an answer"
        shown = [(q.question.id, [o.label for o in q.question.options]) for q in form.questions]
        assert shown == [("color", ["Red", "Blue"]), ("name", ["notes.txt", "notes.md"])]
        assert all(q.question.allow_other for q in form.questions)
        [blue] = [o.id for o in form.questions[0].question.options if o.label == "Blue"]
        answers = {
            "color": Answer(option_ids=(blue,)),
            "name": Answer(other="call it shopping-list.txt"),
        }
        since = datetime.now(UTC)
        ack = await gw.memory.submit(ROOM, ALICE, form.submit_token, answers)
        assert ack == Ack(text="Answer sent to the agent.", accepted=True)
        record = await settles(
            gw, asked, rf"Answered by Alice at {WHEN} · sent to the agent · done"
        )
        [fields] = [b for b in asked.now.blocks if isinstance(b, FieldsBlock)]
        assert fields.fields == (("Color", "Blue"), ("Name", "call it shopping-list.txt"))
        await gw.text_where(lambda text: "Done." in text)
    assert_answered(record, ALICE, since, None)
    assert record.decision is not None and record.decision.decision.answers == answers
    model_was_told = told(fake_model)
    assert '"color":{"answers":["Blue"]}' in model_was_told
    assert '"name":{"answers":["user_note: call it shopping-list.txt"]}' in model_was_told


async def test_a_single_question_is_answered_by_its_option_button(
    codex_bin: str, codex_home: CodexHome, fake_model: FakeResponses, tmp_path: Path
) -> None:
    questions = [question("color", "Color", "Which color should I use?", "Red", "Blue")]
    config = gateway_config(codex_bin, codex_home, tmp_path / "data", features=QUESTIONS_FEATURE)
    async with running_gateway(config) as gw:
        asked = await ask(gw, fake_model, [request_user_input(questions), DONE], "ask me first")
        assert asked.first.form is not None
        [color] = asked.first.form.questions
        ack = await gw.memory.click(ROOM, ALICE, color.option_tokens[0])  # "Red"
        assert ack == Ack(text="Answer sent to the agent.", accepted=True)
        await settles(gw, asked, rf"Answered by Alice at {WHEN} · sent to the agent · done")
        await gw.text_where(lambda text: "Done." in text)
    assert '"color":{"answers":["Red"]}' in told(fake_model)


async def test_a_secret_answer_is_taken_only_in_a_private_form_and_never_shown_or_stored(
    codex_bin: str, codex_home: CodexHome, fake_model: FakeResponses, tmp_path: Path
) -> None:
    # codex 0.171 passes the model's "isSecret" through to requestUserInput
    secret = "hunter2-correct-horse"
    questions = [
        question("color", "Color", "Which color should I use?", "Red", "Blue"),
        question("token", "Deploy token", "Paste the deploy token", "I have none", isSecret=True),
    ]
    config = gateway_config(codex_bin, codex_home, tmp_path / "data", features=QUESTIONS_FEATURE)
    async with running_gateway(config) as gw:
        # the model's reply does not repeat what it was told (DONE would echo the secret)
        steps = [request_user_input(questions), message("Deployed.")]
        asked = await ask(gw, fake_model, steps, "deploy it")
        form = asked.first.form
        assert form is not None
        assert [q.question.secret for q in form.questions] == [False, True]
        answers = {"color": Answer(option_ids=("0",)), "token": Answer(other=secret)}

        refused = await gw.memory.submit(ROOM, ALICE, form.submit_token, answers)
        assert refused == Ack(
            text="A secret answer is only taken in a private form.", accepted=False
        )
        before = len(gw.memory.texts(ROOM))
        await gw.memory.say(ROOM, ALICE, f"/answer {asked.interaction.id} Red\n{secret}")
        said = await gw.memory.wait_for(lambda: gw.memory.texts(ROOM)[before:] or None)
        assert said == ["a secret answer is only taken in a private chat or form"]
        still = await interaction(gw, asked.interaction.id)
        assert (still.state, still.decision, still.delivery) == (
            InteractionState.PENDING,
            None,
            None,
        )
        assert asked.shown.edits == 0  # the form still waits, unchanged
        assert len(fake_model.model_requests()) == 1  # the agent was told nothing

        since = datetime.now(UTC)
        ack = await gw.memory.submit(ROOM, ALICE, form.submit_token, answers, private=True)
        assert ack == Ack(text="Answer sent to the agent.", accepted=True)
        record = await settles(
            gw, asked, rf"Answered by Alice at {WHEN} · sent to the agent · done"
        )
        [fields] = [b for b in asked.now.blocks if isinstance(b, FieldsBlock)]
        assert fields.fields == (("Color", "Red"), ("Deploy token", "(secret, not shown)"))
        await gw.text_where(lambda text: "Deployed." in text)
        audit = await gw.gateway.store.audit.entries(session_id=(await session_of(gw)).id)
        everything_shown = [repr(m.versions) for m in gw.memory.messages()]
    assert_answered(record, ALICE, since, None)
    assert record.decision is not None
    assert record.decision.decision.answers["token"] == Answer(other=SECRET_MARKER)
    assert f'"token":{{"answers":["user_note: {secret}"]}}' in told(fake_model)
    assert not any(secret in text for text in everything_shown)
    assert not any(secret in repr(entry) for entry in audit)
    for stored in (tmp_path / "data").iterdir():  # the database, its WAL, the key
        assert secret.encode() not in stored.read_bytes(), stored.name
