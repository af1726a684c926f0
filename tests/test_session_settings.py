"""``/model`` and ``/mode`` decided purely (issue 31): the project's ``models`` and
``allowed_modes`` are the whole lists a person may pick from; a name outside them, or no list
at all, changes nothing and says why; a looser mode is only ever asked for."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from gateway.cards import ButtonStyle
from gateway.config.model import AgentOptions, ApprovalPolicy, ProjectConfig, SandboxMode
from gateway.domain import (
    Actor,
    AgentKind,
    Decision,
    Effect,
    InteractionOrigin,
    InteractionState,
    Scope,
)
from gateway.errors import ConfigError
from gateway.interactions.machine import DecisionFact, Interaction
from gateway.interactions.setting_change import (
    SettingChange,
    accepted,
    change_of,
    setting_request,
)
from gateway.sessions.model_buttons import (
    NOT_ALLOWED,
    NOT_VALID,
    STALE,
    click_refusal,
    is_model_token,
    model_card,
    parse_model_token,
    verify_model_token,
)
from gateway.sessions.permission_modes import choose_mode
from gateway.sessions.session_settings import choose_model
from gateway.store.session_settings import ChosenSettings
from platforms.registry import parse_config
from tests.session_records import session_record


def project(*, model: str | None = "gpt-5.5", models: tuple[str, ...] = ()) -> ProjectConfig:
    return ProjectConfig(
        work_dir=Path("/work"),
        agent=AgentKind.CODEX_APP_SERVER,
        agent_options=AgentOptions(model=model, models=models),
    )


WHEN = datetime(2026, 1, 1, tzinfo=UTC)
BOB = Actor(platform="memory", user_id="bob", display="Bob")
LISTED = project(models=("gpt-5.5", "gpt-5.4-mini"))


def test_a_listed_model_is_chosen_whatever_its_case() -> None:
    choice = choose_model(LISTED, None, " GPT-5.4-MINI ")
    assert choice.chosen == "gpt-5.4-mini"
    assert choice.text == "Model: gpt-5.4-mini, from the next turn."


def test_without_a_name_the_model_and_the_list_are_shown() -> None:
    choice = choose_model(LISTED, "gpt-5.4-mini", "")
    assert choice.chosen is None
    assert choice.text.splitlines() == [
        "Model: gpt-5.4-mini (chosen with /model)",
        "Choose one of:",
        "  · /model gpt-5.5",
        "  · /model gpt-5.4-mini",
    ]


def test_a_name_not_listed_changes_nothing_and_is_echoed_short_and_printable() -> None:
    choice = choose_model(LISTED, None, "x\x07" + "y" * 2000)
    assert choice.chosen is None
    assert choice.text.startswith("“x?" + "y" * 62 + "…” is not one of this project's models")
    assert "nothing changed" in choice.text


def test_the_model_in_use_is_not_chosen_again() -> None:
    assert choose_model(LISTED, None, "gpt-5.5").chosen is None
    assert choose_model(LISTED, "gpt-5.4-mini", "gpt-5.4-mini").chosen is None


def test_a_model_the_agent_does_not_offer_changes_nothing_and_is_marked_in_the_list() -> None:
    offered = ("GPT-5.5", "gpt-6-sol")  # what the agent said, in any case
    refused = choose_model(LISTED, None, "gpt-5.4-mini", offered=offered)
    assert refused.chosen is None
    assert refused.text == (
        "codex-app-server does not offer gpt-5.4-mini (it said which models it offers as it "
        "started); nothing changed. Model: gpt-5.5 (the project's)."
    )
    listing = choose_model(LISTED, None, "", offered=offered).text.splitlines()
    assert listing[-2:] == [
        "  · /model gpt-5.5",
        "  · /model gpt-5.4-mini (not offered by codex-app-server)",
    ]
    # an agent that never said: the project's list is trusted
    assert choose_model(LISTED, None, "gpt-5.4-mini", offered=None).chosen == "gpt-5.4-mini"


KEY = b"k" * 32


def test_model_buttons_mark_the_model_in_force_and_leave_out_what_the_agent_lacks() -> None:
    models = ("gpt-5.5", "gpt-5.4-mini", "gpt-9")
    card = model_card(
        KEY,
        "sess123456",
        models,
        title="Model: gpt-5.5",
        now="gpt-5.5",
        offered=("gpt-5.5", "gpt-5.4-mini"),
        agent="codex-app-server",
    )
    assert [(a.label, a.style) for a in card.actions] == [
        ("✓ gpt-5.5", ButtonStyle.PRIMARY),
        ("gpt-5.4-mini", ButtonStyle.DEFAULT),
    ]
    assert "Not offered by codex-app-server: gpt-9" in str(card.blocks)
    token = card.actions[1].token
    assert len(token.encode()) <= 64 and is_model_token(token)
    clicked = parse_model_token(token)
    assert clicked is not None
    assert verify_model_token(KEY, clicked, models) == "gpt-5.4-mini"
    # the list changed in the config since: that place names another model now
    assert verify_model_token(KEY, clicked, ("gpt-5.5", "o3")) is None
    assert verify_model_token(b"x" * 32, clicked, models) is None  # another gateway's key
    assert parse_model_token(token + "x") is None


def test_a_model_click_is_checked_for_its_token_then_who_then_whether_the_list_is_current() -> None:
    mine = session_record(created_at=WHEN)
    other = replace(mine, id="s2")
    assert click_refusal(model=None, session=mine, here=mine, may=True) == NOT_VALID
    assert click_refusal(model="m", session=mine, here=mine, may=False) == NOT_ALLOWED
    assert click_refusal(model="m", session=mine, here=other, may=True) == STALE
    assert click_refusal(model="m", session=mine, here=None, may=True) == STALE
    closed = replace(mine, closed_at=WHEN)
    assert click_refusal(model="m", session=mine, here=closed, may=True) == STALE
    assert click_refusal(model="m", session=mine, here=mine, may=True) is None


@pytest.mark.parametrize("args", ["", "gpt-5.4-mini"])
def test_without_models_in_config_model_only_says_which_runs(args: str) -> None:
    choice = choose_model(project(), None, args)
    assert choice.chosen is None
    assert choice.text == (
        "Model: gpt-5.5 (the project's)\n"
        "This project lists no models to choose from (models in its config): nothing changes."
    )
    assert choose_model(project(model=None), None, args).text.startswith(
        "Model: the agent's own default\n"
    )


@pytest.mark.parametrize("agent", ["codex-exec"])
def test_models_is_refused_where_the_gateway_cannot_set_a_turn_s_model(agent: str) -> None:
    text = f"""
[projects.p]
work_dir = "/tmp"
agent = "{agent}"
models = ["a", "b"]

[projects.p.auth.memory]
allow_from = ["*"]

[platforms.memory]
"""
    with pytest.raises(ConfigError, match="models: does not apply to agent"):
        parse_config(text, env={})


def test_an_opencode_model_is_named_provider_slash_model() -> None:
    text = """
[projects.p]
work_dir = "/tmp"
agent = "opencode"
models = ["fake/fake-mini", "gpt-5"]

[projects.p.auth.memory]
allow_from = ["*"]

[platforms.memory]
"""
    with pytest.raises(ConfigError, match='"gpt-5": OpenCode names a model "provider/model"'):
        parse_config(text, env={})
    fixed = parse_config(text.replace('"gpt-5"', '"fake/gpt-5"'), env={})
    assert fixed.projects["p"].agent_options.models == ("fake/fake-mini", "fake/gpt-5")


MODES = project(models=()).model_copy(
    update={
        "agent_options": AgentOptions(
            allowed_modes=(
                ApprovalPolicy.UNTRUSTED,
                ApprovalPolicy.ON_REQUEST,
                SandboxMode.READ_ONLY,
                SandboxMode.WORKSPACE_WRITE,
            )
        )
    }
)


def test_a_tighter_mode_is_chosen_and_a_looser_one_needs_an_approver() -> None:
    tighter = choose_mode(MODES, ChosenSettings(), "Read-Only")
    assert (tighter.setting, tighter.value, tighter.loosens) == ("sandbox", "read-only", False)
    assert tighter.text == "Sandbox: read-only, from the next turn."
    looser = choose_mode(MODES, ChosenSettings(sandbox="read-only"), "workspace-write")
    assert (looser.setting, looser.value, looser.loosens) == ("sandbox", "workspace-write", True)
    assert looser.text.startswith("Loosening the sandbox from read-only to workspace-write")
    fewer_questions = choose_mode(MODES, ChosenSettings(approval_policy="untrusted"), "on-request")
    assert fewer_questions.loosens


def test_a_mode_not_listed_or_in_force_changes_nothing() -> None:
    assert choose_mode(MODES, ChosenSettings(), "never").setting is None
    assert choose_mode(MODES, ChosenSettings(), "sudo").text.startswith(
        "“sudo” is not one of this project's modes; nothing changed."
    )
    assert choose_mode(MODES, ChosenSettings(), "on-request").text.endswith("nothing to change.")
    listing = choose_mode(MODES, ChosenSettings(sandbox="read-only"), "").text.splitlines()
    assert listing == [
        "Mode: approval policy on-request, sandbox read-only",
        "Choose one of:",
        "  · /mode untrusted",
        "  · /mode on-request (in force)",
        "  · /mode read-only (in force)",
        "  · /mode workspace-write (asks an approver)",
    ]
    assert choose_mode(project(), ChosenSettings(), "read-only").text.endswith(
        "This project lists no modes to choose from (allowed_modes in its config): nothing changes."
    )


def test_a_dangerous_mode_needs_allow_dangerous() -> None:
    text = """
[projects.p]
work_dir = "/tmp"
agent = "codex-app-server"
allowed_modes = ["read-only", "danger-full-access"]

[projects.p.auth.memory]
allow_from = ["*"]

[platforms.memory]
"""
    with pytest.raises(ConfigError, match='"danger-full-access" lets the agent act'):
        parse_config(text, env={})
    allowed = parse_config(
        text.replace('"codex-app-server"', '"codex-app-server"\nallow_dangerous = true'), env={}
    )
    assert allowed.projects["p"].agent_options.allowed_modes[-1] == "danger-full-access"


def test_a_setting_change_card_names_what_it_applies_and_what_it_keeps() -> None:
    request = setting_request("sandbox", "workspace-write", now="read-only", asker="Bob")
    assert request.origin is InteractionOrigin.SETTING
    assert request.title == "Loosen the sandbox: read-only → workspace-write?"
    assert [(a.label, a.effect, a.scope) for a in request.actions] == [
        ("Allow for this session", Effect.ALLOW, Scope.SESSION),
        ("Deny", Effect.DENY, Scope.ONCE),
    ]
    again = setting_request("sandbox", "workspace-write", now="read-only", asker="Bob")
    assert again.native_key != request.native_key  # asked again after a refusal: a new one
    asked = Interaction(
        id="i1",
        session_id="s1",
        runtime_epoch=1,
        turn_id=None,
        native_key=request.native_key,
        origin=request.origin,
        kind=request.kind,
        title=request.title,
        summary=request.summary,
        detail=request.detail,
        actions=request.actions,
        questions=(),
        state=InteractionState.PENDING,
        version=1,
        created_at=WHEN,
        updated_at=WHEN,
    )
    assert change_of(asked) == SettingChange(
        setting="sandbox", value="workspace-write", before="read-only"
    )
    assert not accepted(asked)
    for action, applies in zip(request.actions, (True, False), strict=True):
        fact = DecisionFact(actor=BOB, decision=Decision(action_id=action.id), at=WHEN)
        assert accepted(replace(asked, decision=fact)) is applies
    assert change_of(replace(asked, origin=InteractionOrigin.AGENT)) is None


@pytest.mark.parametrize(
    ("agent", "modes", "refusal"),
    [
        ("claude-code", '["plan", "read-only"]', '"read-only" is no mode of claude-code'),
        ("codex-app-server", '["read-only", "plan"]', '"plan" is no mode of codex-app-server'),
        ("claude-code", '["plan", "dontAsk"]', '"dontAsk" is neither tighter nor looser'),
        ("codex-exec", '["read-only"]', "allowed_modes: does not apply to agent codex-exec"),
    ],
)
def test_allowed_modes_are_the_agent_s_own(agent: str, modes: str, refusal: str) -> None:
    text = f"""
[projects.p]
work_dir = "/tmp"
agent = "{agent}"
allowed_modes = {modes}

[projects.p.auth.memory]
allow_from = ["*"]

[platforms.memory]
"""
    with pytest.raises(ConfigError, match=refusal):
        parse_config(text, env={})


def _own_modes_project(agent: AgentKind) -> ProjectConfig:
    return ProjectConfig(
        work_dir=Path("/work"),
        agent=agent,
        agent_options=AgentOptions(allowed_modes=("read-only", "auto", "full-access")),
    )


def test_an_acp_agents_modes_are_its_own_ordered_by_the_project_and_checked_against_it() -> None:
    acp = _own_modes_project(AgentKind.ACP)
    offered = ("read-only", "auto")
    unsaid = choose_mode(acp, ChosenSettings(), "read-only")
    assert unsaid.setting is None and "has not said which modes it offers" in unsaid.text
    lacking = choose_mode(acp, ChosenSettings(), "full-access", agent_modes=offered)
    assert lacking.setting is None
    assert lacking.text.startswith("acp does not offer the mode full-access; nothing changed.")
    tighter = choose_mode(
        acp, ChosenSettings(), "read-only", agent_modes=offered, agent_mode="auto"
    )
    assert (tighter.setting, tighter.value, tighter.loosens) == (
        "permission_mode",
        "read-only",
        False,
    )
    looser = choose_mode(
        acp, ChosenSettings(permission_mode="read-only"), "auto", agent_modes=offered
    )
    assert looser.loosens and looser.before == "read-only"
    # a mode in force the project's order does not place is left only by an approver
    unplaced = choose_mode(acp, ChosenSettings(), "read-only", agent_modes=offered, agent_mode="x")
    assert unplaced.loosens


def test_opencodes_agents_are_its_modes_without_a_list_of_them() -> None:
    opencode = _own_modes_project(AgentKind.OPENCODE)
    choice = choose_mode(opencode, ChosenSettings(), "read-only", agent_mode="auto")
    assert (choice.value, choice.loosens) == ("read-only", False)
    listing = choose_mode(opencode, ChosenSettings(), "", agent_mode="auto").text.splitlines()
    assert listing == [
        "Mode: permission mode auto",
        "Choose one of:",
        "  · /mode read-only",
        "  · /mode auto (in force)",
        "  · /mode full-access (asks an approver)",
    ]
