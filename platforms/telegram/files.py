"""Files a person sends the bot (issue 32): what a Telegram message carries, and its download.

- A photo comes in several sizes, the largest last: that one is taken, named
  ``photo-<file_unique_id>.jpg`` (Telegram sends every photo as JPEG and gives it no name).
  A document (a video, an audio file, an animation) keeps the name it was sent with. Each is an
  :class:`~gateway.attachments.InboundAttachment` whose reference is its ``file_id``.
- A download asks ``getFile`` for the file's path, then streams the file from the bot's file
  URL (``base_file_url``: ``<base_url>/file/bot<token>/<path>``, so a self-hosted or fake Bot
  API serves both). That URL holds the bot's token: it is never logged, and no error of the
  download names it (httpx's errors do, so they are replaced, not chained).
- The cloud Bot API refuses ``getFile`` for a file over 20 MB ("file is too big"): said as
  such. A 5xx, a timeout or a connection cut midway is ``PlatformUnreachable`` (fetched again
  by the core, gateway/sessions/file_fetch.py).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncGenerator

import httpx
from telegram import Bot, Message
from telegram.error import BadRequest, TelegramError

from gateway.attachments import InboundAttachment
from gateway.errors import PlatformError
from gateway.platform import PlatformUnreachable, RefusedForGood
from platforms.telegram.outbox import translate

__all__ = ["CHUNK_BYTES", "attachments_of", "download"]

CHUNK_BYTES = 256 * 1024
_TIMEOUT = httpx.Timeout(30.0, connect=10.0)


def attachments_of(message: Message) -> tuple[InboundAttachment, ...]:
    """The files ``message`` carries: its photo (the largest size) or its document."""
    found: list[InboundAttachment] = []
    if message.photo:
        largest = message.photo[-1]
        found.append(
            InboundAttachment(
                name=f"photo-{largest.file_unique_id}.jpg",
                reference=largest.file_id,
                size=largest.file_size,
                declared_type="image/jpeg",
            )
        )
    # a voice note or an audio file: for transcription (issue 34; DESIGN.md "Files in")
    for kind, spoken in (("voice", message.voice), ("audio", message.audio)):
        if spoken is None:
            continue
        found.append(
            InboundAttachment(
                name=getattr(spoken, "file_name", None) or f"{kind}-{spoken.file_unique_id}.ogg",
                reference=spoken.file_id,
                size=spoken.file_size,
                declared_type=spoken.mime_type or "",
                voice=True,
                seconds=_seconds(spoken.duration),
            )
        )
    # a document, or a video or an animation sent as such: a file like any
    for kind, media in (
        ("document", message.document),
        ("video", message.video),
        ("animation", message.animation),
    ):
        if media is None:
            continue
        found.append(
            InboundAttachment(
                name=getattr(media, "file_name", None) or f"{kind}-{media.file_unique_id}",
                reference=media.file_id,
                size=media.file_size,
                declared_type=getattr(media, "mime_type", None) or "",
            )
        )
        break  # an animation comes with a document of itself: one file
    return tuple(found)


def _seconds(duration: object) -> float | None:
    """A voice note's length: PTB gives seconds, or a timedelta under PTB_TIMEDELTA."""
    if isinstance(duration, dt.timedelta):
        return duration.total_seconds()
    return float(duration) if isinstance(duration, int | float) else None


async def download(bot: Bot, attachment: InboundAttachment) -> AsyncGenerator[bytes, None]:
    """The file's bytes in chunks, from Telegram's file URL (see the module's docstring)."""
    try:
        file = await bot.get_file(attachment.reference)
    except BadRequest as exc:
        if "file is too big" in exc.message.lower():
            raise RefusedForGood(  # asking again cannot help: no "Try again" for it
                "Telegram gives a bot files of up to 20 MB (file is too big); a self-hosted "
                "Bot API server gives more"
            ) from exc
        raise translate(exc) from exc
    except TelegramError as exc:
        raise translate(exc) from exc
    url = file.file_path
    if not url:
        raise PlatformError("Telegram gave no path for the file")
    async with httpx.AsyncClient(timeout=_TIMEOUT, follow_redirects=False) as client:
        try:
            async with client.stream("GET", url) as response:
                if response.status_code >= 500:
                    raise PlatformUnreachable(f"the download answered {response.status_code}")
                if response.status_code != 200:
                    raise PlatformError(f"the download answered {response.status_code}")
                async for chunk in response.aiter_bytes(CHUNK_BYTES):
                    yield chunk
        except httpx.HTTPError as exc:
            # its text names the URL, which holds the bot's token: replaced, not chained
            kind = type(exc).__name__
            raise PlatformUnreachable(f"the download failed midway ({kind})") from None
