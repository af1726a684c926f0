"""Discord messages read as the gateway's messages (pure): which are taken, in which
conversation, from whom (with their roles, none in a DM), and which are ignored."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gateway.attachments import InboundAttachment
from gateway.domain import ConversationRef
from platforms.discord.commands import command_text
from platforms.discord.inbound import (
    Place,
    Seen,
    actor_of,
    conversation_of,
    heard,
    in_thread,
    strip_mention,
)

BOT = "900000000000000001"
GUILD = "700000000000000001"
CHANNEL = "600000000000000001"
THREAD = "600000000000000099"
ANN = "100000000000000001"


def seen(
    content: str,
    place: Place,
    *,
    mentions: tuple[str, ...] = (),
    author: str = ANN,
    bot: bool = False,
    roles: tuple[str, ...] = ("55",),
) -> Seen:
    return Seen(
        message_id="800000000000000001",
        place=place,
        author_id=author,
        author_name="ann",
        author_is_bot=bot,
        content=content,
        mentions=mentions,
        roles=roles,
    )


CHANNEL_PLACE = Place(guild_id=GUILD, channel_id=CHANNEL)
THREAD_PLACE = Place(guild_id=GUILD, channel_id=THREAD, parent_id=CHANNEL)
DM_PLACE = Place(guild_id=None, channel_id="500")


def hear(message: Seen, *, message_content: bool = False):  # type: ignore[no-untyped-def]
    return heard(message, bot_id=BOT, channels=(CHANNEL,), message_content=message_content)


def test_conversations_are_guild_parent_channel_and_thread() -> None:
    assert conversation_of(THREAD_PLACE) == ConversationRef(
        platform="discord", space=GUILD, channel=CHANNEL, thread=THREAD
    )
    assert conversation_of(CHANNEL_PLACE).thread is None
    assert conversation_of(DM_PLACE) == ConversationRef(
        platform="discord", space=None, channel="500"
    )
    assert in_thread(conversation_of(CHANNEL_PLACE), THREAD) == conversation_of(THREAD_PLACE)


def test_a_mention_in_a_listed_channel_starts_a_session_in_a_thread() -> None:
    got = hear(seen(f"<@{BOT}> fix the tests", CHANNEL_PLACE, mentions=(BOT,)))
    assert got is not None
    assert got.start_thread and not got.needs_session and not got.direct
    assert got.text == "fix the tests"
    assert got.message_id == "800000000000000001"
    assert got.actor == actor_of(ANN, "ann") and got.actor.roles == ("55",)
    assert str(got.actor) == "@ann"


def test_bare_top_level_messages_other_channels_and_bots_are_ignored() -> None:
    assert hear(seen("hello", CHANNEL_PLACE)) is None
    other = Place(guild_id=GUILD, channel_id="600000000000000002")
    assert hear(seen(f"<@{BOT}> hi", other, mentions=(BOT,))) is None
    assert hear(seen(f"<@{BOT}> hi", CHANNEL_PLACE, mentions=(BOT,), bot=True)) is None
    assert hear(seen("hi", DM_PLACE, author=BOT)) is None
    assert hear(seen(f"<@{BOT}>", CHANNEL_PLACE, mentions=(BOT,))) is None  # nothing said
    no_channels = heard(
        seen(f"<@{BOT}> hi", CHANNEL_PLACE, mentions=(BOT,)),
        bot_id=BOT,
        channels=(),
        message_content=True,
    )
    assert no_channels is None


def test_in_a_thread_a_mention_counts_and_a_bare_reply_needs_the_intent_and_a_session() -> None:
    mention = hear(seen(f"<@!{BOT}> /stop", THREAD_PLACE, mentions=(BOT,)))
    assert mention is not None and mention.text == "/stop"
    assert not mention.needs_session and not mention.start_thread
    assert hear(seen("and also this", THREAD_PLACE)) is None
    bare = hear(seen("and also this", THREAD_PLACE), message_content=True)
    assert bare is not None and bare.needs_session
    assert bare.conversation.thread == THREAD


def test_a_dm_takes_every_message_and_holds_no_roles() -> None:
    got = hear(seen("hello", DM_PLACE, roles=("55",)))
    assert got is not None and got.direct and got.actor.roles == ()
    assert got.conversation.space is None


def test_only_the_bots_mention_is_taken_out() -> None:
    assert strip_mention(f"<@{BOT}>  ask <@123>  now", BOT) == "ask <@123> now"


def test_slash_commands_become_the_gateways_commands() -> None:
    assert command_text("stop") == "/stop"
    assert command_text("approve", "  abc ", " Allow  once ") == "/approve abc Allow once"
    assert command_text("deny", "abc", "") == "/deny abc"
    with pytest.raises(ValueError):
        command_text("rm")


def test_attached_files_are_taken_with_the_words_or_alone_where_the_bot_is_addressed() -> None:
    log = InboundAttachment(
        name="build.log", reference="https://cdn.discordapp.com/attachments/1/2/build.log?hm=x"
    )

    def with_file(content: str, place: Place, mentions: tuple[str, ...] = ()) -> Seen:
        return replace(seen(content, place, mentions=mentions), attachments=(log,))

    alone = heard(with_file("", DM_PLACE), bot_id=BOT, channels=(CHANNEL,), message_content=False)
    assert alone is not None and alone.text == "" and alone.attachments == (log,)
    mentioned = heard(
        with_file(f"<@{BOT}> see this", CHANNEL_PLACE, (BOT,)),
        bot_id=BOT,
        channels=(CHANNEL,),
        message_content=False,
    )
    assert mentioned is not None and mentioned.text == "see this"
    assert mentioned.attachments == (log,) and mentioned.start_thread
    # a bare file in a channel, nobody addressed: not for the bot
    bare = heard(
        with_file("", CHANNEL_PLACE), bot_id=BOT, channels=(CHANNEL,), message_content=True
    )
    assert bare is None
