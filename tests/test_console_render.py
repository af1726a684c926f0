"""The console's pure parts: the highlighter, form answers, the guard's checks, run states,
routing of console conversations, and what a card shows."""

from __future__ import annotations

import dataclasses
import re
from datetime import UTC, datetime, timedelta
from html import unescape

from gateway.domain import (
    Action,
    AgentKind,
    ConversationRef,
    Effect,
    FileChange,
    InteractionKind,
    InteractionState,
    Option,
    Question,
    Scope,
    TurnStatus,
)
from gateway.interactions.machine import Interaction
from gateway.render.interaction_card import render_interaction
from gateway.session_record import SessionRecord
from gateway.store.records import TurnRecord
from platforms.console.answers import answers_from_form
from platforms.console.cards_html import PostContext, card_html
from platforms.console.config import ConsoleConfig
from platforms.console.highlight import highlight_diff, highlight_shell
from platforms.console.pages import agent_where
from platforms.console.security import Guard, host_allowed, origin_allowed
from platforms.console.views import CardView, route_channel, run_state, typing_refusal
from platforms.registry import parse_config

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
CTX = PostContext(csrf="c", back="/pending")


def interaction(**fields: object) -> Interaction:
    base: dict[str, object] = {
        "id": "abc123",
        "session_id": "s1",
        "runtime_epoch": 1,
        "turn_id": 1,
        "native_key": "rpc:0",
        "kind": InteractionKind.APPROVAL,
        "title": "Edit files",
        "summary": "",
        "detail": None,
        "actions": (),
        "questions": (),
        "state": InteractionState.PENDING,
        "version": 1,
        "created_at": NOW,
        "updated_at": NOW,
    }
    return Interaction(**{**base, **fields})  # type: ignore[arg-type]


def view(record: Interaction) -> CardView:
    card = render_interaction(record, token_for=lambda choice: f"tok-{choice}")
    return CardView(interaction=record, card=card, session=None, copies=())


def test_diff_lines_are_coloured_and_escaped() -> None:
    html = highlight_diff("--- a/x\n+++ b/x\n@@ -1 +1 @@\n-<old>\n+<new>\n same")
    assert '<span class="del">-&lt;old&gt;</span>' in html
    assert '<span class="add">+&lt;new&gt;</span>' in html
    assert '<span class="hunk">@@ -1 +1 @@</span>' in html
    assert html.endswith("\n same")


def test_shell_highlighting_keeps_every_character() -> None:
    command = "FOO=1 rm -rf '/tmp/a b' && echo \"$HOME\" | tee >out.txt # done\r"
    html = highlight_shell(command)
    assert '<span class="prog">rm</span>' in html and '<span class="prog">echo</span>' in html
    assert '<span class="flag">-rf</span>' in html
    assert '<span class="comment"># done\r</span>' in html
    assert unescape(re.sub(r"<[^>]+>", "", html)) == command


def test_form_answers_keep_options_and_other_text() -> None:
    posted = {"q.langs": ["py", "rs", "py"], "o.note": ["  hi  "], "o.langs": [""]}
    questions = (
        Question(id="langs", header="", text="?", options=(Option(id="py", label="Py"),)),
        Question(id="note", header="", text="?"),
        Question(id="skip", header="", text="?"),
    )
    answers = answers_from_form(questions, lambda name: posted.get(name, []))
    assert answers["langs"].option_ids == ("py", "rs") and answers["langs"].other is None
    assert answers["note"].other == "hi"
    assert "skip" not in answers


def test_guard_checks() -> None:
    guard = Guard("secret-token")
    assert guard.open_session("wrong") is None
    session = guard.open_session("secret-token")
    assert session is not None and guard.session(session.id) is session
    assert guard.session("made-up") is None
    assert guard.csrf_ok(session, session.csrf) and not guard.csrf_ok(session, None)
    assert host_allowed("127.0.0.1:8080", 8080) and host_allowed("localhost:8080", 8080)
    assert host_allowed("[::1]:8080", 8080)
    assert not host_allowed("127.0.0.1:9090", 8080)
    assert not host_allowed("evil.example:8080", 8080) and not host_allowed(None, 8080)
    assert origin_allowed("http://127.0.0.1:8080", None, "127.0.0.1:8080")
    assert not origin_allowed("null", None, "127.0.0.1:8080")
    assert origin_allowed(None, "http://127.0.0.1:8080/pending", "127.0.0.1:8080")
    assert not origin_allowed(None, None, "127.0.0.1:8080")


def turn(status: TurnStatus | None) -> TurnRecord:
    ended = None if status is None else NOW + timedelta(seconds=1)
    return TurnRecord(
        id=1,
        session_id="s1",
        epoch=1,
        prompt_id=None,
        native_turn_id=None,
        status=status,
        error=None,
        started_at=NOW,
        ended_at=ended,
    )


def test_run_states() -> None:
    question = interaction(kind=InteractionKind.QUESTION)
    assert run_state([], None) == "idle"
    assert run_state([], turn(None)) == "running"
    assert run_state([interaction()], turn(None)) == "waiting for approval"
    assert run_state([question], turn(None)) == "waiting for input"
    plan = interaction(kind=InteractionKind.PLAN)
    assert run_state([plan], turn(None)) == "waiting for its plan to be reviewed"
    assert run_state([plan, interaction()], turn(None)) == "waiting for approval"
    assert run_state([], turn(TurnStatus.FAILED)) == "failed"
    assert run_state([], turn(TurnStatus.COMPLETED)) == "idle"
    assert run_state([], None, closed=True) == "closed"


CONFIG = """
[projects.web]
work_dir = "/srv/web"
agent = "codex-app-server"
auth.local = { allow_from = ["alice"], channels = ["web"] }
[projects.docs]
work_dir = "/srv/docs"
agent = "codex-app-server"
scope = "user"
auth.local = { allow_from = ["alice"] }
[projects.none]
work_dir = "/srv/none"
agent = "codex-app-server"
auth.local = { allow_from = ["alice"], channels = ["web"] }
[platforms.console]
identity = "local:alice"
"""


def session(project: str) -> SessionRecord:
    return SessionRecord(
        id="s1",
        project=project,
        agent_kind=AgentKind.CODEX_APP_SERVER,
        native_session_id=None,
        created_at=NOW,
        current_epoch=1,
        closed_at=None,
        close_reason=None,
        queue_paused=False,
        queue_pause_reason=None,
    )


def test_console_conversations_route_to_their_project() -> None:
    config = parse_config(CONFIG)
    assert route_channel(config, "web", "local") == "web"
    assert route_channel(config, "docs", "local") == "console"
    assert route_channel(config, "none", "local") is None  # "web" goes to project web first
    settings = config.platforms.get("console", ConsoleConfig)
    assert settings is not None
    actor = settings.actor()
    web = ConversationRef(platform="console", space=None, channel="web", thread="s-s1")
    assert typing_refusal(config, web, session("web"), actor, "local") is None
    elsewhere = ConversationRef(platform="console", space=None, channel="mirror", thread="s-s1")
    assert "project docs, not web" in str(
        typing_refusal(config, elsewhere, session("web"), actor, "local")
    )
    docs = ConversationRef(platform="console", space=None, channel="console", thread="s-s1")
    assert "one session per person" in str(
        typing_refusal(config, docs, session("docs"), actor, "local")
    )


def test_a_card_shows_the_whole_diff_each_action_and_a_form_with_masked_secrets() -> None:
    diff = "--- a/app.py\n+++ b/app.py\n@@ -1 +1 @@\n-print('hi')\n+print('hello')\n" * 300
    change = interaction(
        detail=FileChange(paths=("app.py",), diff=diff),
        actions=(
            Action(id="accept", label="Allow", effect=Effect.ALLOW),
            Action(
                id="session", label="Allow these files", effect=Effect.ALLOW, scope=Scope.SESSION
            ),
            Action(id="cancel", label="Deny and stop", effect=Effect.CANCEL),
        ),
    )
    html = card_html(view(change), CTX)
    assert html.count('<span class="add">+print(&#x27;hello&#x27;)</span>') == 300
    assert "Allows it, for the rest of this session." in html
    assert "Refuses it and stops the agent&#x27;s turn." in html
    assert 'value="tok-1"' in html and 'name="back" value="/pending"' in html
    asked = interaction(
        kind=InteractionKind.QUESTION,
        questions=(
            Question(
                id="tags",
                header="Tags",
                text="Which?",
                options=(Option(id="a", label="A"), Option(id="b", label="B")),
                multi=True,
            ),
            Question(id="key", header="Key", text="Your key?", secret=True),
            Question(id="note", header="Note", text="More?", required=False),
        ),
    )
    form = card_html(view(asked), CTX)
    assert form.count('type="checkbox" name="q.tags"') == 2
    assert '<input type="password" name="o.key"' in form
    assert form.count("data-required") == 2  # the optional note is not required
    assert 'name="token" value="tok-s"' in form


def test_a_session_of_a_shared_ledger_says_its_host() -> None:
    assert agent_where(session("web")) == "codex-app-server"
    on_b = dataclasses.replace(session("web"), host="b")
    assert agent_where(on_b) == "codex-app-server on host b"
