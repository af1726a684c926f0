"""The files people send the app (issue 32): a ``file_share`` message's files, downloaded.

A file's reference is its Slack file id. Its download asks ``files.info`` for its
``url_private_download``, then streams that URL with the bot token in the Authorization
header (never in the URL). Both need the ``files:read`` scope, which apps installed from an
earlier manifest lack: ``files.info`` then answers ``missing_scope``, and ``url_private``
answers a redirect to an HTML sign-in page instead of the file (FACTS-session-features.md),
so a redirect or an HTML answer is refused, never saved, and the person is told to have the
app reinstalled. The token is only ever sent to Slack's own file host (``files.slack.com``)
or the host of the configured ``api_url`` (a self-hosted proxy, the tests' fake).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from urllib.parse import urlsplit

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from gateway.attachments import InboundAttachment
from gateway.errors import PlatformError
from gateway.platform import PlatformUnreachable, RateLimited

__all__ = ["CHUNK_BYTES", "NO_FILES_READ", "download"]

CHUNK_BYTES = 256 * 1024
NO_FILES_READ = (
    "Slack did not give the file: the app lacks the files:read scope. Reinstall it with the "
    "manifest `agent-gateway slack-manifest` prints (it asks for files:read)"
)
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_TIMEOUT = aiohttp.ClientTimeout(total=None, connect=10, sock_read=30)


def _trusted(url: str, api_url: str) -> bool:
    host, api_host = urlsplit(url).hostname, urlsplit(api_url).hostname
    return host is not None and (host == api_host or host == "files.slack.com")


async def download(
    client: AsyncWebClient, token: str, attachment: InboundAttachment
) -> AsyncGenerator[bytes, None]:
    """The file's bytes in chunks (see the module's docstring)."""
    try:
        info = await client.files_info(file=attachment.reference)
    except SlackApiError as exc:
        error = str(exc.response.get("error") or "")
        if error == "missing_scope":
            raise PlatformError(NO_FILES_READ) from exc
        if error == "ratelimited" or exc.response.status_code == 429:
            retry = float(exc.response.headers.get("Retry-After", 1) or 1)
            raise RateLimited(retry) from exc
        if exc.response.status_code >= 500:
            raise PlatformUnreachable(f"slack: files.info answered {error or 'an error'}") from exc
        raise PlatformError(f"slack: files.info answered {error or 'an error'}") from exc
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise PlatformUnreachable(f"slack: files.info failed ({type(exc).__name__})") from exc
    file = info.get("file") or {}
    url = str(file.get("url_private_download") or file.get("url_private") or "")
    if not url or not _trusted(url, str(client.base_url)):
        raise PlatformError("Slack gave no address of its own for the file")
    try:
        async with (
            aiohttp.ClientSession(timeout=_TIMEOUT) as http,
            http.get(
                url, headers={"Authorization": f"Bearer {token}"}, allow_redirects=False
            ) as got,
        ):
            if got.status in _REDIRECTS or got.content_type == "text/html":
                raise PlatformError(NO_FILES_READ)  # the sign-in page, not the file
            if got.status >= 500:
                raise PlatformUnreachable(f"slack: the download answered {got.status}")
            if got.status != 200:
                raise PlatformError(f"slack: the download answered {got.status}")
            async for chunk in got.content.iter_chunked(CHUNK_BYTES):
                yield chunk
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise PlatformUnreachable(
            f"slack: the download failed midway ({type(exc).__name__})"
        ) from exc
