"""Voice notes (issue 34): spoken to the agent, and still never a decision.

A message whose files include a voice note (a Telegram voice or audio, a Slack audio clip, a
Discord voice message: :attr:`InboundAttachment.voice`) is, before anything else is done
with it: checked against ``[transcription]``'s limits, saved in the session's inbox like
any file (the inbox's rules: gateway/sessions/upload_inbox.py), transcribed, the transcript
shown back ("🎤 …", as a reply to the note where the platform has replies), and then the
message goes on with the transcript as its text, a prompt like any typed one. It is never a
command: a transcript that reads "/approve 3" is queued for the agent as words, so a
spoken "approve" or "yes" decides nothing (with a card waiting, the person is told so).

No transcription configured: the chat says how to turn it on, once per conversation (the
voice note is not sent). A transcription that fails or takes too long is said, and the
audio stays in the inbox, its path named, so that it can be sent again or read by hand.
"""

from __future__ import annotations

import dataclasses
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping

from gateway.attachments import InboundAttachment, SavedFile
from gateway.config.model import Config, TranscriptionConfig
from gateway.domain import ConversationRef
from gateway.errors import FileRefused
from gateway.platform import InboundMessage, Platform, RepliesToMessages
from gateway.sessions.file_fetch import save_attachments
from gateway.sessions.upload_inbox import UploadInbox
from gateway.transcription import Transcriber, TranscriptionFailed
from gateway.wording import duration, file_size

__all__ = ["NOTHING_TO_TRANSCRIBE", "NOT_CONFIGURED", "VoiceNotes"]

log = logging.getLogger(__name__)

NOT_CONFIGURED = (
    "🎤 Voice notes are not turned into text here: the gateway's config has no "
    "[transcription] table (an OpenAI-compatible url, or a local command; see "
    "docs/configuration.md). Type your message instead."
)
REMEMBERED = 4096  # conversations told that voice is off (bounded, in memory)
NOTHING_TO_TRANSCRIBE = "🎤 No voice note of yours here is waiting to be turned into text."
REPLY_CHARS = 3000  # a longer transcript is sent as plain texts, split to the platform's size

Reply = Callable[[ConversationRef, str], Awaitable[None]]


def _spoken(message: InboundMessage, transcripts: list[str]) -> InboundMessage:
    """``message`` with its voice notes' transcripts after its own text, the notes gone."""
    words = [message.text.strip(), *transcripts]
    return dataclasses.replace(
        message,
        text="\n\n".join(w for w in words if w),
        attachments=tuple(a for a in message.attachments if not a.voice),
    )


class VoiceNotes:
    def __init__(
        self,
        config: Callable[[], Config],
        transcriber: Transcriber | None,
        platforms: Mapping[str, Platform],
        reply: Reply,
    ) -> None:
        self._config = config
        self._transcriber = transcriber
        self._platforms = platforms
        self._reply = reply
        self._told_off: OrderedDict[ConversationRef, None] = OrderedDict()
        # a note whose transcription failed, by conversation and person: /transcribe
        self._failed: OrderedDict[tuple[ConversationRef, str], tuple[InboundMessage, SavedFile]]
        self._failed = OrderedDict()

    async def transcribed(self, message: InboundMessage, project: str) -> InboundMessage | None:
        """``message`` with its voice notes turned into its text (their files removed), or
        None when it is not to go on (said in the conversation)."""
        voices = [a for a in message.attachments if a.voice]
        conversation = message.conversation
        settings = self._config().transcription
        if self._transcriber is None or settings is None:
            if conversation not in self._told_off:
                self._told_off[conversation] = None
                if len(self._told_off) > REMEMBERED:
                    self._told_off.popitem(last=False)
                await self._reply(conversation, NOT_CONFIGURED)
            return None
        spoken: list[str] = []
        for voice in voices:
            text = await self._one(message, project, voice, settings)
            if text is None:
                return None
            spoken.append(text)
        return _spoken(message, spoken)

    async def _one(
        self,
        message: InboundMessage,
        project: str,
        voice: InboundAttachment,
        settings: TranscriptionConfig,
    ) -> str | None:
        conversation = message.conversation
        if voice.seconds is not None and voice.seconds > settings.max_seconds:
            await self._reply(
                conversation,
                f"🎤 This voice note is {duration(voice.seconds)} long; the limit is "
                f"{duration(settings.max_seconds)}. Nothing was sent to the agent.",
            )
            return None
        if voice.size is not None and voice.size > settings.max_bytes:
            await self._reply(
                conversation,
                f"🎤 This voice note is {file_size(voice.size)}; the transcription takes up to"
                f" {file_size(settings.max_bytes)}. Nothing was sent to the agent.",
            )
            return None
        files = self._config().projects[project].files
        limits = files.model_copy(
            update={
                "max_file_bytes": settings.max_bytes,
                "max_prompt_bytes": max(settings.max_bytes, files.max_prompt_bytes),
                "refuse_types": (),
            }
        )
        work_dir = self._config().projects[project].work_dir
        try:
            [saved] = await save_attachments(
                (voice,),
                platform=self._platforms.get(conversation.platform),
                inbox=UploadInbox(work_dir, files.inbox),
                policy=limits,
            )
        except FileRefused as exc:
            await self._reply(conversation, f"🎤 {exc}")
            return None
        return await self._transcribe(message, saved)

    async def again(self, message: InboundMessage) -> InboundMessage | None:
        """``/transcribe``: the person's last voice note here whose transcription failed,
        transcribed again; the message it came with, with the transcript as its text."""
        key = (message.conversation, message.actor.key())
        failed = self._failed.get(key)
        if failed is None or self._transcriber is None:
            await self._reply(message.conversation, NOTHING_TO_TRANSCRIBE)
            return None
        original, saved = failed
        text = await self._transcribe(original, saved)
        if text is None:
            return None
        del self._failed[key]
        return _spoken(original, [text])

    async def _transcribe(self, message: InboundMessage, saved: SavedFile) -> str | None:
        conversation = message.conversation
        assert self._transcriber is not None
        try:
            text = await self._transcriber.transcribe(saved.path, saved.media_type)
        except TranscriptionFailed as exc:
            log.info("a voice note (kept at %s) was not transcribed: %s", saved.path, exc)
            self._failed[(conversation, message.actor.key())] = (message, saved)
            if len(self._failed) > REMEMBERED:
                self._failed.popitem(last=False)
            await self._reply(
                conversation,
                f"🎤 The voice note could not be turned into text ({exc}). Nothing was sent to "
                "the agent; the recording is kept: /transcribe tries again.",
            )
            return None
        if not text:
            await self._reply(
                conversation,
                "🎤 No words were heard in this voice note. Nothing was sent to the agent.",
            )
            return None
        await self._show(message, f"🎤 {text}")
        return text

    async def _show(self, message: InboundMessage, text: str) -> None:
        """The transcript, as a reply to the note where the platform has replies."""
        platform = self._platforms.get(message.conversation.platform)
        if isinstance(platform, RepliesToMessages) and len(text) <= REPLY_CHARS:
            await platform.send_reply(message.conversation, text, message.message_id)
        else:
            await self._reply(message.conversation, text)
