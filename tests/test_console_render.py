"""The console's pure parts: the highlighter, form answers, the guard's checks, run states,
routing of console conversations, and what a card shows."""

from __future__ import annotations

import dataclasses
import re
from datetime import UTC, datetime, timedelta
from html import unescape

from gateway.domain import (
    Action,
    Actor,
    Command,
    ConversationRef,
    Decision,
    Effect,
    FileChange,
    InteractionKind,
    InteractionState,
    Option,
    Question,
    Resolution,
    Scope,
    TurnStatus,
)
from gateway.interactions.machine import (
    DecisionFact,
    DeliveryFact,
    DeliveryOutcome,
    Interaction,
    ResolutionFact,
)
from gateway.render.interaction_card import render_interaction
from gateway.session_record import SessionRecord
from gateway.store.records import TurnRecord
from platforms.console.answers import answers_from_form
from platforms.console.cards_html import PostContext, card_html, split_diff
from platforms.console.config import ConsoleConfig
from platforms.console.highlight import highlight_diff, highlight_shell
from platforms.console.pages import (
    GATEWAY_LABEL,
    Frame,
    agent_where,
    conversation_page,
    message_html,
)
from platforms.console.receipts import message_receipt
from platforms.console.security import Guard, host_allowed, origin_allowed
from platforms.console.views import (
    CardView,
    TextItem,
    route_channel,
    run_state,
    typing_refusal,
)
from platforms.registry import parse_config
from tests.session_records import session_record

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
    return session_record(project=project, created_at=NOW)


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
    assert agent_where(session("web")) == "Codex"
    on_b = dataclasses.replace(session("web"), host="b")
    assert agent_where(on_b) == "Codex on host b"


def visible(html: str) -> str:
    """What a person reads of ``html``: its text, without tags or their attributes."""
    return unescape(re.sub(r"<[^>]+>", " ", html))


def test_the_gateways_own_words_are_labelled_and_its_marks_drawn_in_any_font() -> None:
    stopped = TextItem(id="m1", at=NOW, text="⏹ Stopped by You.", version=1, from_gateway=True)
    said = message_html(stopped)
    agent = message_html(TextItem(id="m2", at=NOW, text="Done: `hello.txt`.", version=1))
    assert 'class="msg md gateway"' in said
    assert f'<span class="who">{GATEWAY_LABEL}</span>' in said
    # ⏹ is a box without an emoji font: the square every text font has stands in for it
    assert "■ Stopped by You." in said and "⏹" not in said
    assert "gateway" not in agent and 'class="who"' not in agent


def test_a_typed_text_is_said_to_go_where_it_went() -> None:
    def receipt(text: str, **state: bool) -> str:
        at_rest = {"held": False, "turn_running": False, "card_waiting": False}
        return message_receipt(text, **{**at_rest, **state})

    for command in ("/stop", "/status", "/help", "/nonsense now"):
        said = receipt(command, turn_running=True)
        assert said.startswith(f"{command.split()[0]} is a command for the gateway")
        assert "Sent to the agent" not in said
    assert receipt("hello") == "Sent to the agent."
    assert receipt("/plan add a test") == "Sent to the agent."
    assert receipt("hello", turn_running=True).startswith("Queued: the agent reads it when")
    assert "once the request waiting above is answered" in receipt("ok", card_waiting=True)
    assert receipt("hello", held=True).startswith("Held")


def test_a_diff_names_each_file_up_front() -> None:
    diff = (
        "--- /dev/null\n+++ b/greeting.py\n@@ -0,0 +1 @@\n+print('hi')\n"
        "--- a/old.py\n+++ b/old.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n"
    )
    change = interaction(detail=FileChange(paths=("greeting.py", "old.py"), diff=diff))
    html = card_html(view(change), CTX)
    new = '<p class="file"><code>greeting.py (new file)</code></p><pre class="diff">'
    assert new + '<span class="hunk">@@ -0,0 +1 @@</span>' in html
    assert '<p class="file"><code>old.py</code></p><pre class="diff">' in html
    assert "+++" not in html and "/dev/null" not in html  # said once, by the names above
    assert split_diff("@@ -1 +1 @@\n-a\n+b") == [(None, "@@ -1 +1 @@\n-a\n+b")]


def test_the_pages_speak_of_people_and_agents_not_of_ids() -> None:
    frame = Frame(identity="local:alice", pending=2, sessions=1)
    running = conversation_page(
        frame, session("web"), "web: tidy up", "running", [], CTX, typing_refused=None
    )
    assert "acting as alice" in running and "local:" not in visible(running)
    assert "<title>(2) web: tidy up · agent-gateway</title>" in running  # what waits, counted
    assert "Codex" in visible(running) and "codex-app-server" not in running
    assert "s1" not in visible(running)  # the session's id: where a pointer rests only
    # a turn runs: /stop as a button beside its state
    stop = re.search(r'<form class="stop"[^>]*action="/s/s1/say".*?</form>', running)
    assert stop is not None and 'name="text" value="/stop"' in stop.group()
    assert ">Stop</button>" in stop.group()
    idle = conversation_page(
        Frame(identity="telegram:42", pending=0, sessions=1),
        session("web"),
        "web: tidy up",
        "idle",
        [],
        CTX,
        typing_refused=None,
    )
    assert 'class="stop"' not in idle  # nothing to stop
    for state in (
        "waiting for approval",
        "waiting for input",
        "waiting for its plan to be reviewed",
    ):
        shown = conversation_page(frame, session("web"), "web", state, [], CTX, typing_refused=None)
        # the agent waits in its turn on a card: Stop ends the turn; a plan's turn has ended
        assert ('class="stop"' in shown) == (state != "waiting for its plan to be reviewed")
    assert "<title>web: tidy up · agent-gateway</title>" in idle
    assert "acting as 42 on Telegram" in idle


def test_a_card_in_any_state_says_no_internal_word() -> None:
    # the ledger's words (runtime, epoch, the ids, the auth table's prefix) stay in the ledger
    alice = Actor(platform="local", user_id="alice", display="alice")
    decided = {
        "decision": DecisionFact(actor=alice, decision=Decision(action_id="accept"), at=NOW),
        "delivery": DeliveryFact(
            outcome=DeliveryOutcome.OK, at=NOW, error="not written: the runtime ended first"
        ),
        "resolution": ResolutionFact(how=Resolution.ORPHANED, at=NOW, by="gateway"),
    }
    for state in InteractionState:
        for facts in ({}, decided):
            shown = interaction(
                state=state,
                actions=(Action(id="accept", label="Allow", effect=Effect.ALLOW),),
                **facts,
            )
            face = visible(card_html(view(shown), CTX))
            for word in ("runtime", "epoch", "local:", "abc123", "rpc:0", "s1"):
                assert word not in face, (state, word, face)


def test_a_waiting_command_is_shown_once_by_its_card_not_again_by_its_tool_line() -> None:
    command = "/bin/bash -c 'touch hello.txt'"
    said = TextItem(
        id="m1", at=NOW, text=f"I will make it.\n\n▸ `{command}`", version=3, author=None
    )
    waiting = interaction(
        title="Run a command",
        detail=Command(command=command, cwd="/w"),
        actions=(Action(id="accept", label="Allow once", effect=Effect.ALLOW),),
    )

    def page(item: Interaction) -> str:
        return conversation_page(
            Frame(identity="local:alice", pending=1, sessions=1),
            session("web"),
            "web",
            "waiting for approval",
            [said, view(item)],
            CTX,
            typing_refused=None,
        )

    shown = page(waiting)
    assert visible(shown).count("touch hello.txt") == 1  # on the card only
    assert "I will make it." in shown and 'data-version="3-waiting"' in shown
    # answered, the line is back (with how the command ends, once it does)
    decided = page(dataclasses.replace(waiting, state=InteractionState.DECIDED))
    assert visible(decided).count("touch hello.txt") == 2
    assert 'data-key="t-m1" data-version="3"' in decided
