"""The console over real HTTP on 127.0.0.1 (a free port): who gets in, what a form post must
carry, and what a decision taken from the console does to the ledger.

The gateway is whole (engine, ledger, desk, broker, memory platform, console); its agent is
never started: interactions are opened in the ledger through the broker, as a runner does.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from gateway.domain import (
    Action,
    Actor,
    AgentKind,
    Command,
    ConversationRef,
    Effect,
    InteractionKind,
    InteractionRequest,
    InteractionState,
    Option,
    Question,
)
from gateway.events import Usage
from gateway.interactions.machine import Interaction, InteractionEvent
from tests.console_harness import (
    ConsoleRunning,
    client,
    console_gateway,
    logged_in,
    origin,
    plain_config,
)

pytestmark = pytest.mark.timeout(30)

ALICE = Actor(platform="memory", user_id="alice", display="Alice")
ROOM = ConversationRef(platform="memory", space="team", channel="room", thread="t1")
APPROVAL = InteractionRequest(
    native_key="rpc:1",
    kind=InteractionKind.APPROVAL,
    title="Run a command",
    detail=Command(command="rm -rf build && make -j4", cwd="/work", reason="clean build"),
    actions=(
        Action(id="accept", label="Allow once", effect=Effect.ALLOW),
        Action(id="decline", label="Deny", effect=Effect.DENY),
    ),
)
QUESTIONS = InteractionRequest(
    native_key="rpc:2",
    kind=InteractionKind.QUESTION,
    title="The agent has questions",
    questions=(
        Question(
            id="langs",
            header="Languages",
            text="Which languages?",
            options=(Option(id="py", label="Python"), Option(id="rs", label="Rust")),
            multi=True,
        ),
        Question(id="key", header="API key", text="Your key?", secret=True),
        Question(id="note", header="Note", text="Anything else?", required=False),
    ),
)


@pytest.fixture
async def running(tmp_path: Path) -> AsyncIterator[ConsoleRunning]:
    work = tmp_path / "work"
    work.mkdir()
    async with console_gateway(plain_config(tmp_path / "data", work)) as running:
        yield running


async def ask(running: ConsoleRunning, request: InteractionRequest) -> Interaction:
    """What a runner does when its agent asks: a session shown on the memory platform."""
    gateway = running.gateway
    session = await gateway.store.sessions.create(
        project="demo", agent_kind=AgentKind.CODEX_APP_SERVER, initiator=ALICE
    )
    await gateway.store.sessions.bind(ROOM, session.id)
    await gateway.show_everywhere(session.id)
    epoch = await gateway.store.sessions.begin_epoch(
        session.id, pid=None, pgid=None, process_start_time=None
    )
    return await gateway.broker.open(session.id, epoch, request, turn_id=None)


async def test_everything_is_refused_without_the_token(running: ConsoleRunning) -> None:
    interaction = await ask(running, APPROVAL)
    base = running.console.url
    async with client() as http:
        for path in ("", "pending", f"s/{interaction.session_id}", "events"):
            async with http.get(base + path) as response:
                assert response.status == 401, path
                assert "access token" in await response.text()
        async with http.get(base + "?token=not-the-token") as response:
            assert response.status == 401
            assert not http.cookie_jar.filter_cookies(aiohttp.client.URL(base))
        async with http.post(base + f"i/{interaction.id}/act", data={"token": "x"}) as response:
            assert response.status == 401
    assert (await running.gateway.store.interactions.get(interaction.id)).state is (  # type: ignore[union-attr]
        InteractionState.PENDING
    )


async def test_the_token_opens_a_cookie_session_and_is_printed_once_never_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    work = tmp_path / "work"
    work.mkdir()
    async with console_gateway(plain_config(tmp_path / "data", work)) as running:
        token = running.console.guard.token
        assert running.terminal.getvalue().count(token) == 1
        assert running.console.url.startswith("http://127.0.0.1:")
        async with client() as http:
            async with http.get(running.console.login_url, allow_redirects=False) as response:
                assert response.status == 303
                assert response.headers["Location"] == "/"  # the token leaves the address
                cookie = response.headers["Set-Cookie"]
                assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
                assert token not in cookie
            async with http.get(running.console.url) as response:
                assert response.status == 200
                assert "Sessions" in await response.text()
                assert "default-src 'none'" in response.headers["Content-Security-Policy"]
    assert token not in caplog.text


async def test_a_post_needs_the_csrf_token_and_the_console_origin(
    running: ConsoleRunning,
) -> None:
    interaction = await ask(running, APPROVAL)
    card = running.gateway.broker.render(interaction, running.console)
    allow = card.actions[0].token
    url = f"{running.console.url}i/{interaction.id}/act"
    async with client() as http:
        csrf = await logged_in(http, running)
        async with http.post(url, data={"token": allow}, headers=origin(running)) as response:
            assert response.status == 403  # no CSRF token
        bad = {"token": allow, "csrf": csrf[:-2] + "xx"}
        async with http.post(url, data=bad, headers=origin(running)) as response:
            assert response.status == 403
        evil = {"Origin": "http://evil.example", "Accept": "application/json"}
        async with http.post(url, data={"token": allow, "csrf": csrf}, headers=evil) as response:
            assert response.status == 403
        stored = await running.gateway.store.interactions.get(interaction.id)
        assert stored is not None and stored.state is InteractionState.PENDING
        good = {"token": allow, "csrf": csrf}
        async with http.post(url, data=good, headers=origin(running)) as response:
            assert response.status == 200
            reply = await response.json()
    assert reply["accepted"], reply
    decided = await running.gateway.store.interactions.get(interaction.id)
    assert decided is not None and decided.decision is not None
    assert decided.decision.actor.key() == "local:alice"
    assert decided.decision.decision.action_id == "accept"


async def test_another_host_name_is_refused(running: ConsoleRunning) -> None:
    async with client() as http:
        headers = {"Host": f"rebound.example:{running.console.port}"}
        async with http.get(running.console.login_url, headers=headers) as response:
            assert response.status == 421


async def test_a_forged_action_token_is_refused_and_audited(running: ConsoleRunning) -> None:
    interaction = await ask(running, APPROVAL)
    genuine = running.gateway.broker.render(interaction, running.console).actions[0].token
    forged = genuine[:-4] + ("AAAA" if not genuine.endswith("AAAA") else "BBBB")
    async with client() as http:
        csrf = await logged_in(http, running)
        url = f"{running.console.url}i/{interaction.id}/act"
        data = {"token": forged, "csrf": csrf}
        async with http.post(url, data=data, headers=origin(running)) as response:
            reply = await response.json()
    assert reply == {"accepted": False, "text": "This button is not valid.", "location": None}
    stored = await running.gateway.store.interactions.get(interaction.id)
    assert stored is not None and stored.state is InteractionState.PENDING
    audit = await running.gateway.store.audit.entries(event="click.rejected")
    assert [entry.details["reason"] for entry in audit] == ["forged"]


async def test_pending_center_shows_every_open_request_with_its_whole_command(
    running: ConsoleRunning,
) -> None:
    interaction = await ask(running, APPROVAL)
    async with client() as http:
        await logged_in(http, running)
        async with http.get(running.console.url + "pending") as response:
            page = await response.text()
    assert f'id="i-{interaction.id}"' in page
    assert '<span class="prog">rm</span> <span class="flag">-rf</span> build' in page
    assert "Allow once" in page and "Allows it, this time only." in page
    # the card says which chats show it besides this console, and no internal word
    assert "also in memory" in page and "shown on" not in page
    assert "codex-app-server" not in page and f"session {interaction.session_id}<" not in page


async def test_a_form_without_its_required_answers_is_refused_by_the_ledger(
    running: ConsoleRunning,
) -> None:
    interaction = await ask(running, QUESTIONS)
    submit = running.gateway.broker.render(interaction, running.console).form
    assert submit is not None
    url = f"{running.console.url}i/{interaction.id}/form"
    async with client() as http:
        csrf = await logged_in(http, running)
        partial = {"token": submit.submit_token, "csrf": csrf, "q.langs": "py"}
        async with http.post(url, data=partial, headers=origin(running)) as response:
            refused = await response.json()
        stored = await running.gateway.store.interactions.get(interaction.id)
        assert stored is not None and stored.state is InteractionState.PENDING
        whole = [
            ("token", submit.submit_token),
            ("csrf", csrf),
            ("q.langs", "py"),
            ("q.langs", "rs"),
            ("o.key", "sk-very-secret"),
        ]
        async with http.post(url, data=whole, headers=origin(running)) as response:
            accepted = await response.json()
        async with http.get(f"{running.console.url}s/{interaction.session_id}") as response:
            page = await response.text()
    assert not refused["accepted"] and "needs an answer" in refused["text"]
    assert accepted["accepted"], accepted
    decided = await running.gateway.store.interactions.get(interaction.id)
    assert decided is not None and decided.decision is not None
    assert decided.decision.decision.answers["langs"].option_ids == ("py", "rs")
    assert "sk-very-secret" not in page
    assert "(secret, not shown)" in page


async def test_without_javascript_a_post_redirects_back_with_a_notice(
    running: ConsoleRunning,
) -> None:
    interaction = await ask(running, APPROVAL)
    deny = running.gateway.broker.render(interaction, running.console).actions[1].token
    async with client() as http:
        csrf = await logged_in(http, running)
        data = {"token": deny, "csrf": csrf, "back": "/pending"}
        headers = {"Origin": running.console.url.rstrip("/")}
        url = f"{running.console.url}i/{interaction.id}/act"
        async with http.post(url, data=data, headers=headers) as response:
            assert response.url.path == "/pending"
            page = await response.text()
    assert "Denied. Sen" in page  # sent or sending: "Deny" is not said again


async def test_a_session_found_at_start_is_shown_on_the_console_and_takes_messages(
    tmp_path: Path,
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    config = plain_config(tmp_path / "data", work)
    async with console_gateway(config) as first:
        store = first.gateway.store
        session = await store.sessions.create(
            project="demo", agent_kind=AgentKind.CODEX_APP_SERVER, initiator=ALICE
        )
        await store.sessions.bind(ROOM, session.id)  # shown on the memory platform only
    async with console_gateway(config) as second:
        bound = await second.gateway.store.sessions.list_bindings(session.id)
        mirror = ConversationRef(
            platform="console", space=None, channel="console", thread=f"s-{session.id}"
        )
        assert bound == [ROOM, mirror]
        async with client() as http:
            await logged_in(http, second)
            async with http.get(f"{second.console.url}s/{session.id}") as response:
                page = await response.text()
    assert f'action="/s/{session.id}/say"' in page


async def test_a_429_storm_on_one_platform_holds_back_no_card_edit_on_another(
    running: ConsoleRunning,
) -> None:
    asked = await ask(running, APPROVAL)
    copies = await running.gateway.store.cards.list_for(asked.id)
    [console_ref] = [c.message_ref for c in copies if c.conversation.platform == "console"]
    [memory_ref] = [c.message_ref for c in copies if c.conversation.platform == "memory"]
    assert console_ref is not None and memory_ref is not None
    # the memory platform answers every call 429 from now on: its edits wait in its own lane
    running.memory.rate_limited = 0.2
    update = await running.gateway.store.interactions.resolve(
        asked.id, InteractionEvent.WITHDRAW, by="agent"
    )
    running.gateway.broker.mark_dirty(asked.id)

    def console_card_edited() -> str | None:
        shown = running.console.feed.get(console_ref)
        card = shown.card if shown is not None else None
        return card.status_line if card is not None and not card.actions else None

    seen = 0
    async with asyncio.timeout(10):
        while (status := console_card_edited()) is None:
            seen = await running.console.changes.wait_past(seen)
    withdrawn = (
        "Closed before anyone answered: the agent withdrew the request · nothing was sent to the"
        " agent"
    )
    assert status == withdrawn
    # ...while the other platform's copy still waits out its 429s
    assert running.memory.too_many
    waiting = running.memory.cards(ROOM)[0].card
    assert waiting is not None and waiting.actions
    running.memory.rate_limited = None
    edited = await running.memory.wait_for(
        lambda: (card := running.memory.cards(ROOM)[0].card) and not card.actions and card
    )
    assert edited.status_line == withdrawn
    await running.gateway.broker.refreshed()  # the edit seen, and its record written
    copies = await running.gateway.store.cards.list_for(asked.id)
    assert {c.rendered_version for c in copies} == {update.interaction.version}


async def test_a_new_card_is_not_held_back_by_one_platforms_429_storm(
    running: ConsoleRunning,
) -> None:
    running.memory.rate_limited = 0.2
    async with asyncio.timeout(10):  # the agent's next event is not held back either
        asked = await ask(running, APPROVAL)
    copies = {
        c.conversation.platform: c for c in await running.gateway.store.cards.list_for(asked.id)
    }
    assert copies["console"].message_ref is not None  # shown at once on the console
    assert copies["memory"].message_ref is None and running.memory.too_many
    running.memory.rate_limited = None
    shown = await running.memory.wait_for(lambda: running.memory.cards(ROOM) or None)
    assert len(shown) == 1 and shown[0].card is not None and shown[0].card.actions


def _part(page: str, start: str, end: str) -> str:
    """The page from ``start`` to the first ``end`` after it ("" if it has no ``start``)."""
    at = page.find(start)
    return "" if at < 0 else page[at : page.index(end, at) + len(end)]


async def test_without_javascript_a_refusal_is_an_error_next_to_its_form_naming_every_gap(
    running: ConsoleRunning,
) -> None:
    form = await ask(running, QUESTIONS)
    approval = await ask(running, APPROVAL)
    submit = running.gateway.broker.render(form, running.console).form
    deny = running.gateway.broker.render(approval, running.console).actions[1].token
    assert submit is not None
    headers = {"Origin": running.console.url.rstrip("/")}  # a plain form post: no script
    async with client() as http:
        csrf = await logged_in(http, running)
        empty = {"token": submit.submit_token, "csrf": csrf, "back": "/pending"}
        async with http.post(
            f"{running.console.url}i/{form.id}/form",
            data=empty,
            headers=headers,
            allow_redirects=False,
        ) as response:
            # back to the card itself: the page opens where its refusal is, not at its top
            assert response.headers["Location"] == f"/pending#i-{form.id}"
        async with http.get(f"{running.console.url}pending") as response:
            refused = await response.text()
        denied = {"token": deny, "csrf": csrf, "back": "/pending"}
        async with http.post(
            f"{running.console.url}i/{approval.id}/act", data=denied, headers=headers
        ) as response:
            accepted = await response.text()
    card = _part(refused, f'id="i-{form.id}"', "</article>")
    # both missing answers, by the names the form shows (not "question 'langs'"), in the card
    said = "Languages and API key need an answer."
    assert f'<p class="refusal" role="alert">{said}</p>' in card
    assert "'langs'" not in refused and said not in _part(refused, 'id="notice"', "</main>")[:300]
    assert refused.count(said) == 1
    stored = await running.gateway.store.interactions.get(form.id)
    assert stored is not None and stored.state is InteractionState.PENDING
    # a success is still a status at the top, not an alert
    notice = _part(accepted, '<div id="notice" role="status">', "</div></div>")
    assert "Denied. Sen" in notice and 'role="alert"' not in notice


async def test_a_session_is_titled_by_its_first_words_or_when_it_started(
    running: ConsoleRunning,
) -> None:
    asked = await ask(running, APPROVAL)
    quiet = await ask(running, APPROVAL)
    words = "please   tidy the build folder and then run every test that we have, twice over"
    await running.gateway.store.prompts.enqueue(
        asked.session_id,
        conversation=ROOM,
        platform_message_id="m1",
        author=ALICE,
        text=words,
        max_depth=10,
    )
    session = await running.gateway.store.sessions.get(quiet.session_id)
    assert session is not None
    async with client() as http:
        await logged_in(http, running)
        async with http.get(running.console.url) as response:
            listed = await response.text()
        async with http.get(f"{running.console.url}s/{asked.session_id}") as response:
            page = await response.text()
    title = "demo: please tidy the build folder and then run every test that we…"
    # the id only where a pointer rests: the tab counts the two requests that wait
    hover = f'title="session {asked.session_id}"'
    assert f'<a href="/s/{asked.session_id}" {hover}>{title}</a>' in listed
    assert f"<h1>{title} " in page and f"<title>(2) {title} · agent-gateway</title>" in page
    started = f"demo, started {session.created_at:%Y-%m-%d %H:%M} UTC"
    hover = f'title="session {quiet.session_id}"'
    assert f'<a href="/s/{quiet.session_id}" {hover}>{started}</a>' in listed


async def test_a_named_session_is_titled_by_its_name(running: ConsoleRunning) -> None:
    asked = await ask(running, APPROVAL)
    await running.gateway.store.prompts.enqueue(
        asked.session_id,
        conversation=ROOM,
        platform_message_id="m1",
        author=ALICE,
        text="please tidy the build folder",
        max_depth=10,
    )
    await running.gateway.store.sessions.set_name(asked.session_id, "tidy <build>")
    async with client() as http:
        await logged_in(http, running)
        async with http.get(running.console.url) as response:
            listed = await response.text()
    link = f'<a href="/s/{asked.session_id}" title="session {asked.session_id}">'
    assert f"{link}demo: tidy &lt;build&gt;</a>" in listed


async def test_the_session_view_shows_the_tokens_and_the_context_used(
    running: ConsoleRunning,
) -> None:
    interaction = await ask(running, APPROVAL)
    session = await running.gateway.store.sessions.get(interaction.session_id)
    assert session is not None
    runner = running.gateway.runner(session)
    # what the runner adds up from the agent's Usage events (gateway/sessions/runner.py)
    runner.usage = runner.usage.add(
        Usage(input_tokens=1200, output_tokens=300, context_tokens=1500, context_window=200_000)
    )
    async with client() as http:
        await logged_in(http, running)
        async with http.get(f"{running.console.url}s/{session.id}") as response:
            page = await response.text()
    assert "Tokens: 1,200 in, 300 out · context 1,500 of 200,000 (1% used)" in page


async def test_the_session_view_says_the_agent_could_not_start_and_what_to_do(
    running: ConsoleRunning,
) -> None:
    """Issue 30: an agent that cannot start left the header at "idle"; it says so now, with
    the reason and the next step (the binary is not there: the PATH, `check`)."""
    await running.memory.say(ROOM, ALICE, "hello")
    await running.memory.wait_for(
        lambda: any("could not start" in text for text in running.memory.texts(ROOM))
    )
    [session] = await running.gateway.store.sessions.list_sessions()
    async with client() as http:
        await logged_in(http, running)
        async with http.get(f"{running.console.url}s/{session.id}") as response:
            page = await response.text()
    head = page[page.index('<span id="head"') :]
    head = head[: head.index("</h1>")]
    assert 'class="state agent-could-not-start">agent could not start</span>' in head
    assert "/nonexistent/codex" in head and "on the PATH the gateway runs with" in head
    assert ">idle<" not in head
    async with client() as http:
        await logged_in(http, running)
        async with http.get(running.console.url) as response:
            listed = await response.text()
    assert 'class="state agent-could-not-start">agent could not start</span>' in listed
