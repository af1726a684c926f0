"""The fake Discord against a bare real discord.py Client: what it serves and what it refuses."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import discord
import pytest
from discord import ui

from tests.discord_harness import connected
from tests.servers.fake_discord import ALICE, BOB, BOT, FakeDiscord, Interaction

pytestmark = pytest.mark.timeout(30)


class Bare(discord.Client):
    """A client that only records what reaches it."""

    def __init__(self, *, message_content: bool = False) -> None:
        intents = discord.Intents.default()
        intents.message_content = message_content
        super().__init__(intents=intents, guild_ready_timeout=0.05)
        self.seen: list[discord.Message] = []
        self.interacted: list[discord.Interaction] = []
        self.changed = asyncio.Event()
        self.resumed = asyncio.Event()

    async def on_message(self, message: discord.Message) -> None:
        self.seen.append(message)
        self.changed.set()

    async def on_interaction(self, interaction: discord.Interaction) -> None:
        self.interacted.append(interaction)
        self.changed.set()

    async def on_resumed(self) -> None:
        self.resumed.set()

    async def wait_seen(self, count: int) -> list[discord.Message]:
        while len(self.seen) < count:
            self.changed.clear()
            await self.changed.wait()
        return self.seen

    async def wait_interaction(self, count: int) -> discord.Interaction:
        while len(self.interacted) < count:
            self.changed.clear()
            await self.changed.wait()
        return self.interacted[count - 1]


def _channel(client: discord.Client, fake: FakeDiscord) -> discord.TextChannel:
    channel = client.get_channel(int(fake.general.id))
    assert isinstance(channel, discord.TextChannel)
    return channel


async def test_connects_and_sees_messages_as_the_intents_allow(fake_discord: FakeDiscord) -> None:
    client = Bare()
    async with connected(client, fake_discord):
        assert fake_discord.gateway_query["v"] == "10"
        assert fake_discord.gateway_query["encoding"] == "json"
        assert [g.name for g in client.guilds] == ["Fake Guild"]
        assert [f["op"] for f in fake_discord.gateway_frames[:2]] == [1, 2]  # beat, IDENTIFY
        await fake_discord.say(ALICE, fake_discord.general, "hello there")
        await fake_discord.say(ALICE, fake_discord.general, "hi bot", mentions=(BOT,))
        await fake_discord.say(ALICE, fake_discord.dm(ALICE), "in private")
        seen = await client.wait_seen(3)
    assert [m.content for m in seen] == ["", "hi bot", "in private"]
    assert seen[0].author.name == "alice" and seen[0].guild is not None
    assert isinstance(seen[2].channel, discord.DMChannel)


async def test_message_content_not_enabled_closes_4014(fake_discord: FakeDiscord) -> None:
    with pytest.raises(discord.PrivilegedIntentsRequired):
        async with connected(Bare(message_content=True), fake_discord):
            pass
    assert fake_discord.closes == [4014]


async def test_message_content_enabled_shows_every_message(fake_discord: FakeDiscord) -> None:
    fake_discord.message_content_enabled = True
    client = Bare(message_content=True)
    async with connected(client, fake_discord):
        await fake_discord.say(ALICE, fake_discord.general, "plain words")
        seen = await client.wait_seen(1)
    assert seen[0].content == "plain words"


async def test_wrong_token_is_refused(fake_discord: FakeDiscord) -> None:
    with pytest.raises(discord.LoginFailure):
        async with connected(Bare(), fake_discord, token="not-the-token"):
            pass


class Approve(ui.DynamicItem[ui.Button[Any]], template=r"agw:(?P<token>\w+)"):
    def __init__(self, token: str) -> None:
        super().__init__(ui.Button(label=f"Allow {token}", custom_id=f"agw:{token}"))
        self.token = token

    @classmethod
    async def from_custom_id(
        cls, interaction: discord.Interaction, item: ui.Item[Any], match: Any
    ) -> Approve:
        return cls(match["token"])

    async def callback(self, interaction: discord.Interaction) -> None:
        await interaction.response.defer()
        await interaction.followup.send(f"Allowed {self.token}", ephemeral=True)


class WithDynamic(Bare):
    async def setup_hook(self) -> None:
        self.add_dynamic_items(Approve)


async def test_embed_with_buttons_click_defer_and_followup(fake_discord: FakeDiscord) -> None:
    client = WithDynamic()
    async with connected(client, fake_discord):
        view = ui.View(timeout=None).add_item(Approve("t1")).add_item(Approve("t2"))
        embed = discord.Embed(description="Run `ls`?").set_footer(text="waiting")
        sent = await _channel(client, fake_discord).send(
            embed=embed, view=view, allowed_mentions=discord.AllowedMentions.none()
        )
        card = fake_discord.message(str(sent.id))
        assert card.labels == ["Allow t1", "Allow t2"]
        assert card.embeds[0]["description"] == "Run `ls`?"
        assert card.allowed_mentions == {"parse": []}
        click = await fake_discord.click(ALICE, card, "Allow t2")
        await fake_discord.wait_for(lambda: click.followups)
    assert click.callback_type == 6
    assert click.followups[0].content == "Allowed t2" and click.followups[0].ephemeral


class Ask(ui.Modal, title="Two questions"):
    colour: ui.Label[Any] = ui.Label(
        text="Colour", description="Which one?", component=ui.RadioGroup(custom_id="colour")
    )
    why: ui.TextInput[Any] = ui.TextInput(label="Why", custom_id="why", required=False)

    def __init__(self) -> None:
        super().__init__(custom_id="agw:form1")
        radio = self.colour.component
        assert isinstance(radio, ui.RadioGroup)
        radio.add_option(label="Red", value="red")
        radio.add_option(label="Blue", value="blue")
        self.answers: dict[str, Any] = {}

    async def on_submit(self, interaction: discord.Interaction) -> None:
        radio = self.colour.component
        assert isinstance(radio, ui.RadioGroup)
        self.answers = {"colour": radio.value, "why": self.why.value}
        await interaction.response.send_message("Thanks", ephemeral=True)


async def test_send_modal_and_submit(fake_discord: FakeDiscord) -> None:
    client = Bare()
    modal = Ask()
    async with connected(client, fake_discord):
        client.interacted.clear()
        msg = await _channel(client, fake_discord).send(
            "q", view=ui.View().add_item(ui.Button(label="Answer…", custom_id="open"))
        )
        opener = await fake_discord.click(ALICE, fake_discord.message(str(msg.id)), "Answer…")
        interaction = await client.wait_interaction(1)
        await interaction.response.send_modal(modal)
        assert opener.modal is not None and opener.modal["title"] == "Two questions"
        submit = await fake_discord.submit(ALICE, opener, {"colour": "blue", "why": "calm"})
        await fake_discord.wait_for(lambda: submit.original)
    assert modal.answers == {"colour": "blue", "why": "calm"}
    assert submit.original is not None and submit.original.content == "Thanks"


async def test_limits_are_refused_with_50035(fake_discord: FakeDiscord) -> None:
    client = Bare()
    async with connected(client, fake_discord):
        channel = _channel(client, fake_discord)
        too_much: list[dict[str, Any]] = [
            {"content": "x" * 2001},
            {"embed": discord.Embed(description="x" * 4097)},
            {"embeds": [discord.Embed(description="x" * 4000) for _ in range(2)]},
        ]
        for kwargs in too_much:
            with pytest.raises(discord.HTTPException) as refused:
                await channel.send(**kwargs)
            assert refused.value.code == 50035
        view = ui.View()
        view.add_item(ui.Button(label="x" * 81, custom_id="long-label"))
        with pytest.raises(discord.HTTPException) as refused:
            await channel.send("card", view=view)
        assert refused.value.code == 50035
    assert not fake_discord.bot_messages(fake_discord.general)


async def test_one_callback_within_three_seconds(fake_discord: FakeDiscord) -> None:
    client = Bare()
    async with connected(client, fake_discord):
        late = await fake_discord.forge(
            ALICE, fake_discord.general, {"custom_id": "a", "component_type": 2}
        )
        twice = await fake_discord.forge(
            ALICE, fake_discord.general, {"custom_id": "b", "component_type": 2}
        )
        first = await client.wait_interaction(1)
        second = await client.wait_interaction(2)
        await second.response.send_message("once", ephemeral=True)
        async with aiohttp.ClientSession() as http:  # discord.py itself refuses a second one
            url = f"{fake_discord.api_base}/interactions/{second.id}/{second.token}/callback"
            async with http.post(url, json={"type": 6}) as again:
                assert again.status == 400
                assert (await again.json())["code"] == 40060
        fake_discord.advance(3.5)
        with pytest.raises(discord.NotFound) as expired:
            await first.response.defer()
        assert expired.value.code == 10062
    assert late.callback is None and late.refused == [10062]
    assert twice.refused == [40060]


async def test_followups_expire_after_15_minutes(fake_discord: FakeDiscord) -> None:
    client = Bare()
    async with connected(client, fake_discord):
        await fake_discord.forge(
            ALICE, fake_discord.general, {"custom_id": "a", "component_type": 2}
        )
        interaction = await client.wait_interaction(1)
        await interaction.response.defer(ephemeral=True, thinking=True)
        fake_discord.advance(901)
        with pytest.raises(discord.HTTPException) as expired:
            await interaction.followup.send("too late")
        assert expired.value.code == 50027


async def test_429_with_via_is_retried(fake_discord: FakeDiscord) -> None:
    client = Bare()
    async with connected(client, fake_discord):
        fake_discord.storm(requests=1, retry_after=0.05)
        sent = await _channel(client, fake_discord).send("after a 429")
    assert fake_discord.message(str(sent.id)).content == "after a 429"
    assert len(fake_discord.too_many) == 1


async def test_edits_past_five_per_five_seconds_are_paced(fake_discord: FakeDiscord) -> None:
    fake_discord.pacing.edit_window = 0.3
    client = Bare()
    async with connected(client, fake_discord):
        sent = await _channel(client, fake_discord).send("v0")
        for n in range(1, 8):
            await sent.edit(content=f"v{n}")
    card = fake_discord.message(str(sent.id))
    assert [v.content for v in card.versions] == [f"v{n}" for n in range(8)]
    edits = [m for m, path, _ in fake_discord.calls if m == "PATCH" and "/messages/" in path]
    assert len(edits) == 7 + len(fake_discord.too_many)  # discord.py waited on the headers


async def test_reconnect_resumes_and_replays_missed_events(fake_discord: FakeDiscord) -> None:
    client = Bare()
    async with connected(client, fake_discord):
        await fake_discord.reconnect()
        await fake_discord.say(ALICE, fake_discord.dm(ALICE), "while away")
        await asyncio.wait_for(client.resumed.wait(), 10)
        seen = await client.wait_seen(1)
    assert [m.content for m in seen] == ["while away"]
    assert fake_discord.identified == 1 and fake_discord.resumed == 1


async def test_archived_thread_refuses_edits_until_unarchived(fake_discord: FakeDiscord) -> None:
    client = Bare()
    async with connected(client, fake_discord):
        asked = await fake_discord.say(ALICE, fake_discord.general, "help", mentions=(BOT,))
        message = (await client.wait_seen(1))[0]
        assert message.id == int(asked.id)
        thread = await message.create_thread(name="help")
        card = await thread.send("card")
        await fake_discord.archive(fake_discord.channels[str(thread.id)])
        with pytest.raises(discord.HTTPException) as refused:
            await card.edit(content="decided")
        assert refused.value.code == 50083
        await thread.edit(archived=False)
        await card.edit(content="decided")
        in_thread = fake_discord.channels[str(thread.id)]
        await fake_discord.say(ALICE, in_thread, "thanks", mentions=(BOT,))
        seen = await client.wait_seen(3)  # the mention, the bot's own card, the reply
        reply = seen[2]
    assert [m.author.bot for m in seen] == [False, True, False]
    assert (
        isinstance(reply.channel, discord.Thread) and reply.channel.parent_id == message.channel.id
    )
    assert reply.content == "thanks"
    assert fake_discord.message(str(card.id)).content == "decided"


async def test_command_sync_and_slash(fake_discord: FakeDiscord) -> None:
    client = Bare()
    tree = discord.app_commands.CommandTree(client)
    ran: list[str] = []

    @tree.command(name="status", description="What runs here")
    async def status(interaction: discord.Interaction) -> None:
        ran.append(interaction.user.name)
        await interaction.response.send_message("idle", ephemeral=True)

    async with connected(client, fake_discord):
        guild = discord.Object(int(fake_discord.general.guild_id or 0))
        tree.copy_global_to(guild=guild)
        await tree.sync(guild=guild)
        await tree.sync()
        slash = await fake_discord.slash(ALICE, fake_discord.general, "status")
        await fake_discord.wait_for(lambda: slash.original)
    assert ran == ["alice"]
    assert slash.original is not None and slash.original.ephemeral
    assert [c["name"] for c in fake_discord.commands[fake_discord.general.guild_id]] == ["status"]
    assert [c["name"] for c in fake_discord.commands[None]] == ["status"]


async def test_upload_past_the_size_limit_is_refused(fake_discord: FakeDiscord) -> None:
    import io

    fake_discord.attachment_size_limit = 1000
    client = Bare()
    async with connected(client, fake_discord):
        channel = _channel(client, fake_discord)
        ok = await channel.send(file=discord.File(io.BytesIO(b"x" * 10), filename="a.txt"))
        with pytest.raises(discord.HTTPException) as refused:
            await channel.send(file=discord.File(io.BytesIO(b"x" * 1001), filename="b.txt"))
    assert refused.value.code == 40005
    assert fake_discord.message(str(ok.id)).attachments[0]["filename"] == "a.txt"


async def _raw_callback(fake: FakeDiscord, interaction: Interaction, body: Any) -> dict[str, Any]:
    """A callback as sent on the wire (discord.py checks some limits itself first)."""
    url = f"{fake.api_base}/interactions/{interaction.id}/{interaction.token}/callback"
    async with aiohttp.ClientSession() as http, http.post(url, json=body) as answer:
        body = await answer.json() if answer.status != 204 else {}
        return {"status": answer.status, **body}


def _modal(**overrides: Any) -> dict[str, Any]:
    radio = {
        "type": 21,
        "custom_id": "pick",
        "options": [{"label": "A", "value": "a"}, {"label": "B", "value": "b"}],
    }
    data: dict[str, Any] = {
        "custom_id": "agw:form",
        "title": "Questions",
        "components": [{"type": 18, "label": "Pick", "description": "One", "component": radio}],
    }
    return {"type": 9, "data": {**data, **overrides}}


@pytest.mark.parametrize(
    "overrides",
    [
        {"title": "x" * 46},
        {"custom_id": "agw:" + "x" * 97},
        {"components": [{"type": 10, "content": "note"}] * 6},
        {
            "components": [
                {"type": 18, "label": "x" * 46, "component": {"type": 4, "custom_id": "a"}}
            ]
        },
        {
            "components": [
                {
                    "type": 18,
                    "label": "L",
                    "description": "d" * 101,
                    "component": {"type": 4, "custom_id": "a"},
                }
            ]
        },
        {
            "components": [
                {
                    "type": 18,
                    "label": "L",
                    "component": {
                        "type": 21,
                        "custom_id": "r",
                        "options": [{"label": "A", "value": "a"}],
                    },
                }
            ]
        },
        {
            "components": [
                {
                    "type": 18,
                    "label": "L",
                    "component": {
                        "type": 22,
                        "custom_id": "c",
                        "options": [{"label": str(n), "value": str(n)} for n in range(11)],
                    },
                }
            ]
        },
        {
            "components": [
                {
                    "type": 18,
                    "label": "L",
                    "component": {
                        "type": 3,
                        "custom_id": "s",
                        "options": [{"label": str(n), "value": str(n)} for n in range(26)],
                    },
                }
            ]
        },
        {
            "components": [
                {
                    "type": 1,
                    "components": [{"type": 4, "custom_id": "t", "label": "T", "max_length": 4001}],
                }
            ]
        },
    ],
)
async def test_modal_limits_are_refused_with_50035(
    fake_discord: FakeDiscord, overrides: dict[str, Any]
) -> None:
    click = await fake_discord.forge(
        ALICE, fake_discord.general, {"custom_id": "a", "component_type": 2}
    )
    answer = await _raw_callback(fake_discord, click, _modal(**overrides))
    assert (answer["status"], answer["code"]) == (400, 50035)
    assert click.modal is None and click.callback is None
    opened = await _raw_callback(fake_discord, click, _modal())  # a valid one still may
    assert opened["status"] == 204 and click.modal is not None


async def test_a_modal_only_as_the_first_answer_and_never_to_a_modal(
    fake_discord: FakeDiscord,
) -> None:
    click = await fake_discord.forge(
        ALICE, fake_discord.general, {"custom_id": "a", "component_type": 2}
    )
    assert (await _raw_callback(fake_discord, click, {"type": 5}))["status"] == 204
    assert (await _raw_callback(fake_discord, click, _modal()))["code"] == 40060
    other = await fake_discord.forge(
        ALICE, fake_discord.general, {"custom_id": "b", "component_type": 2}
    )
    await _raw_callback(fake_discord, other, _modal())
    submit = await fake_discord.submit(ALICE, other, {"pick": "b"})
    assert submit.data["components"][0]["component"] == {
        "type": 21,
        "custom_id": "pick",
        "id": 1,
        "value": "b",
    }
    assert (await _raw_callback(fake_discord, submit, _modal()))["code"] == 50035


async def test_missing_permission_is_refused_and_visible_to_the_client(
    fake_discord: FakeDiscord,
) -> None:
    from tests.servers.discord_records import SEND_MESSAGES

    quiet = fake_discord.add_channel("1600000000000000002", "quiet", bot_denied=SEND_MESSAGES)
    client = Bare()
    async with connected(client, fake_discord):
        channel = client.get_channel(int(quiet.id))
        assert isinstance(channel, discord.TextChannel)
        assert not channel.permissions_for(channel.guild.me).send_messages
        assert _channel(client, fake_discord).permissions_for(channel.guild.me).send_messages
        with pytest.raises(discord.Forbidden) as refused:
            await channel.send("hello")
    assert refused.value.code == 50013


async def test_a_click_while_away_is_replayed_and_answered_once(fake_discord: FakeDiscord) -> None:
    client = Bare()
    async with connected(client, fake_discord):
        await fake_discord.drop()
        click = await fake_discord.forge(
            ALICE, fake_discord.general, {"custom_id": "a", "component_type": 2}
        )
        interaction = await client.wait_interaction(1)
        await interaction.response.send_message("done", ephemeral=True)
    assert fake_discord.resumed == 1 and fake_discord.identified == 1
    assert click.callback_type == 4 and click.refused == []


async def test_non_ephemeral_responses_reach_the_gateway(fake_discord: FakeDiscord) -> None:
    client = Bare()
    async with connected(client, fake_discord):
        await fake_discord.forge(
            ALICE, fake_discord.general, {"custom_id": "a", "component_type": 2}
        )
        interaction = await client.wait_interaction(1)
        await interaction.response.send_message("for everyone")
        await interaction.followup.send("just you", ephemeral=True)
        await interaction.followup.send("and again for everyone")
        seen = await client.wait_seen(2)
    assert [m.content for m in seen] == ["for everyone", "and again for everyone"]


async def test_a_sixth_edit_in_five_seconds_gets_429_with_via(fake_discord: FakeDiscord) -> None:
    client = Bare()
    async with connected(client, fake_discord):
        sent = await _channel(client, fake_discord).send("v0")
    url = f"{fake_discord.api_base}/channels/{fake_discord.general.id}/messages/{sent.id}"
    auth = {"Authorization": f"Bot {fake_discord.token}"}
    remaining = []
    async with aiohttp.ClientSession(headers=auth) as http:
        for n in range(1, 6):
            async with http.patch(url, json={"content": f"v{n}"}) as answer:
                assert answer.status == 200
                remaining.append(answer.headers["X-RateLimit-Remaining"])
        async with http.patch(url, json={"content": "v6"}) as answer:
            assert answer.status == 429
            assert answer.headers["Via"]
            assert 0 < (await answer.json())["retry_after"] <= 5
        async with http.patch(
            url, json={"content": "v7"}, headers={"Authorization": "Bot x"}
        ) as bad:
            assert bad.status == 401
    assert remaining == ["4", "3", "2", "1", "0"]
    assert fake_discord.message(str(sent.id)).content == "v5"


async def test_allowed_mentions_decide_who_is_pinged(fake_discord: FakeDiscord) -> None:
    client = Bare()
    async with connected(client, fake_discord):
        channel = _channel(client, fake_discord)
        text = f"@everyone <@{ALICE.id}> <@&{ALICE.roles[0]}> <@{BOB.id}>"
        quiet = await channel.send(text, allowed_mentions=discord.AllowedMentions.none())
        alice = await channel.send(
            text,
            allowed_mentions=discord.AllowedMentions(
                everyone=False, roles=False, users=[discord.Object(int(ALICE.id))]
            ),
        )
        loud = await channel.send(text)  # discord.py sends no allowed_mentions by default
    assert fake_discord.message(str(quiet.id)).pinged == []
    assert fake_discord.message(str(alice.id)).pinged == [ALICE.id]
    assert fake_discord.message(str(loud.id)).pinged == [
        "@everyone",
        ALICE.id,
        f"role:{ALICE.roles[0]}",
        BOB.id,
    ]


async def test_a_dm_is_opened_by_user_id(fake_discord: FakeDiscord) -> None:
    client = Bare()
    async with connected(client, fake_discord):
        user = await client.fetch_user(int(BOB.id))
        member = await _channel(client, fake_discord).guild.fetch_member(int(ALICE.id))
        sent = await user.send("hello bob")
    assert [r.id for r in member.roles][1:] == [int(ALICE.roles[0])]  # after @everyone
    dm = fake_discord.dm(BOB)
    assert [m.content for m in fake_discord.bot_messages(dm)] == ["hello bob"]
    assert sent.channel.id == int(dm.id)


async def test_a_click_replayed_past_its_deadline_cannot_be_answered(
    fake_discord: FakeDiscord,
) -> None:
    client = Bare()
    async with connected(client, fake_discord):
        await fake_discord.drop()
        click = await fake_discord.forge(
            ALICE, fake_discord.general, {"custom_id": "a", "component_type": 2}
        )
        fake_discord.advance(4)  # the client was away past the 3 s
        interaction = await client.wait_interaction(1)
        with pytest.raises(discord.NotFound):
            await interaction.response.defer()
        await fake_discord.deliver_again(click)
        again = await client.wait_interaction(2)
        assert again.id == interaction.id
    assert click.callback is None and click.refused == [10062]


async def test_application_flags_say_whether_message_content_is_enabled(
    fake_discord: FakeDiscord,
) -> None:
    client = Bare()
    async with connected(client, fake_discord):
        assert not (await client.application_info()).flags.gateway_message_content_limited
        fake_discord.message_content_enabled = True
        assert (await client.application_info()).flags.gateway_message_content_limited
