"""The fake Slack holds the real slack-sdk 3.48 and slack-bolt 1.30 to Slack's rules.

Every test drives the real libraries (bolt's ``AsyncApp``, its Socket Mode handler and
aiohttp adapter, slack-sdk's ``AsyncWebClient`` and Socket Mode client) against
``tests/servers/fake_slack.py`` on 127.0.0.1, and asserts what a person in Slack would see
or what the app would be told. Windows are shrunk through ``Pacing`` and the fake's clock is
moved with ``advance``: nothing sleeps to wait.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from slack_bolt.adapter.socket_mode.aiohttp import AsyncSocketModeHandler
from slack_bolt.app.async_app import AsyncApp
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_bolt.response import BoltResponse
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.socket_mode.aiohttp import SocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.socket_mode.response import SocketModeResponse
from slack_sdk.web.async_client import AsyncWebClient

from tests.servers.fake_slack import (
    ALICE,
    APP_TOKEN,
    BOB,
    BOT_TOKEN,
    BOT_USER_ID,
    MAX_CONNECTIONS,
    SCOPES,
    FakeSlack,
    Pacing,
    Person,
    Posted,
)

pytestmark = pytest.mark.timeout(30)
GENERAL = "C0GENERAL"
SECRET = "fake-signing-secret"
FAST = Pacing(ack_timeout=0.3, event_retry_delays=(0.0, 0.0, 0.0))

for name in ("slack_sdk", "slack_bolt"):
    logging.getLogger(name).setLevel(logging.WARNING)  # envelopes at DEBUG carry answers


def card_blocks(prefix: str = "run") -> list[dict[str, Any]]:
    return [
        {"type": "header", "text": {"type": "plain_text", "text": "Run a command?"}},
        {"type": "section", "text": {"type": "mrkdwn", "text": "`ls -la`"}},
        {
            "type": "actions",
            "elements": [
                {
                    "type": "button",
                    "text": {"type": "plain_text", "text": "Allow"},
                    "action_id": f"{prefix}:allow",
                    "value": "token-allow",
                    "style": "primary",
                },
                {
                    "type": "button",
                    "text": {"type": "plain_text", "text": "Deny"},
                    "action_id": f"{prefix}:deny",
                    "value": "token-deny",
                    "style": "danger",
                },
            ],
        },
    ]


def modal_view(title: str = "Answer") -> dict[str, Any]:
    return {
        "type": "modal",
        "callback_id": "form",
        "private_metadata": "submit-token",
        "title": {"type": "plain_text", "text": title},
        "submit": {"type": "plain_text", "text": "Send"},
        "blocks": [
            {
                "type": "input",
                "block_id": "colour",
                "label": {"type": "plain_text", "text": "Colour"},
                "element": {
                    "type": "radio_buttons",
                    "action_id": "pick",
                    "options": [
                        {"text": {"type": "plain_text", "text": t}, "value": t.lower()}
                        for t in ("Red", "Blue")
                    ],
                },
            },
            {
                "type": "input",
                "block_id": "why",
                "optional": True,
                "label": {"type": "plain_text", "text": "Why"},
                "element": {"type": "plain_text_input", "action_id": "text"},
            },
        ],
    }


def web_client(fake: FakeSlack, **kwargs: Any) -> AsyncWebClient:
    return AsyncWebClient(token=BOT_TOKEN, base_url=fake.base_url, **kwargs)


@asynccontextmanager
async def socket_mode(app: AsyncApp, fake: FakeSlack) -> AsyncIterator[AsyncSocketModeHandler]:
    handler = AsyncSocketModeHandler(app, app_token=APP_TOKEN)
    await handler.connect_async()  # type: ignore[no-untyped-call]
    try:
        await fake.wait_for(lambda: fake.connected, 5)
        yield handler
    finally:
        await handler.close_async()  # type: ignore[no-untyped-call]


async def bot_reply(fake: FakeSlack, channel: str, thread_ts: str) -> Posted:
    return await fake.wait_for(
        lambda: next((m for m in fake.replies(channel, thread_ts) if m.from_bot), None), 5
    )


# --- Socket Mode ----------------------------------------------------------------------------


async def test_bolt_in_socket_mode_hears_a_mention_and_a_click_and_acks_them() -> None:
    async with FakeSlack() as fake:
        app = AsyncApp(client=web_client(fake))
        heard: list[dict[str, Any]] = []

        @app.event("app_mention")
        async def on_mention(event: dict[str, Any], client: AsyncWebClient) -> None:
            heard.append(event)
            await client.chat_postMessage(
                channel=event["channel"],
                thread_ts=event["ts"],
                text="Run a command?",
                blocks=card_blocks(),
            )

        @app.event("message")
        async def on_message(event: dict[str, Any]) -> None:
            heard.append(event)

        @app.action("run:allow")
        async def on_allow(
            ack: Callable[[], Awaitable[None]], body: dict[str, Any], client: AsyncWebClient
        ) -> None:
            await ack()
            await client.chat_update(
                channel=body["container"]["channel_id"],
                ts=body["container"]["message_ts"],
                text=f"Allowed by <@{body['user']['id']}>",
                blocks=[],
            )

        async with socket_mode(app, fake):
            said = await fake.say(ALICE, GENERAL, f"<@{BOT_USER_ID}> list the files")
            card = await bot_reply(fake, GENERAL, said.ts)
            assert card.labels == ["Allow", "Deny"]
            assert card.seen.splitlines()[0] == "Run a command?"

            click = await fake.click(ALICE, card, "Allow")
            await asyncio.wait_for(click.settled(), 5)
            assert click.state == "acked"
            assert click.payload["container"]["thread_ts"] == said.ts
            await fake.wait_for(lambda: card.edits, 5)

        assert [e["type"] for e in heard if e.get("user") == ALICE.id] == [
            "message",
            "app_mention",
        ]
        assert card.text == f"Allowed by <@{ALICE.id}>" and card.labels == []
        assert [v.seen.splitlines()[0] for v in card.versions] == [
            "Run a command?",
            f"Allowed by <@{ALICE.id}>",
        ]
        # the bot's own post and edit came back as events, acked, heard by no listener
        echoes = [d for d in fake.delivered("message") if d.payload["event"].get("bot_id")]
        assert echoes and all(d.state == "acked" for d in echoes)
        assert all(e.get("user") == ALICE.id for e in heard)


async def test_an_unacked_event_comes_back_with_retry_attempt_an_unacked_click_does_not() -> None:
    async with FakeSlack(pacing=FAST) as fake:
        seen: list[SocketModeRequest] = []
        client = SocketModeClient(app_token=APP_TOKEN, web_client=web_client(fake))

        async def listener(sm: Any, request: SocketModeRequest) -> None:
            seen.append(request)
            if request.type == "events_api" and request.retry_attempt:
                await sm.send_socket_mode_response(SocketModeResponse(request.envelope_id))

        client.socket_mode_request_listeners.append(listener)
        await client.connect()  # type: ignore[no-untyped-call]
        try:
            await fake.wait_for(lambda: fake.connected, 5)
            dm = fake.dm(ALICE).id
            await fake.say(ALICE, dm, "hello")
            event = fake.delivered("message")[0]
            await asyncio.wait_for(event.settled(), 5)

            posted = await web_client(fake).chat_postMessage(
                channel=GENERAL, text="card", blocks=card_blocks()
            )
            card = fake.message(GENERAL, posted["ts"])
            click = await fake.click(BOB, card, "Deny")
            await asyncio.wait_for(click.settled(), 5)
        finally:
            await client.close()  # type: ignore[no-untyped-call]

    firsts = [r for r in seen if r.type == "events_api" and r.payload["event"]["user"] == ALICE.id]
    assert [(r.retry_attempt, r.retry_reason) for r in firsts] == [(0, ""), (1, "timeout")]
    assert firsts[0].payload["event_id"] == firsts[1].payload["event_id"]
    assert firsts[0].envelope_id != firsts[1].envelope_id
    assert event.state == "acked" and [a.number for a in event.attempts] == [0, 1]
    # Slack does not send an interaction again: the click failed in front of Bob
    assert click.state == "failed" and len(click.attempts) == 1


async def test_a_disconnect_makes_the_sdk_reconnect_and_a_click_still_works() -> None:
    async with FakeSlack() as fake:
        app = AsyncApp(client=web_client(fake))
        clicked: list[str] = []

        @app.action("run:deny")
        async def on_deny(ack: Callable[[], Awaitable[None]], body: dict[str, Any]) -> None:
            await ack()
            clicked.append(body["user"]["id"])

        async with socket_mode(app, fake):
            posted = await web_client(fake).chat_postMessage(
                channel=GENERAL, text="card", blocks=card_blocks()
            )
            await fake.disconnect()
            await fake.wait_for(lambda: fake.connections_opened == 2 and fake.connected == 1, 5)
            click = await fake.click(BOB, fake.message(GENERAL, posted["ts"]), "Deny")
            await asyncio.wait_for(click.settled(), 5)

    assert click.state == "acked" and clicked == [BOB.id]


# --- modals -------------------------------------------------------------------------------


async def test_a_trigger_opens_one_modal_within_3_seconds() -> None:
    async with FakeSlack() as fake:
        app = AsyncApp(client=web_client(fake))
        triggers: asyncio.Queue[str] = asyncio.Queue()

        @app.action("run:allow")
        async def on_allow(ack: Callable[[], Awaitable[None]], body: dict[str, Any]) -> None:
            await ack()
            await triggers.put(body["trigger_id"])

        client = web_client(fake)
        async with socket_mode(app, fake):
            posted = await client.chat_postMessage(
                channel=GENERAL, text="card", blocks=card_blocks()
            )
            card = fake.message(GENERAL, posted["ts"])
            await fake.click(ALICE, card, "Allow")
            late = await asyncio.wait_for(triggers.get(), 5)
            fake.advance(3.5)  # the click is past its 3 s
            with pytest.raises(SlackApiError) as expired:
                await client.views_open(trigger_id=late, view=modal_view())
            assert expired.value.response["error"] == "expired_trigger_id"
            assert fake.modals(ALICE) == []

            await fake.click(ALICE, card, "Allow")
            fresh = await asyncio.wait_for(triggers.get(), 5)
            opened = await client.views_open(trigger_id=fresh, view=modal_view())
            assert fake.modal(ALICE).title == "Answer"
            assert opened["view"]["id"] == fake.modal(ALICE).id
            with pytest.raises(SlackApiError) as again:
                await client.views_open(trigger_id=fresh, view=modal_view())
            assert again.value.response["error"] == "exchanged_trigger_id"


async def test_a_submitted_modal_shows_the_apps_errors_in_place_then_closes() -> None:
    async with FakeSlack() as fake:
        app = AsyncApp(client=web_client(fake))
        answers: list[dict[str, Any]] = []

        @app.action("run:allow")
        async def on_allow(
            ack: Callable[[], Awaitable[None]], body: dict[str, Any], client: AsyncWebClient
        ) -> None:
            await ack()
            await client.views_open(trigger_id=body["trigger_id"], view=modal_view())

        @app.view("form")
        async def on_form(ack: Callable[..., Awaitable[None]], view: dict[str, Any]) -> None:
            values = view["state"]["values"]
            if values["colour"]["pick"]["selected_option"]["value"] != "blue":
                await ack(response_action="errors", errors={"colour": "Blue, please"})
                return
            await ack()
            answers.append(values)

        async with socket_mode(app, fake):
            posted = await web_client(fake).chat_postMessage(
                channel=GENERAL, text="card", blocks=card_blocks()
            )
            await fake.click(ALICE, fake.message(GENERAL, posted["ts"]), "Allow")
            await fake.wait_for(lambda: fake.modals(ALICE), 5)
            modal = fake.modal(ALICE)

            assert await fake.submit(ALICE, {"Why": "because"}) is None  # Colour is required
            assert modal.errors == {"colour": "Please complete this required field."}

            refused = await fake.submit(ALICE, {"colour": "Red"})
            assert refused is not None
            await asyncio.wait_for(refused.settled(), 5)
            assert modal.errors == {"colour": "Blue, please"} and not modal.closed

            accepted = await fake.submit(ALICE, {"Colour": "Blue", "why": "calm"})
            assert accepted is not None
            await asyncio.wait_for(accepted.settled(), 5)

        assert modal.closed and fake.modals(ALICE) == []
        assert answers[0]["why"]["text"] == {"type": "plain_text_input", "value": "calm"}
        assert answers[0]["colour"]["pick"]["selected_option"]["value"] == "blue"


# --- what Slack refuses ---------------------------------------------------------------------


def _many(n: int) -> list[dict[str, Any]]:
    return [{"type": "section", "text": {"type": "mrkdwn", "text": f"line {i}"}} for i in range(n)]


def _button(label: str, action_id: str) -> dict[str, Any]:
    return {"type": "button", "text": {"type": "plain_text", "text": label}, "action_id": action_id}


@pytest.mark.parametrize(
    ("blocks", "pointer"),
    [
        (_many(51), "/blocks"),
        ([{"type": "header", "text": {"type": "plain_text", "text": "h" * 151}}], "/blocks/0/"),
        ([{"type": "section", "text": {"type": "mrkdwn", "text": "s" * 3001}}], "/blocks/0/"),
        ([{"type": "actions", "elements": [_button("b" * 76, "a")]}], "/elements/0/text"),
        (
            [
                {"type": "actions", "elements": [_button("Allow", "same")]},
                {"type": "actions", "elements": [_button("Deny", "same")]},
            ],
            "/blocks/1/elements/0/action_id",
        ),
    ],
    ids=["51-blocks", "header-151", "section-3001", "button-76", "duplicate-action_id"],
)
async def test_blocks_past_slacks_limits_are_refused_with_invalid_blocks(
    blocks: list[dict[str, Any]], pointer: str
) -> None:
    async with FakeSlack() as fake:
        client = web_client(fake)
        with pytest.raises(SlackApiError) as refused:
            await client.chat_postMessage(channel=GENERAL, text="fallback", blocks=blocks)
        assert refused.value.response["error"] == "invalid_blocks"
        assert pointer in " ".join(refused.value.response["response_metadata"]["messages"])
        assert fake.messages(GENERAL) == []
        await client.chat_postMessage(channel=GENERAL, text="fallback", blocks=_many(50))
        assert len(fake.messages(GENERAL)[0].blocks) == 50


async def test_modal_and_text_limits() -> None:
    async with FakeSlack() as fake:
        client = web_client(fake)
        posted = await client.chat_postMessage(channel=GENERAL, text="card", blocks=card_blocks())
        await fake.click(ALICE, fake.message(GENERAL, posted["ts"]), "Allow")
        trigger = fake.delivered("block_actions")[0].payload["trigger_id"]
        with pytest.raises(SlackApiError) as title:
            await client.views_open(trigger_id=trigger, view=modal_view("t" * 25))
        assert title.value.response["error"] == "invalid_arguments"
        assert "/view/title/text" in title.value.response["response_metadata"]["messages"][0]
        radio = modal_view()
        radio["blocks"][0]["element"]["options"] = [
            {"text": {"type": "plain_text", "text": str(i)}, "value": str(i)} for i in range(11)
        ]
        with pytest.raises(SlackApiError) as options:
            await client.views_open(trigger_id=trigger, view=radio)
        assert options.value.response["error"] == "invalid_arguments"
        await client.views_open(trigger_id=trigger, view=modal_view("t" * 24))  # not used up

        fake.advance(1.0)  # a second after the card: not a burst
        with pytest.raises(SlackApiError) as long:
            await client.chat_postMessage(channel=GENERAL, text="x" * 40_001)
        assert long.value.response["error"] == "msg_too_long"


async def test_tokens_and_permanent_failures() -> None:
    async with FakeSlack() as fake:
        wrong_kind = AsyncWebClient(token=APP_TOKEN, base_url=fake.base_url)
        stranger = AsyncWebClient(token="xoxb-not-ours", base_url=fake.base_url)
        client = web_client(fake)
        for api, error in ((wrong_kind, "not_allowed_token_type"), (stranger, "invalid_auth")):
            with pytest.raises(SlackApiError) as refused:
                await api.chat_postMessage(channel=GENERAL, text="hi")
            assert refused.value.response["error"] == error
        with pytest.raises(SlackApiError) as bot_for_socket:
            await client.apps_connections_open(app_token=BOT_TOKEN)
        assert bot_for_socket.value.response["error"] == "not_allowed_token_type"
        assert (await client.auth_test())["user_id"] == BOT_USER_ID
        assert (await client.users_info(user=ALICE.id))["user"]["name"] == "alice"
        assert (await client.conversations_info(channel=GENERAL))["channel"]["is_member"]

        posted = await client.chat_postMessage(channel=GENERAL, text="v1")
        fake.lock(fake.message(GENERAL, posted["ts"]))
        fake.archive(GENERAL)
        fake.add_channel("C0GONE", "gone")
        fake.forget_channel("C0GONE")
        cases = [
            (client.chat_update(channel=GENERAL, ts=posted["ts"], text="v2"), "is_archived"),
            (client.chat_postMessage(channel="C0GONE", text="hi"), "channel_not_found"),
        ]
        for call, error in cases:
            with pytest.raises(SlackApiError) as refused:
                await call
            assert refused.value.response["error"] == error
        fake.channels[GENERAL].archived = False
        with pytest.raises(SlackApiError) as locked:
            await client.chat_update(channel=GENERAL, ts=posted["ts"], text="v2")
        assert locked.value.response["error"] == "cant_update_message"
        fake.revoke()
        with pytest.raises(SlackApiError) as revoked:
            await client.auth_test()
        assert revoked.value.response["error"] == "token_revoked"
        assert fake.message(GENERAL, posted["ts"]).text == "v1"


async def test_reactions_are_checked_as_slack_checks_them() -> None:
    async with FakeSlack() as fake:
        client = web_client(fake)
        said = await fake.say(ALICE, GENERAL, "hello")
        mark = {"channel": GENERAL, "timestamp": said.ts, "name": "writing_hand"}
        await client.reactions_add(**mark)
        assert said.reactions == {"writing_hand": [BOT_USER_ID]}
        assert fake.message(GENERAL, said.ts).json()["reactions"][0]["count"] == 1
        cases: list[tuple[Callable[[], Awaitable[Any]], str]] = [
            (lambda: client.reactions_add(**mark), "already_reacted"),
            (lambda: client.reactions_add(**{**mark, "name": "no-such-emoji"}), "invalid_name"),
            (
                lambda: client.reactions_add(**{**mark, "timestamp": "1.000009"}),
                "message_not_found",
            ),
            (
                lambda: client.api_call("reactions.add", json={"channel": GENERAL, "name": "eyes"}),
                "no_item_specified",
            ),
            (lambda: client.reactions_remove(**{**mark, "name": "eyes"}), "no_reaction"),
        ]
        for call, error in cases:
            with pytest.raises(SlackApiError) as refused:
                await call()
            assert refused.value.response["error"] == error
        await client.reactions_remove(**mark)
        assert said.reactions == {}
    async with FakeSlack(scopes=SCOPES - {"reactions:write"}) as fake:
        said = await fake.say(ALICE, GENERAL, "hello")
        with pytest.raises(SlackApiError) as unscoped:
            await web_client(fake).reactions_add(
                channel=GENERAL, timestamp=said.ts, name="writing_hand"
            )
        assert unscoped.value.response["error"] == "missing_scope"
        assert unscoped.value.response["needed"] == "reactions:write"
        revoked = AsyncWebClient(token="xoxb-not-ours", base_url=fake.base_url)
        with pytest.raises(SlackApiError) as stranger:
            await revoked.reactions_add(channel=GENERAL, timestamp=said.ts, name="eyes")
        assert stranger.value.response["error"] == "invalid_auth"


# --- rates --------------------------------------------------------------------------------


async def test_a_burst_of_chat_update_gets_429_that_the_sdks_retry_handler_honours() -> None:
    async with FakeSlack(pacing=Pacing(update_limit=3, update_window=1.0)) as fake:
        plain = web_client(fake, retry_handlers=[])
        posted = await plain.chat_postMessage(channel=GENERAL, text="0")
        for n in range(1, 4):
            await plain.chat_update(channel=GENERAL, ts=posted["ts"], text=str(n))
        with pytest.raises(SlackApiError) as limited:
            await plain.chat_update(channel=GENERAL, ts=posted["ts"], text="lost")
        assert limited.value.response.status_code == 429
        assert limited.value.response["error"] == "ratelimited"
        assert limited.value.response.headers["Retry-After"] == "1"

        retrying = web_client(
            fake, retry_handlers=[AsyncRateLimitErrorRetryHandler(max_retry_count=2)]
        )
        await retrying.chat_update(channel=GENERAL, ts=posted["ts"], text="final")

        message = fake.message(GENERAL, posted["ts"])
        assert message.text == "final"
        assert [v.text for v in message.versions] == ["0", "1", "2", "3", "final"]
        assert [m for m, _, _ in fake.too_many] == ["chat.update", "chat.update"]


async def test_posts_are_paced_per_channel() -> None:
    async with FakeSlack() as fake:
        client = web_client(fake)
        await client.chat_postMessage(channel=GENERAL, text="one")
        with pytest.raises(SlackApiError) as limited:
            await client.chat_postMessage(channel=GENERAL, text="two")
        assert limited.value.response.status_code == 429
        await client.chat_postMessage(channel=fake.dm(ALICE).id, text="elsewhere")
        fake.advance(1.0)
        await client.chat_postMessage(channel=GENERAL, text="two")
        assert [m.text for m in fake.messages(GENERAL)] == ["one", "two"]


# --- files --------------------------------------------------------------------------------


async def test_files_upload_v2_lands_in_the_thread_in_three_steps() -> None:
    async with FakeSlack() as fake:
        client = web_client(fake)
        top = await client.chat_postMessage(channel=GENERAL, text="a long answer follows")
        content = "line\n" * 5000
        done = await client.files_upload_v2(
            channel=GENERAL,
            thread_ts=top["ts"],
            content=content,
            filename="answer.txt",
            title="The whole answer",
            initial_comment="Too long for a message: attached",
        )
        assert done["file"]["name"] == "answer.txt"
        assert [m for m, _ in fake.calls if m.startswith("files.")] == [
            "files.getUploadURLExternal",
            "files.completeUploadExternal",
        ]
        (uploaded,) = fake.files
        assert uploaded.content == content.encode() and uploaded.title == "The whole answer"
        (reply,) = fake.replies(GENERAL, top["ts"])
        assert reply.files == [uploaded] and reply.text == "Too long for a message: attached"


# --- HTTP mode ----------------------------------------------------------------------------


@asynccontextmanager
async def http_app(app: AsyncApp) -> AsyncIterator[str]:
    runner = web.AppRunner(app.web_app(path="/slack/events"))
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    server = site._server
    assert server is not None
    port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]
    try:
        yield f"http://127.0.0.1:{port}/slack/events"
    finally:
        await runner.cleanup()


async def test_http_mode_signed_posts_are_accepted_and_a_bad_signature_refused() -> None:
    async with FakeSlack(pacing=FAST) as fake:
        app = AsyncApp(client=web_client(fake), signing_secret=SECRET)
        heard: list[str] = []

        @app.event("message")
        async def on_message(event: dict[str, Any]) -> None:
            heard.append(event["text"])

        async with http_app(app) as url:
            assert not await fake.use_request_url(url, "another-secret")
            assert await fake.use_request_url(url, SECRET)
            dm = fake.dm(ALICE).id
            await fake.say(ALICE, dm, "signed")
            signed = fake.delivered("message")[0]
            await asyncio.wait_for(signed.settled(), 5)

            fake.signing_secret = "rotated-elsewhere"  # the app still has the old one
            await fake.say(ALICE, dm, "forged")
            forged = fake.delivered("message")[1]
            await asyncio.wait_for(forged.settled(), 5)

    assert signed.state == "acked" and [a.status for a in signed.attempts] == [200]
    assert forged.state == "failed" and [a.status for a in forged.attempts] == [401] * 4
    assert heard == ["signed"]


async def test_a_slash_command_answer_is_shown_to_its_sender_only() -> None:
    async with FakeSlack() as fake:
        app = AsyncApp(client=web_client(fake))

        @app.command("/agent")
        async def on_agent(ack: Callable[..., Awaitable[None]], command: dict[str, Any]) -> None:
            await ack(f"stopping ({command['text']})")

        async with socket_mode(app, fake):
            delivery = await fake.slash(BOB, GENERAL, "/agent", "stop")
            assert delivery is not None
            await asyncio.wait_for(delivery.settled(), 5)
            assert await fake.slash(BOB, GENERAL, "/nope") is None

    assert [e.seen for e in fake.ephemerals(BOB)] == [
        "stopping (stop)",
        "/nope is not a valid command.",
    ]
    assert fake.ephemerals(ALICE) == [] and fake.messages(GENERAL) == []


async def test_http_mode_retries_carry_x_slack_retry_num() -> None:
    async with FakeSlack(pacing=FAST) as fake:
        app = AsyncApp(client=web_client(fake), signing_secret=SECRET)
        retries: list[str | None] = []
        heard: list[str] = []

        @app.middleware
        async def busy_at_first(
            request: AsyncBoltRequest, response: BoltResponse, next: Callable[[], Awaitable[Any]]
        ) -> Any:
            if request.body.get("type") == "url_verification":
                return await next()
            retry = request.headers.get("x-slack-retry-num", [None])[0]
            retries.append(retry)
            if retry is None:
                return BoltResponse(status=503, body="busy")
            return await next()

        @app.event("message")
        async def on_message(event: dict[str, Any]) -> None:
            heard.append(event["text"])

        async with http_app(app) as url:
            assert await fake.use_request_url(url, SECRET)
            await fake.say(ALICE, fake.dm(ALICE).id, "once")
            delivery = fake.delivered("message")[0]
            await asyncio.wait_for(delivery.settled(), 5)
            await fake.wait_for(lambda: heard, 5)

    assert retries == [None, "1"]
    assert [a.status for a in delivery.attempts] == [503, 200]
    assert heard == ["once"]


# --- storms and outages ---------------------------------------------------------------------


async def test_a_storm_answers_every_write_429_until_it_passes() -> None:
    async with FakeSlack() as fake:
        client = web_client(fake, retry_handlers=[])
        fake.storm(10, retry_after=7)
        for call in (
            client.chat_postMessage(channel=GENERAL, text="card"),
            client.chat_postEphemeral(channel=GENERAL, user=ALICE.id, text="only you"),
        ):
            with pytest.raises(SlackApiError) as limited:
                await call
            assert limited.value.response.headers["Retry-After"] == "7"
        assert (await client.auth_test())["ok"]  # reads are not writes
        fake.advance(10)
        await client.chat_postMessage(channel=GENERAL, text="card")
        await client.chat_postEphemeral(channel=GENERAL, user=ALICE.id, text="only you")
        assert [m.text for m in fake.messages(GENERAL)] == ["card"]
        assert [e.text for e in fake.ephemerals(ALICE, GENERAL)] == ["only you"]
        assert fake.ephemerals(BOB) == []


async def test_when_slack_is_down_calls_fail_and_socket_mode_comes_back_after() -> None:
    async with FakeSlack() as fake:
        app = AsyncApp(client=web_client(fake))
        handler = AsyncSocketModeHandler(app, app_token=APP_TOKEN, ping_interval=0.1)
        await handler.connect_async()  # type: ignore[no-untyped-call]
        try:
            await fake.wait_for(lambda: fake.connected, 5)
            await fake.go_down()
            assert fake.connected == 0
            with pytest.raises(aiohttp.ClientError):
                await web_client(fake).chat_postMessage(channel=GENERAL, text="lost")
            await fake.come_back()
            await fake.wait_for(lambda: fake.connected, 10)
            assert fake.connections_opened >= 2
            await web_client(fake).chat_postMessage(channel=GENERAL, text="back")
        finally:
            await handler.close_async()  # type: ignore[no-untyped-call]
        assert [m.text for m in fake.messages(GENERAL)] == ["back"]


# --- conversations --------------------------------------------------------------------------


async def test_thread_replies_and_a_shared_channels_guest_read_as_slack_sends_them() -> None:
    guest = Person("U0GUEST", "guest", team="T0OTHER")
    async with FakeSlack() as fake:
        fake.add_person(guest)
        fake.add_channel("C0SHARED", "shared", members={ALICE.id, guest.id}, shared=True)
        fake.add_channel("C0QUIET", "quiet", members={ALICE.id}, bot_member=False)
        client = web_client(fake)
        top = await fake.say(ALICE, "C0SHARED", f"<@{BOT_USER_ID}> start")
        card = await client.chat_postMessage(channel="C0SHARED", thread_ts=top.ts, text="card")
        reply = await fake.say(guest, "C0SHARED", "me too", thread_ts=card["ts"])
        await fake.say(ALICE, "C0QUIET", f"<@{BOT_USER_ID}> not here")
        with pytest.raises(SlackApiError) as outside:
            await client.chat_postMessage(channel="C0QUIET", text="hi")
        assert outside.value.response["error"] == "not_in_channel"

        assert reply.thread_ts == top.ts  # a reply to a reply is in the same thread
        assert [m.text for m in fake.replies("C0SHARED", top.ts)] == ["card", "me too"]
        assert [m.text for m in fake.messages("C0SHARED")] == [f"<@{BOT_USER_ID}> start"]
        people = [d.payload for d in fake.deliveries if not d.payload["event"].get("bot_id")]
        assert [(p["event"]["type"], p["event"]["channel"]) for p in people] == [
            ("message", "C0SHARED"),
            ("app_mention", "C0SHARED"),
            ("message", "C0SHARED"),
        ]
        guest_event = people[2]
        assert guest_event["is_ext_shared_channel"] is True
        assert guest_event["event"]["user_team"] == "T0OTHER"
        assert guest_event["event"]["thread_ts"] == top.ts
        assert guest_event["event"]["parent_user_id"] == ALICE.id


async def test_closing_a_modal_tells_the_app_only_if_it_asked() -> None:
    async with FakeSlack() as fake:
        client = web_client(fake)
        posted = await client.chat_postMessage(channel=GENERAL, text="card", blocks=card_blocks())
        card = fake.message(GENERAL, posted["ts"])
        for notify in (False, True):
            await fake.click(ALICE, card, "Allow")
            trigger = fake.delivered("block_actions")[-1].payload["trigger_id"]
            await client.views_open(
                trigger_id=trigger, view=modal_view() | {"notify_on_close": notify}
            )
            closed = await fake.dismiss(ALICE)
            assert fake.modals(ALICE) == []
            assert (closed is not None) is notify
        assert [d.type for d in fake.delivered("view_closed")] == ["view_closed"]


# --- many connections (several gateway hosts on one app, issue 19) ---------------------------


class RawConnection:
    """One Socket Mode connection opened by hand: what it was sent, acked or not."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse, *, acks: bool) -> None:
        self.ws, self.acks = ws, acks
        self.hello: dict[str, Any] = {}
        self.envelopes: list[dict[str, Any]] = []
        self.closed = asyncio.Event()

    async def read(self, fake: FakeSlack) -> None:
        async for message in self.ws:
            if message.type != aiohttp.WSMsgType.TEXT:
                continue
            data = message.json()
            if data.get("type") in ("hello", "disconnect"):
                self.hello = data
                continue
            self.envelopes.append(data)
            if self.acks:
                await self.ws.send_json({"envelope_id": data["envelope_id"]})
            await fake._notify()
        self.closed.set()


async def open_raw(
    fake: FakeSlack, session: aiohttp.ClientSession, tasks: asyncio.TaskGroup, *, acks: bool
) -> RawConnection:
    client = AsyncWebClient(base_url=fake.base_url)
    opened = await client.apps_connections_open(app_token=APP_TOKEN)
    ws = await session.ws_connect(str(opened["url"]))
    connection = RawConnection(ws, acks=acks)
    tasks.create_task(connection.read(fake))
    return connection


async def test_each_envelope_goes_to_one_connection_at_random_and_a_missed_event_to_another() -> (
    None
):
    async with FakeSlack(pacing=FAST, seed=7) as fake, aiohttp.ClientSession() as session:
        async with asyncio.TaskGroup() as tasks:
            mute = await open_raw(fake, session, tasks, acks=False)
            await fake.wait_for(lambda: fake.connected == 1, 5)
            mute_n = fake.connections[-1].n
            others = [await open_raw(fake, session, tasks, acks=True) for _ in range(2)]
            await fake.wait_for(lambda: fake.connected == 3, 5)
            dm = fake.dm(ALICE).id
            for n in range(12):
                await fake.say(ALICE, dm, f"message {n}")
            spread = fake.delivered("message")
            for delivery in spread:
                await asyncio.wait_for(delivery.settled(), 5)
            missed = await fake.say(ALICE, dm, "to the mute one", to=mute_n)
            [again] = [d for d in fake.delivered("message") if d not in spread]
            await asyncio.wait_for(again.settled(), 5)
            card = await web_client(fake).chat_postMessage(
                channel=GENERAL, text="card", blocks=card_blocks()
            )
            click = await fake.click(BOB, fake.message(GENERAL, card["ts"]), "Deny", to=mute_n)
            await asyncio.wait_for(click.settled(), 5)
            for connection in (mute, *others):
                await connection.ws.close()

    # every envelope went to exactly one connection, and the three shared them
    sent = [e["envelope_id"] for c in (mute, *others) for e in c.envelopes]
    assert len(sent) == len(set(sent))
    used = {d.attempts[0].connection for d in spread}
    assert len(used) == 3, used
    # an event the mute connection never acked came again on another, and was acked there
    assert [a.connection == mute_n for a in again.attempts] == [True, False]
    assert again.state == "acked" and again.attempts[1].number == 1
    assert again.payload["event"]["ts"] == missed.ts
    # a click it never acked is not given again: the person sees it fail
    assert click.state == "failed" and [a.connection for a in click.attempts] == [mute_n]


async def test_ten_connections_per_app_and_an_eleventh_is_told_too_many_websockets() -> None:
    async with FakeSlack() as fake, aiohttp.ClientSession() as session:
        async with asyncio.TaskGroup() as tasks:
            ten = [await open_raw(fake, session, tasks, acks=True) for _ in range(MAX_CONNECTIONS)]
            await fake.wait_for(lambda: fake.connected == MAX_CONNECTIONS, 5)
            eleventh = await open_raw(fake, session, tasks, acks=True)
            await asyncio.wait_for(eleventh.closed.wait(), 5)
            assert fake.connected == MAX_CONNECTIONS
            for connection in ten:
                await connection.ws.close()

    assert eleventh.hello == {
        "type": "disconnect",
        "reason": "too_many_websockets",
        "debug_info": {"host": "fake"},
    }
    assert fake.too_many_websockets == 1
    assert [c.hello["num_connections"] for c in ten] == list(range(1, MAX_CONNECTIONS + 1))
