"""Every request of every recorded agent, on every platform's card (issue 29): what a person
reads before a click tells them what the click grants.

For each request the recordings hold (tests/card_samples.py: Codex, Claude Code, OpenCode and
codex-acp, through their real codecs) and each platform's payload (Telegram, Slack, Discord,
the console's HTML): the buttons' labels are distinct; every button whose label cannot say
all it grants (shortened, beyond this once, a rule) has its explanation on the card's face;
an action that adds a rule has the rule's text there (and in Slack's confirm dialog); no
internal word is on the face; the agent's reason is shown where the agent gives one; and the
card's facts are each said once.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import replace
from pathlib import Path

import pytest

from adapters.codex_requests import open_command_approval
from gateway.cards import ButtonStyle
from gateway.domain import (
    Action,
    Command,
    Effect,
    FileChange,
    InteractionKind,
    InteractionRequest,
    Network,
    Permissions,
    Scope,
)
from tests.card_samples import (
    INTERACTION_ID,
    PLATFORMS,
    SESSION_ID,
    Drawn,
    Sample,
    draw,
    orphaned,
    payload_files,
    pending,
    samples,
)

SAMPLES = samples()
CASES = [
    pytest.param(sample, platform, id=f"{sample.name}-{platform}")
    for sample in SAMPLES
    for platform in PLATFORMS
]
# words of the gateway's own machinery a person has no use for on a card's face
INTERNAL = re.compile(r"\bepoch\b|\bruntime\b|\blocal:|\brpc:|\bctl:|\btok-", re.IGNORECASE)


def _squash(text: str) -> str:
    """Text as read: spaces squashed, and the backticks of the agent's inline code left
    out (a platform draws them as code, or shows them)."""
    return re.sub(r"\s+", " ", text.replace("`", "")).strip()


def _on_face(drawn: Drawn, said: str) -> bool:
    return _squash(said) in _squash(drawn.text)


def test_the_recordings_hold_every_kind_of_request_of_every_agent() -> None:
    kinds = {(sample.agent, sample.request.kind) for sample in SAMPLES}
    assert {
        ("codex", InteractionKind.APPROVAL),
        ("codex", InteractionKind.QUESTION),
        ("codex", InteractionKind.PLAN),
        ("claude", InteractionKind.APPROVAL),
        ("claude", InteractionKind.QUESTION),
        ("claude", InteractionKind.PLAN),
        ("opencode", InteractionKind.APPROVAL),
        ("opencode", InteractionKind.QUESTION),
        ("codex-acp", InteractionKind.APPROVAL),
    } <= kinds


@pytest.mark.parametrize(("sample", "platform"), CASES)
def test_labels_are_distinct(sample: Sample, platform: str) -> None:
    drawn = draw(pending(sample.request), platform)
    assert len(drawn.labels) == len(set(drawn.labels)), drawn.labels


@pytest.mark.parametrize(("sample", "platform"), CASES)
def test_what_each_button_grants_is_on_the_card(sample: Sample, platform: str) -> None:
    drawn = draw(pending(sample.request), platform)
    for action in drawn.card.actions:
        assert action.label in drawn.labels
        if action.explain_on_card:
            assert _on_face(drawn, action.explanation), (action.label, drawn.text)
        if action.rule:
            assert _on_face(drawn, action.rule), (action.rule, drawn.text)
    for action in sample.request.actions:
        # a label the button could not hold is said whole in the card's text
        whole = action.label.replace("`", "")
        shown = any(whole in label for label in drawn.labels)
        answered_by_form = bool(sample.request.questions) and action.effect.value == "allow"
        assert shown or answered_by_form or _on_face(drawn, whole), (whole, drawn.text)


@pytest.mark.parametrize("sample", SAMPLES, ids=[sample.name for sample in SAMPLES])
def test_slacks_confirm_dialog_says_what_lasts(sample: Sample) -> None:
    """Only Slack asks again, in a dialog, before a grant beyond this once."""
    drawn = draw(pending(sample.request), "slack")
    confirmed = [
        a
        for a in drawn.card.actions
        if (a.effect is Effect.ALLOW and a.style is ButtonStyle.DEFAULT)
        or (a.effect is not Effect.ALLOW and (a.scope is Scope.ALWAYS or a.rule))
    ]
    assert len(drawn.confirms) == len(confirmed)
    for action, text in zip(confirmed, drawn.confirms, strict=True):
        assert text != action.label  # the dialog says more than the button did
        assert action.explanation[:60] in text
        if action.rule and len(action.rule) < 200:
            assert action.rule in text


@pytest.mark.parametrize(("sample", "platform"), CASES)
def test_no_internal_word_is_on_the_cards_face(sample: Sample, platform: str) -> None:
    for item in (pending(sample.request), orphaned(pending(sample.request))):
        drawn = draw(item, platform)
        assert not INTERNAL.search(drawn.text), INTERNAL.search(drawn.text)
        assert INTERACTION_ID not in drawn.text and SESSION_ID not in drawn.text
        native = sample.request.native_key or ""
        assert not native or native not in drawn.text


def _reason(sample: Sample) -> str | None:
    match sample.request.detail:
        case Command(reason=reason) | FileChange(reason=reason) | Network(reason=reason):
            return reason
        case Permissions(reason=reason):
            return reason
    return None


REASONED = [
    pytest.param(sample, platform, id=f"{sample.name}-{platform}")
    for sample in SAMPLES
    if _reason(sample)
    for platform in PLATFORMS
]


def test_the_agents_reason_is_carried_for_every_agent() -> None:
    """Every agent whose requests carry a reason has a recorded one with it, codex-acp's
    ``rawInput.reason`` included."""
    reasoned = [sample.name for sample in SAMPLES if _reason(sample)]
    for agent in ("codex-acp-", "claude-", "codex-"):
        assert any(name.startswith(agent) for name in reasoned), (agent, reasoned)


@pytest.mark.parametrize(
    ("sample", "platform"),
    [case for case in REASONED if case.values[1] in ("telegram", "console")],
)
def test_the_agents_markdown_in_its_reason_is_drawn_not_shown_raw(
    sample: Sample, platform: str
) -> None:
    """Telegram and the console draw the agent's inline code as code: no backtick is left
    to read (Slack and Discord draw the same Markdown from the text itself)."""
    drawn = draw(pending(sample.request), platform)
    assert "`" not in drawn.text, drawn.text


@pytest.mark.parametrize(("sample", "platform"), REASONED)
def test_the_agents_reason_is_shown_once(sample: Sample, platform: str) -> None:
    reason = _reason(sample)
    assert reason
    drawn = draw(pending(sample.request), platform)
    assert _squash(drawn.text).count(_squash(reason)) == 1, drawn.text


@pytest.mark.parametrize(("sample", "platform"), CASES)
def test_each_fact_is_said_once(sample: Sample, platform: str) -> None:
    drawn = draw(pending(sample.request), platform)
    face = _squash(drawn.text)
    request = sample.request
    if request.summary and request.summary != request.title:
        assert face.count(_squash(request.summary)) == 1, (request.summary, drawn.text)
    # Telegram asks a form's questions one at a time: the others are not shown yet
    stepwise = platform == "telegram" and len(request.questions) > 1
    for question in request.questions:
        if len(question.text) > 12:
            said = face.count(_squash(question.text))
            assert said == 1 or (stepwise and said == 0), (question.text, drawn.text)
    if isinstance(request.detail, Command):
        # the command is said once; again only inside what a button adds (its rule, the
        # agent's own words for the option)
        command = _squash(request.detail.command)
        quoted = [a.rule for a in drawn.card.actions if a.rule]
        quoted += [a.explanation for a in drawn.card.actions if a.explain_on_card]
        inside = sum(_squash(words).count(command) for words in quoted)
        assert face.count(command) - inside <= 1, drawn.text


@pytest.mark.parametrize(("sample", "platform"), CASES)
def test_a_named_sessions_card_says_its_name_once(sample: Sample, platform: str) -> None:
    """The session's /name is the card's first fact (issue 31), said once; the rest of the
    card is as it was (every other fact still once)."""
    name = "release notes for v2"
    drawn = draw(pending(sample.request), platform, session_name=name)
    face = _squash(drawn.text)
    assert face.count(_squash(name)) == 1, drawn.text
    assert "Session" in drawn.text
    plain = draw(pending(sample.request), platform)
    assert plain.labels == drawn.labels
    assert _squash(name) not in _squash(plain.text)
    if platform == "slack":  # a phone's banner shows no fact: the name heads it
        assert drawn.payload["text"].startswith(f"{name} · ")


@pytest.mark.parametrize("platform", ["telegram", "slack", "discord", "console"])
def test_a_questions_refusal_is_its_last_button(platform: str) -> None:
    """Dismiss ends the turn: it is last, after the options and "Other…", away from where a
    hurried tap lands."""
    asked = [s for s in SAMPLES if s.agent == "opencode" and s.request.questions]
    assert asked
    for sample in asked:
        drawn = draw(pending(sample.request), platform)
        assert drawn.labels[-1] == "Dismiss", drawn.labels


def test_a_summarys_sentences_each_end_with_a_full_stop() -> None:
    """Claude's "Create hello.txt It touches …" and Codex's "write outside It also asks
    for: …" were two sentences joined without one."""
    joined = [s.request.summary for s in SAMPLES if re.search(r"[^.!?:…] It ", s.request.summary)]
    assert joined == []
    summaries = {s.request.summary for s in SAMPLES}
    assert "Create hello.txt. It touches /home/ada/project/hello.txt." in summaries
    assert any(summary.startswith("write outside. It also asks for:") for summary in summaries)


def test_the_committed_card_payloads_are_what_the_renderers_draw() -> None:
    """docs/screenshots/cards/ (written by scripts/write_card_payloads.py) stays true."""
    folder = Path(__file__).parent.parent / "docs" / "screenshots" / "cards"
    files = payload_files()
    assert len(files) == 15
    for name, text in files.items():
        assert (folder / name).read_text() == text, f"run scripts/write_card_payloads.py: {name}"


def test_a_whole_command_rule_whose_command_is_a_file_points_at_that_file() -> None:
    """Codex's "Always allow this command" for a command too long for the card: the rule is
    the command, so the button's explanation names the command's file, on every platform,
    and no second file or copy of it is sent."""
    words = "a generated word " * 1200
    command = f"printf '%s' '{words}' > long.txt"
    params = {
        "threadId": "t",
        "turnId": "u",
        "itemId": "i",
        "command": command,
        "cwd": "/home/ada/project",
        "reason": "Write the long file",
        "availableDecisions": [
            "accept",
            {"acceptWithExecpolicyAmendment": {"execpolicy_amendment": shlex.split(command)}},
            "decline",
        ],
    }
    item = pending(open_command_approval("rpc:9", params).request)
    for platform in PLATFORMS:
        drawn = draw(item, platform)
        assert "The rule is the whole command, attached as command.sh." in drawn.text, platform
        if platform != "console":  # the console shows the attachment itself, once
            assert words not in drawn.text, platform
        files = drawn.payload.get("files") or drawn.payload.get("documents") or []
        assert "rule.txt" not in files and "request.md" not in files, (platform, files)


def test_a_lasting_refusal_asks_again_on_slack_and_says_what_it_adds() -> None:
    """Codex's "Always block this host" adds a rule too: Slack asks before it, in the words
    of what it adds, as it does before a lasting allow."""
    params = {
        "threadId": "t",
        "turnId": "u",
        "itemId": "i",
        "command": "curl https://example.com",
        "reason": "Fetch the page",
        "networkApprovalContext": {"host": "example.com", "protocol": "https"},
        "availableDecisions": [
            "accept",
            {
                "applyNetworkPolicyAmendment": {
                    "network_policy_amendment": {"host": "example.com", "action": "allow"}
                }
            },
            {
                "applyNetworkPolicyAmendment": {
                    "network_policy_amendment": {"host": "example.com", "action": "deny"}
                }
            },
            "decline",
        ],
    }
    item = pending(open_command_approval("rpc:8", params).request)
    drawn = draw(item, "slack")
    [actions] = [block for block in drawn.payload["blocks"] if block["type"] == "actions"]
    asked = {
        button["text"]["text"]: button["confirm"]
        for button in actions["elements"]
        if "confirm" in button
    }
    assert set(asked) == {"Always allow this host", "Always block this host"}
    block = asked["Always block this host"]
    assert block["title"]["text"] == "Refuse from now on?"
    assert block["confirm"]["text"] == "Refuse"
    assert "lasting rule blocking network access to this host" in block["text"]["text"]
    for platform in PLATFORMS:  # and every platform says it beside the button
        assert "lasting rule blocking network access" in draw(item, platform).text, platform


def test_two_long_labels_that_would_shorten_alike_stay_distinct_and_said_whole() -> None:
    """Whatever an agent sends: two grants whose labels are too long for a button and would
    give way to the same short words each keep a label of their own, and their whole label
    is said beside them on every platform."""
    base = command_sample()
    long = "Allow, and give access to /home/ada/project/vendor/third_party/{}"
    grants = tuple(
        Action(id=f"dirs-{n}", label=long.format(n), effect=Effect.ALLOW, scope=Scope.SESSION)
        for n in ("generated", "checked_in")
    )
    item = pending(replace(base, actions=(base.actions[0], *grants)))
    for platform in PLATFORMS:
        drawn = draw(item, platform)
        assert len(set(drawn.labels)) == 3, (platform, drawn.labels)
        assert all(len(label) <= 40 for label in drawn.labels), drawn.labels
        for grant in grants:
            assert grant.label in _squash(drawn.text), (platform, drawn.text)


def command_sample() -> InteractionRequest:
    [sample] = [s for s in SAMPLES if s.source == "shell_execpolicy_amendment"]
    return sample.request
