"""What the Slack platform shows: texts, cards, edits, ephemeral answers and the queued mark,
every call through the outbox (outbox.py) in its conversation's lane.

A turn's text is sent as whole snapshots edited with ``chat.update``; Slack's streaming API
(``chat.startStream``/``appendStream``/``stopStream``) appends only and the core's snapshots
may change earlier text (docs/decisions.md, Slack platform). What each message shows last is
remembered, so an identical edit is not sent; a message Slack refused to edit for good is
not asked again.
"""

from __future__ import annotations

import json
import logging
import re
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from gateway.cards import Card
from gateway.domain import ConversationRef, TurnStatus
from gateway.errors import PlatformError
from gateway.platform import (
    EditResult,
    FileUpload,
    Inbox,
    KnowsApprovers,
    MessageRef,
    PlatformLimits,
)
from platforms.form_drafts import PendingForms
from platforms.outbox import Priority
from platforms.slack.connection import BotUser
from platforms.slack.outbox import SlackMessageGone, SlackOutbox, error_of, permanent_refusal
from platforms.slack.render import mrkdwn, render_card
from platforms.turn_end import TurnEnds

__all__ = ["QUEUED_REACTION", "SlackPosting"]

log = logging.getLogger(__name__)

# the mark of a message queued behind a card (an emoji every workspace has: ✍)
QUEUED_REACTION = "writing_hand"
_SHOWN = 1024  # the last text of each message, to skip identical edits
_USER_ID = re.compile(r"[UW][A-Z0-9]+")


# what the gateway uploads (SendsFiles): the file is held in memory on its way
FILE_MAX_BYTES = 50 * 1024 * 1024


class SlackPosting:
    """The platform contract's sending half. ``outbox``: the running outbox (raises when the
    platform is not running); ``inbox``: the gateway once attached (who may decide)."""

    def __init__(
        self,
        client: AsyncWebClient,
        limits: PlatformLimits,
        forms: PendingForms[tuple[str, str]],
        *,
        outbox: Callable[[], SlackOutbox],
        inbox: Callable[[], Inbox | None],
    ) -> None:
        self.client = client
        self.limits = limits
        self.forms = forms
        self._outbox = outbox
        self._inbox = inbox
        self._shown: OrderedDict[tuple[str, str], str] = OrderedDict()
        self._uneditable: OrderedDict[tuple[str, str], str] = OrderedDict()  # message: error
        self._no_reactions = False  # no reactions:write scope: no mark, said in the log once
        self.turn_ends = TurnEnds()  # whether a turn's end needs a message that notifies
        self.app: BotUser | None = None  # the app's bot user, once connected

    def _mention_app(self, shown: str) -> str:
        """A command the gateway spelled "@gateway /stop" (``spell_command``) with the app's
        real mention, which reads as its name and is what a person copies; only the app's
        own name before a command, so nothing else in a text pings."""
        app = self.app
        if app is None or not app.name or not app.id:
            return shown
        return re.sub(rf"(?<![\w@<])@{re.escape(app.name)}(?= /\w)", f"<@{app.id}>", shown)

    async def send_text(self, conversation: ConversationRef, text: str) -> MessageRef:
        self._check_length(text)
        shown = self._mention_app(mrkdwn(text))

        async def post() -> str:
            sent = await self.client.chat_postMessage(
                channel=conversation.channel,
                thread_ts=conversation.thread,
                text=shown,
                unfurl_links=False,
                unfurl_media=False,
            )
            return str(sent["ts"])

        ts = await self._outbox().run(
            conversation.channel, Priority.TEXT, post, method="chat.postMessage"
        )
        self._remember((conversation.channel, ts), shown)
        self.turn_ends.sent(_turn_key(conversation), (conversation.channel, ts))
        return MessageRef(conversation=conversation, message_id=ts)

    async def edit_text(self, ref: MessageRef, text: str) -> EditResult:
        self._check_length(text)
        channel, ts = ref.conversation.channel, ref.message_id
        shown = self._mention_app(mrkdwn(text))
        if self._shown.get((channel, ts)) == shown:
            return EditResult.NOT_MODIFIED

        async def edit() -> EditResult:
            await self.client.chat_update(channel=channel, ts=ts, text=shown)
            self._remember((channel, ts), shown)
            self.turn_ends.edited((channel, ts))  # an edit: no phone is told of it
            return EditResult.EDITED

        return await self._edit(channel, ts, Priority.STREAM, edit, "text")

    def file_limit(self, conversation: ConversationRef, upload: FileUpload) -> int:
        """``SendsFiles``: what the gateway uploads to Slack (its own limit is far higher:
        the bound is the memory a file takes on its way)."""
        return FILE_MAX_BYTES

    async def send_file(self, conversation: ConversationRef, upload: FileUpload) -> MessageRef:
        """Into the session's thread: ``files.getUploadURLExternal``, the bytes, then
        ``files.completeUploadExternal`` (slack_sdk's ``files_upload_v2`` walks the three;
        ``files.upload`` is retired). The caption is the message that shares it."""
        channel = conversation.channel

        async def share() -> str:
            sent = await self.client.files_upload_v2(
                channel=channel,
                thread_ts=conversation.thread,
                content=upload.content,
                filename=upload.name,
                title=upload.name,
                initial_comment=mrkdwn(upload.caption) if upload.caption else None,
            )
            files = sent.get("files") or [{}]
            return str(files[0].get("id", ""))

        file_id = await self._outbox().run(channel, Priority.TEXT, share, method="files.upload")
        return MessageRef(conversation=conversation, message_id=file_id)

    async def send_card(self, conversation: ConversationRef, card: Card) -> MessageRef:
        channel = conversation.channel
        form = self.forms.new(conversation, card)
        for attachment in card.attachments:  # the files first: what is approved is shown whole

            async def upload(
                name: str = attachment.name, content: str = attachment.content
            ) -> None:
                await self.client.files_upload_v2(
                    channel=channel,
                    thread_ts=conversation.thread,
                    content=content,
                    filename=name,
                    title=name,
                    initial_comment=mrkdwn(f"{card.title[:200]}: {name}"),
                )

            await self._outbox().run(channel, Priority.CARD, upload, method="files.upload")
        drawn = render_card(card, mention=await self._approvers_of(conversation))

        async def post() -> str:
            sent = await self.client.chat_postMessage(
                channel=channel,
                thread_ts=conversation.thread,
                text=drawn.text,
                blocks=drawn.blocks,
                unfurl_links=False,
                unfurl_media=False,
            )
            return str(sent["ts"])

        ts = await self._outbox().run(channel, Priority.CARD, post, method="chat.postMessage")
        self._remember((channel, ts), _drawn_key(drawn.text, drawn.blocks))
        self.turn_ends.sent(_turn_key(conversation), (channel, ts))  # a new card notifies
        if form is not None:
            self.forms.keep((channel, ts), form)
        return MessageRef(conversation=conversation, message_id=ts)

    async def _approvers_of(self, conversation: ConversationRef) -> str:
        """``<@U…>`` of who may decide, for a new card only (their phones are told once;
        an edit notifies nobody and drops it). Agent text never pings: it is escaped."""
        inbox = self._inbox()
        if not isinstance(inbox, KnowsApprovers):
            return ""
        try:
            people = await inbox.approvers(conversation)
        except Exception:
            log.exception("slack: the approvers of a card in %s not found", conversation.channel)
            return ""
        named = " ".join(f"<@{user}>" for user in people if _USER_ID.fullmatch(user))
        return f"{named}: waiting for you." if named else ""

    async def edit_card(self, ref: MessageRef, card: Card) -> EditResult:
        channel, ts = ref.conversation.channel, ref.message_id
        self.forms.update((channel, ts), ref.conversation, card)

        async def edit() -> EditResult:
            # drawn when the lane gets to it: the newest card wins
            form = self.forms.peek((channel, ts))
            drawn = render_card(form.card if form is not None else card)
            key = _drawn_key(drawn.text, drawn.blocks)
            if self._shown.get((channel, ts)) == key:
                return EditResult.NOT_MODIFIED
            await self.client.chat_update(
                channel=channel, ts=ts, text=drawn.text, blocks=drawn.blocks
            )
            self._remember((channel, ts), key)
            return EditResult.EDITED

        return await self._edit(channel, ts, Priority.CARD, edit, "card")

    async def _edit(
        self,
        channel: str,
        ts: str,
        priority: Priority,
        edit: Callable[[], Awaitable[EditResult]],
        kind: str,
    ) -> EditResult:
        """A ``chat.update`` in the channel's lane; a message Slack refused to edit for good
        (no longer editable, deleted) is not asked again: refused here at once."""
        refused = self._uneditable.get((channel, ts))
        if refused is not None:
            raise permanent_refusal(refused)
        try:
            return await self._outbox().run(
                channel, priority, edit, key=(kind, ts), method="chat.update"
            )
        except SlackMessageGone as exc:
            self._uneditable[(channel, ts)] = exc.error
            while len(self._uneditable) > _SHOWN:
                self._uneditable.popitem(last=False)
            raise

    async def ephemeral(
        self, where: ConversationRef, user: str, text: str, *, escaped: bool = False
    ) -> None:
        """Only ``user`` sees it (it may not reach a phone and is gone on reload: the card
        carries every outcome; this repeats it to the person who acted). ``escaped``: the
        text is mrkdwn already (a mention of the app in it)."""
        shown = text if escaped else mrkdwn(text)

        async def post() -> None:
            await self.client.chat_postEphemeral(
                channel=where.channel, user=user, text=shown, thread_ts=where.thread
            )

        try:
            await self._outbox().run(
                f"{where.channel}/ephemeral", Priority.CARD, post, method="chat.postEphemeral"
            )
        except PlatformError as exc:
            log.info("slack ephemeral to %s not shown: %s", user, exc)

    async def mark_queued(self, conversation: ConversationRef, message_id: str) -> bool:
        """A reaction on the person's message (:data:`QUEUED_REACTION`, as Telegram's ✍),
        which notifies nobody and stays once the message runs: it says "noted", which stays
        true. An app installed before it asked for reactions:write (missing_scope) has no
        mark: False, and the core says it in a short text (and the log, once, what to add);
        Slack is not asked again until a restart."""
        if self._no_reactions:
            return False

        async def react() -> bool:
            try:
                await self.client.reactions_add(
                    channel=conversation.channel, timestamp=message_id, name=QUEUED_REACTION
                )
            except SlackApiError as exc:
                error = error_of(exc)
                if error == "already_reacted":  # a retried call that had reached Slack
                    return True
                if error == "missing_scope":
                    if not self._no_reactions:
                        self._no_reactions = True
                        log.warning(
                            "slack: the app lacks the reactions:write scope, so a queued "
                            "message is marked with a short reply instead; add the scope "
                            "(agent-gateway slack-manifest lists it) and reinstall the app"
                        )
                    return False
                raise
            return True

        return await self._outbox().run(
            conversation.channel, Priority.TEXT, react, method="reactions.add"
        )

    async def turn_started(self, conversation: ConversationRef) -> None:
        """What the turn shows is followed from now on (a bot in Slack has no typing
        indicator outside AI-app threads)."""
        self.turn_ends.started(_turn_key(conversation))

    async def turn_ended(self, conversation: ConversationRef, status: TurnStatus) -> None:
        """The last ``chat.update`` is the final text (no stream to stop); where the turn's
        last words came by an edit, which no phone is told of, one short new message that
        notifies (platforms/turn_end.py)."""
        line = self.turn_ends.ended(_turn_key(conversation), status)
        if line is not None:
            try:
                await self.send_text(conversation, line)
            except PlatformError as exc:
                log.info("slack turn end in %s not told: %s", conversation.channel, exc)

    def _check_length(self, text: str) -> None:
        if not text.strip() or len(text) > self.limits.text_max_chars:
            raise PlatformError(f"text of {len(text)} characters cannot be sent to Slack")

    def _remember(self, key: tuple[str, str], shown: str) -> None:
        self._shown.pop(key, None)
        self._shown[key] = shown
        while len(self._shown) > _SHOWN:
            self._shown.popitem(last=False)


def _turn_key(conversation: ConversationRef) -> tuple[str, str | None]:
    return conversation.channel, conversation.thread


def _drawn_key(text: str, blocks: list[dict[str, Any]]) -> str:
    return json.dumps([text, blocks], sort_keys=True)
