"""The files people attach to a message for the bot (issue 32), and their download.

A Discord attachment is on the CDN at a signed address (``cdn.discordapp.com``, a query with
``ex``, ``is`` and ``hm``), which is its reference: no token is sent with it, and the address
is only fetched from Discord's own CDN hosts or the configured ``api_base_url``'s host (a
proxy, the tests' fake). The bytes are streamed; a 5xx, a timeout or a cut connection is
``PlatformUnreachable`` (fetched again by the core), anything else but 200 a refusal (an
address whose signature expired: Discord answers 404).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any
from urllib.parse import urlsplit

import aiohttp

from gateway.attachments import InboundAttachment
from gateway.errors import PlatformError
from gateway.platform import PlatformUnreachable

__all__ = ["CDN_HOSTS", "CHUNK_BYTES", "attachments_of", "download"]

CHUNK_BYTES = 256 * 1024
CDN_HOSTS = frozenset({"cdn.discordapp.com", "media.discordapp.net"})
_TIMEOUT = aiohttp.ClientTimeout(total=None, connect=10, sock_read=30)


def attachments_of(attachments: Any) -> tuple[InboundAttachment, ...]:
    """discord.py's ``Message.attachments`` as the gateway's attachments, in order; a
    voice message's (its ``duration_secs`` and ``waveform``) is a voice note (issue 34)."""
    return tuple(
        InboundAttachment(
            name=str(item.filename),
            reference=str(item.url),
            size=int(item.size) if item.size is not None else None,
            declared_type=str(item.content_type or ""),
            voice=bool(item.is_voice_message()),
            seconds=float(item.duration) if item.duration is not None else None,
        )
        for item in attachments
        if item.url
    )


async def download(attachment: InboundAttachment, api_base_url: str) -> AsyncGenerator[bytes, None]:
    """The attachment's bytes in chunks (see the module's docstring)."""
    host = urlsplit(attachment.reference).hostname
    if host is None or (host not in CDN_HOSTS and host != urlsplit(api_base_url).hostname):
        raise PlatformError("the attachment is not on Discord's CDN")
    try:
        async with (
            aiohttp.ClientSession(timeout=_TIMEOUT) as http,
            http.get(attachment.reference, allow_redirects=False) as got,
        ):
            if got.status >= 500:
                raise PlatformUnreachable(f"discord: the CDN answered {got.status}")
            if got.status != 200:
                raise PlatformError(f"discord: the CDN answered {got.status}")
            async for chunk in got.content.iter_chunked(CHUNK_BYTES):
                yield chunk
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise PlatformUnreachable(
            f"discord: the download failed midway ({type(exc).__name__})"
        ) from exc
