"""The console in a real browser (Debian's chromium, headless, driven by Playwright) against a
whole gateway: the real codex app-server and the fake model, the memory platform, the console.

Missing chromium skips these tests, and fails them under AGENT_GATEWAY_REQUIRE_REAL_AGENTS=1
(scripts/setup.sh installs it). The main screens are saved to the test's temporary directory;
the screenshots of docs/console.md come from the demo instead (scripts/screenshots.py).
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from playwright.async_api import Browser, BrowserContext, Page, async_playwright, expect

from gateway.domain import InteractionState
from gateway.interactions.machine import Interaction
from platforms.memory.platform import Rendered
from tests.codex_env import CodexHome
from tests.conftest import REQUIRE_REAL
from tests.console_harness import CONSOLE_TABLES, ConsoleRunning, console_gateway, plain_config
from tests.gateway_harness import ALICE, ROOM, gateway_config
from tests.puppet_launcher import PuppetLauncher
from tests.servers.fake_responses import (
    FakeResponses,
    apply_patch,
    message,
    request_user_input,
    shell,
)

pytestmark = [pytest.mark.real_agent("codex"), pytest.mark.timeout(120)]

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
WAIT_MS = 30_000  # for anything the page should come to show


@pytest.fixture
def chromium() -> Path:
    if not CHROMIUM.is_file():
        message = f"{CHROMIUM} not found (scripts/setup.sh installs Debian's chromium)"
        if REQUIRE_REAL:
            pytest.fail(message)
        pytest.skip(message)
    return CHROMIUM


@pytest.fixture
async def browser(chromium: Path) -> AsyncIterator[Browser]:
    async with async_playwright() as playwright:
        # launch() gives every browser a fresh, temporary user-data-dir
        launched = await playwright.chromium.launch(
            executable_path=str(chromium), args=CHROMIUM_ARGS
        )
        try:
            yield launched
        finally:
            await launched.close()


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    return tmp_path


@pytest.fixture
async def running(
    codex_bin: str, codex_home: CodexHome, tmp_path: Path
) -> AsyncIterator[ConsoleRunning]:
    config = gateway_config(
        codex_bin,
        codex_home,
        tmp_path / "data",
        features=("default_mode_request_user_input",),
        extra=CONSOLE_TABLES,
    )
    async with console_gateway(config) as running:
        yield running


@pytest.fixture
async def read_only(
    codex_bin: str, codex_home: CodexHome, tmp_path: Path
) -> AsyncIterator[ConsoleRunning]:
    """A gateway whose agent may not write files: every file change is asked."""
    config = gateway_config(
        codex_bin, codex_home, tmp_path / "data", sandbox="read-only", extra=CONSOLE_TABLES
    )
    async with console_gateway(config) as running:
        yield running


async def open_page(
    browser: Browser, running: ConsoleRunning, path: str, **options: bool | str
) -> Page:
    """A new browser context (its own cookies) logged in with the token, showing ``path``."""
    context: BrowserContext = await browser.new_context(
        viewport={"width": 1100, "height": 820}, **options
    )
    page = await context.new_page()
    await page.goto(f"{running.console.url}{path}?token={running.console.guard.token}")
    assert page.url == f"{running.console.url}{path}"  # the token left the address bar
    return page


async def memory_card(running: ConsoleRunning) -> Rendered:
    def pending() -> Rendered | None:
        cards = running.memory.cards(ROOM)
        return next((r for r in cards if r.card and (r.card.actions or r.card.form)), None)

    return await running.memory.wait_for(pending)


async def first_open(running: ConsoleRunning) -> Interaction:
    store = running.gateway.store

    async def probe() -> Interaction | None:
        found = await store.interactions.list_open()
        return found[0] if found else None

    await memory_card(running)
    found = await probe()
    assert found is not None
    return found


async def test_the_console_opens_with_its_token_and_refuses_without_it(
    browser: Browser, running: ConsoleRunning, shots: Path
) -> None:
    context = await browser.new_context()
    stranger = await context.new_page()
    response = await stranger.goto(running.console.url + "pending")
    assert response is not None and response.status == 401
    await expect(stranger.locator("h1")).to_contain_text("needs its access token")
    page = await open_page(browser, running, "")
    await expect(page.locator("h1")).to_have_text("Sessions")
    await expect(page.locator("header.top")).to_contain_text("acting as alice")


async def test_start_a_conversation_and_approve_its_command(
    browser: Browser,
    running: ConsoleRunning,
    fake_model: FakeResponses,
    codex_home: CodexHome,
    shots: Path,
) -> None:
    fake_model.enqueue((shell("touch hello.txt", escalated=True), message("Created hello.txt.")))
    # a reader in India (UTC+05:30) who reads a 24-hour clock
    page = await open_page(browser, running, "", timezone_id="Asia/Kolkata", locale="en-GB")
    await page.get_by_label("first message").fill("please create hello.txt")
    await page.get_by_role("button", name="Start").click()
    await expect(page).to_have_url(re.compile(r"/s/[0-9a-z]+$"), timeout=WAIT_MS)
    mine = page.locator(".msg.mine")
    await expect(mine.locator(".who")).to_have_text("You")  # not "local:alice"
    await expect(mine).to_contain_text("please create hello.txt")
    await expect(page.locator("h1")).to_contain_text("demo: please create hello.txt")
    card = page.locator("article.card")
    await expect(card.get_by_role("button", name="Allow once")).to_be_visible(timeout=WAIT_MS)
    await expect(card.locator("pre.sh")).to_contain_text("touch hello.txt")
    # each button's explanation said once, the rule "always" adds shown whole beside it
    await expect(card).to_contain_text("Run it this time.")
    await expect(card).not_to_contain_text("allows it, this time only")
    rule = card.get_by_role("button", name="Always allow commands like this")
    await expect(rule).to_be_visible()
    await expect(card.locator("code.rule")).to_have_text("touch hello.txt")
    await page.screenshot(path=shots / "conversation-approval.png", full_page=True)
    await card.get_by_role("button", name="Allow once").click()
    await expect(card.locator(".status")).to_contain_text("by alice", timeout=WAIT_MS)
    await expect(card.get_by_role("button")).to_have_count(0)
    # the decision's time in the reader's own zone (the UTC text its tooltip), not "UTC"
    decided_at = card.locator(".status time")
    await expect(decided_at).to_have_attribute("title", re.compile(r"^\d\d:\d\d UTC$"))
    utc = datetime.fromisoformat(str(await decided_at.get_attribute("datetime")))
    local = utc.astimezone(timezone(timedelta(hours=5, minutes=30)))
    await expect(decided_at).to_have_text(f"{local:%H:%M}")
    await expect(card.locator(".status")).not_to_contain_text("UTC")
    await expect(card.locator("details.hash summary")).to_have_text("Details")
    await expect(page.locator(".msg").last).to_contain_text("Created hello.txt.", timeout=WAIT_MS)
    await expect(card.locator("ol.timeline")).to_contain_text("sent to the agent")
    await expect(card.locator("ol.timeline")).to_contain_text("Done", timeout=WAIT_MS)
    assert (codex_home.workspace / "hello.txt").exists()
    await page.screenshot(path=shots / "conversation-approved.png", full_page=True)
    sessions = await open_page(browser, running, "")
    await expect(sessions.locator("tbody#rows tr")).to_have_count(1)
    await expect(sessions.locator("tbody#rows")).to_contain_text("idle")
    await sessions.screenshot(path=shots / "sessions.png", full_page=True)


def _question(qid: str, header: str, text: str, *labels: str) -> dict[str, object]:
    options = [{"label": label, "description": f"use {label}"} for label in labels]
    return {"id": qid, "header": header, "question": text, "options": options}


async def test_answer_a_multi_question_form_and_be_stopped_while_one_is_missing(
    browser: Browser, running: ConsoleRunning, fake_model: FakeResponses, shots: Path
) -> None:
    questions = [
        _question("color", "Color", "Which color should I use?", "Red", "Blue"),
        _question("name", "Name", "What should the file be called?", "notes.txt", "notes.md"),
    ]
    fake_model.enqueue((request_user_input(questions), message("Thanks, noted.")))

    def memory_texts() -> list[str]:
        return running.memory.texts(ROOM)

    await running.memory.say(ROOM, ALICE, "ask me first")
    interaction = await first_open(running)
    page = await open_page(browser, running, "pending")
    card = page.locator(f"#i-{interaction.id}")
    await card.get_by_label("Blue").check()
    await card.get_by_role("button", name="Submit answers").click()
    await expect(card.get_by_role("alert")).to_have_text("Name needs an answer.")
    await expect(card.locator("fieldset.missing legend")).to_contain_text("Name")
    await page.screenshot(path=shots / "pending-form-missing.png", full_page=True)
    stored = await running.gateway.store.interactions.get(interaction.id)
    assert stored is not None and stored.state is InteractionState.PENDING
    await card.locator('input[name="o.name"]').fill("shopping-list.txt")
    await card.get_by_role("button", name="Submit answers").click()
    await expect(card.locator(".status")).to_contain_text("Answered by alice", timeout=WAIT_MS)
    await expect(card.locator("dl.fields")).to_contain_text("shopping-list.txt")
    await expect(page.locator("#live")).to_contain_text("Nothing waits", timeout=WAIT_MS)
    await running.memory.wait_for(lambda: any("Thanks, noted." in t for t in memory_texts()))
    told = fake_model.last_tool_output()
    assert '"color":{"answers":["Blue"]}' in told and "shopping-list.txt" in told


async def test_a_decision_taken_elsewhere_updates_the_card_and_a_stale_page_is_refused(
    browser: Browser, running: ConsoleRunning, fake_model: FakeResponses, shots: Path
) -> None:
    fake_model.enqueue((shell("touch late.txt", escalated=True), message("ok")))
    await running.memory.say(ROOM, ALICE, "please create late.txt")
    interaction = await first_open(running)
    live = await open_page(browser, running, "pending")
    stale = await open_page(browser, running, "pending", java_script_enabled=False)
    await expect(live.get_by_role("button", name="Allow once")).to_be_visible()
    await live.screenshot(path=shots / "pending.png", full_page=True)
    shown = await memory_card(running)
    assert shown.card is not None
    ack = await running.memory.click(ROOM, ALICE, shown.card.actions[0].token)
    assert ack.accepted, ack.text
    card = live.locator(f"#i-{interaction.id}")
    await expect(card.locator(".status")).to_contain_text("Approved", timeout=WAIT_MS)
    await expect(card.locator(".status")).to_contain_text("by Alice")
    await expect(card.get_by_role("button")).to_have_count(0)
    # the page without live updates still shows the buttons: its click is refused
    await stale.get_by_role("button", name="Deny", exact=True).click()
    # the refusal is an error next to the card it concerns, not a notice at the top
    refused = stale.locator(f"#i-{interaction.id}").get_by_role("alert")
    await expect(refused).to_contain_text("Already decided by Alice")
    await expect(stale.locator("#notice")).to_be_empty()
    await stale.screenshot(path=shots / "stale-refused.png", full_page=True)
    decided = await running.gateway.store.interactions.get(interaction.id)
    assert decided is not None and decided.decision is not None
    assert decided.decision.actor.key() == "memory:alice"
    assert decided.decision.decision.action_id == interaction.actions[0].id


async def test_a_page_holding_a_card_twice_shows_it_once_after_the_next_change(
    browser: Browser, running: ConsoleRunning, fake_model: FakeResponses
) -> None:
    # What a pending page drawn while the card closed left behind (its open and its closed
    # copy): the live update must not keep both for the rest of the page's life.
    fake_model.enqueue((shell("touch twice.txt", escalated=True), message("ok")))
    await running.memory.say(ROOM, ALICE, "please create twice.txt")
    interaction = await first_open(running)
    page = await open_page(browser, running, "pending")
    card = page.locator(f"#i-{interaction.id}")
    await expect(card.get_by_role("button", name="Allow once")).to_be_visible()
    await card.evaluate("shown => shown.after(shown.cloneNode(true))")
    shown = await memory_card(running)
    assert shown.card is not None
    ack = await running.memory.click(ROOM, ALICE, shown.card.actions[0].token)
    assert ack.accepted, ack.text
    await expect(card).to_have_count(1, timeout=WAIT_MS)
    await expect(card.locator(".status")).to_contain_text("Approved", timeout=WAIT_MS)
    await expect(card.get_by_role("button")).to_have_count(0)


async def test_a_card_is_orphaned_when_the_agent_dies(
    browser: Browser, running: ConsoleRunning, fake_model: FakeResponses, shots: Path
) -> None:
    fake_model.enqueue((shell("touch never.txt", escalated=True), message("unreachable")))
    await running.memory.say(ROOM, ALICE, "please create never.txt")
    interaction = await first_open(running)
    page = await open_page(browser, running, f"s/{interaction.session_id}")
    card = page.locator(f"#i-{interaction.id}")
    await expect(card.get_by_role("button", name="Allow once")).to_be_visible()
    await expect(page.locator("#head")).to_contain_text("waiting for approval")
    runner = running.gateway.existing_runner(interaction.session_id)
    assert runner is not None and runner.agent is not None
    await runner.agent.stop()
    # what happened, that nothing reached the agent, and what to do next, once
    await expect(card.locator(".status")).to_have_text(
        re.compile(
            "^The gateway ended the agent process before anyone answered: no answer can reach it"
            " now · your next message starts the agent again$"
        ),
        timeout=WAIT_MS,
    )
    await expect(card.get_by_role("button")).to_have_count(0)
    timeline = card.locator("ol.timeline")
    await expect(timeline).to_contain_text("Ended")
    await expect(timeline).not_to_contain_text("Resolved")
    await expect(timeline).not_to_contain_text("not written")
    await expect(timeline).not_to_contain_text("by gateway")
    await expect(card).not_to_contain_text("nothing written")
    await expect(page.locator("#head")).to_contain_text("failed")
    await page.screenshot(path=shots / "orphaned.png", full_page=True)


async def test_a_file_change_shows_its_whole_diff_and_is_applied_when_allowed(
    browser: Browser,
    read_only: ConsoleRunning,
    fake_model: FakeResponses,
    codex_home: CodexHome,
    shots: Path,
) -> None:
    running = read_only
    (codex_home.workspace / "greeting.py").write_text('print("hello")\nprint("bye")\n')
    patch = (
        "*** Begin Patch\n*** Update File: greeting.py\n@@\n"
        '-print("hello")\n+print("hello, world")\n+print("again")\n*** End Patch\n'
    )
    fake_model.enqueue((apply_patch(patch), message("Patched.")))
    await running.memory.say(ROOM, ALICE, "please greet the world")
    interaction = await first_open(running)
    page = await open_page(browser, running, "pending")
    card = page.locator(f"#i-{interaction.id}")
    diff = card.locator("pre.diff")
    await expect(diff.locator(".del")).to_have_text('-print("hello")')
    await expect(diff.locator(".add")).to_have_text(['+print("hello, world")', '+print("again")'])
    await expect(card).to_contain_text("greeting.py")
    await page.screenshot(path=shots / "pending-diff.png", full_page=True)
    await card.get_by_role("button", name="Allow once").click()
    await expect(card.locator(".status")).to_contain_text("by alice", timeout=WAIT_MS)
    await running.memory.wait_for(lambda: any("Patched." in t for t in running.memory.texts(ROOM)))
    assert (codex_home.workspace / "greeting.py").read_text() == (
        'print("hello, world")\nprint("again")\nprint("bye")\n'
    )


async def test_a_conversation_reads_the_same_after_a_restart(
    browser: Browser,
    codex_bin: str,
    codex_home: CodexHome,
    fake_model: FakeResponses,
    tmp_path: Path,
    shots: Path,
) -> None:
    config = gateway_config(codex_bin, codex_home, tmp_path / "data", extra=CONSOLE_TABLES)
    fake_model.enqueue((shell("touch hello.txt", escalated=True), message("Created hello.txt.")))
    async with console_gateway(config) as first:
        await first.memory.say(ROOM, ALICE, "please create hello.txt")
        shown = await memory_card(first)
        assert shown.card is not None
        ack = await first.memory.click(ROOM, ALICE, shown.card.actions[0].token)
        assert ack.accepted, ack.text
        memory = first.memory
        await memory.wait_for(lambda: any("Created hello.txt." in t for t in memory.texts(ROOM)))
        session = await first.gateway.store.sessions.lookup(ROOM)
        assert session is not None
    async with console_gateway(config) as second:  # a new gateway, a new console
        page = await open_page(browser, second, f"s/{session.id}")
        live = page.locator("#live")
        answer = live.locator(".msg", has_text="Created hello.txt.")
        await expect(answer).to_be_visible()
        await expect(live.locator(".msg", has_text="touch hello.txt")).to_be_visible()
        await expect(live.locator("article.card .status")).to_contain_text("by Alice")
        # the text after the decision reads after its card
        order = await live.evaluate(
            "live => [...live.children].map(e => e.matches('article.card') ? 'card'"
            " : e.textContent.includes('Created hello.txt.') ? 'answer'"
            " : e.textContent.includes('touch hello.txt') ? 'command' : 'other')"
        )
        assert [o for o in order if o != "other"] == ["command", "card", "answer"]
        await page.screenshot(path=shots / "conversation-after-restart.png", full_page=True)


async def test_a_page_shows_a_turn_running_before_any_text(
    browser: Browser, tmp_path: Path, shots: Path
) -> None:
    puppet = PuppetLauncher()
    puppet.hold()  # the session exists, its agent is still starting: no turn yet
    work = tmp_path / "work"
    work.mkdir()
    async with console_gateway(plain_config(tmp_path / "data", work), launcher=puppet) as running:
        await running.memory.say(ROOM, ALICE, "think it through")
        session = await running.gateway.store.sessions.lookup(ROOM)
        assert session is not None
        page = await open_page(browser, running, f"s/{session.id}")
        head = page.locator("#head")
        await expect(head).to_contain_text("idle")
        puppet.release()
        agent, _ = await puppet.prompt()
        agent.start_turn()  # the agent works and says nothing yet
        await expect(head).to_contain_text("running", timeout=5_000)
        await page.screenshot(path=shots / "conversation-running.png", full_page=True)
        agent.complete()
        await expect(head).to_contain_text("idle", timeout=5_000)


async def test_a_platform_problem_shows_on_a_page_already_open(
    browser: Browser, tmp_path: Path, shots: Path
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    async with console_gateway(plain_config(tmp_path / "data", work)) as running:
        page = await open_page(browser, running, "")
        problems = page.locator(".problems")
        await expect(problems).to_have_count(0)
        said = "slack: cannot post in channel C0GENERAL for good (is_archived)"
        running.gateway.platform_problem("slack", said)  # as the Slack outbox reports it
        await expect(problems).to_contain_text(said, timeout=WAIT_MS)
        await expect(problems).to_contain_text("A platform refused for good")
        running.gateway.platform_problem("slack", said)  # said again: kept once
        running.gateway.platform_problem("telegram", "telegram: the bot was blocked")
        await expect(problems.locator("li")).to_have_count(2, timeout=WAIT_MS)
        await page.screenshot(path=shots / "problems-live.png", full_page=True)
