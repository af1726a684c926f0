"""Download where the agent runs (issue 32): the host that runs a session fetches the files of
the prompt whose turn comes, through the platform the message came from
(:class:`~gateway.platform.FetchesFiles`), streamed into the session's inbox
(gateway/sessions/upload_inbox.py).

A fetch cut midway or answered 5xx (``PlatformUnreachable``) or 429 is tried again from the
file's start, up to :data:`FETCH_TRIES` times, then reported; a refusal is reported at once.
Either way :class:`~gateway.errors.FileRefused` says why for the person, and the files of the
prompt saved before it are removed: the prompt does not go without its files unless its
author says so (gateway/sessions/file_choice.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from gateway.attachments import InboundAttachment, SavedFile
from gateway.config.model import FilesPolicy
from gateway.errors import FileRefused, PlatformError
from gateway.platform import (
    FetchesFiles,
    Platform,
    PlatformUnreachable,
    RateLimited,
    RefusedForGood,
)
from gateway.sessions.file_checks import too_big_for_prompt
from gateway.sessions.upload_inbox import UploadInbox
from gateway.wording import named, platform_title

__all__ = ["FETCH_TRIES", "save_attachments"]

log = logging.getLogger(__name__)
FETCH_TRIES = 3
_BACKOFF_SECONDS = (0.5, 2.0)  # before the second and the third try
_MAX_RETRY_AFTER = 10.0

Sleep = Callable[[float], Awaitable[None]]


async def save_attachments(
    attachments: tuple[InboundAttachment, ...],
    *,
    platform: Platform | None,
    inbox: UploadInbox,
    policy: FilesPolicy,
    sleep: Sleep = asyncio.sleep,
) -> tuple[SavedFile, ...]:
    """Fetch and save every file, in the order sent; all of them or none (FileRefused)."""
    if not attachments:
        return ()
    if not isinstance(platform, FetchesFiles):
        why = (
            "its platform is not connected on this gateway"
            if platform is None
            else f"{_name(platform)} does not let the gateway download files"
        )
        raise FileRefused(f"This message's files cannot be fetched: {why}.", again=True)
    saved: list[SavedFile] = []
    try:
        for attachment in attachments:
            saved.append(await _save_one(attachment, platform, inbox, policy, sleep))
            total = sum(f.size for f in saved)
            if total > policy.max_prompt_bytes:
                raise FileRefused(too_big_for_prompt(total, policy))
    except BaseException:
        for file in saved:
            inbox.discard(file)
        raise
    return tuple(saved)


def _name(platform: object) -> str:
    return platform_title(str(getattr(platform, "name", "this platform")))


async def _save_one(
    attachment: InboundAttachment,
    platform: FetchesFiles,
    inbox: UploadInbox,
    policy: FilesPolicy,
    sleep: Sleep,
) -> SavedFile:
    last: PlatformError | None = None
    for attempt in range(FETCH_TRIES):
        if attempt:
            wait = _BACKOFF_SECONDS[min(attempt, len(_BACKOFF_SECONDS)) - 1]
            if isinstance(last, RateLimited):
                wait = min(max(wait, last.retry_after), _MAX_RETRY_AFTER)
            await sleep(wait)
        try:
            async with contextlib.aclosing(platform.fetch_file(attachment)) as chunks:
                return await inbox.save(
                    attachment.name,
                    chunks,
                    max_bytes=policy.max_file_bytes,
                    refuse_type=policy.refuses,
                )
        except (PlatformUnreachable, RateLimited) as exc:
            last = exc  # the platform's own text: never a URL holding its token
            log.info(
                "file %r from %s: try %d of %d failed (%s)",
                attachment.name,
                _name(platform),
                attempt + 1,
                FETCH_TRIES,
                exc,
            )
        except PlatformError as exc:
            raise FileRefused(
                f"{named(attachment.name)} could not be fetched from {_name(platform)}: {exc}",
                # a refusal the platform will make again (Telegram's 20 MB) offers no retry
                again=not isinstance(exc, RefusedForGood),
            ) from exc
    raise FileRefused(
        f"{named(attachment.name)} could not be downloaded from {_name(platform)} after "
        f"{FETCH_TRIES} tries ({last}).",
        again=True,
    ) from last
