"""The transcribers of voice notes (issue 34), as ``[transcription]`` configures them.

- :class:`HttpTranscriber`: an OpenAI-compatible endpoint, ``POST {url}/audio/transcriptions``
  (multipart: ``file``, ``model``; answer ``{"text": …}``), the key as a bearer token. aiohttp
  is the gateway's own HTTP library already (the console's server): no new dependency, and
  the core stays free of HTTP (gateway/transcription.py is the protocol it asks).
- :class:`CommandTranscriber`: a local command (whisper.cpp, a script of yours) run with the
  audio file's path as its last argument, its standard output the text; its own process
  group, ended at the time limit.

Neither logs the key, nor the text (a person's words go to the chat and the agent, not the
log); an error says what failed in a person's words.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from pathlib import Path

import aiohttp

from gateway.config.model import TranscriptionConfig
from gateway.transcription import Transcriber, TranscriptionFailed

__all__ = ["CommandTranscriber", "HttpTranscriber", "transcriber_for"]

MAX_TEXT_CHARS = 20_000  # a transcript longer than this is cut (about 40 minutes of talk)
_STDERR_SHOWN = 300


def transcriber_for(settings: TranscriptionConfig | None) -> Transcriber | None:
    if settings is None:
        return None
    if settings.command:
        return CommandTranscriber(settings.command, timeout=settings.timeout_seconds)
    assert settings.url is not None
    key = None if settings.api_key is None else settings.api_key.get_secret_value()
    return HttpTranscriber(
        settings.url, model=settings.model, api_key=key, timeout=settings.timeout_seconds
    )


def _cut(text: str) -> str:
    text = text.strip()
    return text if len(text) <= MAX_TEXT_CHARS else text[:MAX_TEXT_CHARS] + " …"


class HttpTranscriber:
    def __init__(self, url: str, *, model: str, api_key: str | None, timeout: float) -> None:
        self._endpoint = url.rstrip("/") + "/audio/transcriptions"
        self._model = model
        self._api_key = api_key
        self._timeout = timeout

    async def transcribe(self, path: Path, media_type: str) -> str:
        headers = {} if self._api_key is None else {"Authorization": f"Bearer {self._api_key}"}
        timeout = aiohttp.ClientTimeout(total=self._timeout)
        try:
            with path.open("rb") as audio:
                form = aiohttp.FormData()
                form.add_field("model", self._model)
                form.add_field("file", audio, filename=path.name, content_type=media_type)
                async with (
                    aiohttp.ClientSession(timeout=timeout) as http,
                    http.post(self._endpoint, data=form, headers=headers) as response,
                ):
                    if response.status != 200:
                        raise TranscriptionFailed(
                            f"the transcription service answered {response.status}"
                        )
                    answer = await response.json(content_type=None)
        except TimeoutError:
            raise TranscriptionFailed(f"no transcript within {self._timeout:g} s") from None
        except (aiohttp.ClientError, OSError, ValueError) as exc:
            raise TranscriptionFailed(f"the transcription service failed ({exc})") from None
        text = answer.get("text") if isinstance(answer, dict) else None
        if not isinstance(text, str):
            raise TranscriptionFailed("the transcription service answered no text")
        return _cut(text)


class CommandTranscriber:
    def __init__(self, argv: tuple[str, ...], *, timeout: float) -> None:
        self._argv = argv
        self._timeout = timeout

    async def transcribe(self, path: Path, media_type: str) -> str:
        try:
            proc = await asyncio.create_subprocess_exec(
                *self._argv,
                str(path),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,  # its own group: ended whole at the time limit
            )
        except OSError as exc:
            raise TranscriptionFailed(f"{self._argv[0]} could not start ({exc.strerror})") from None
        try:
            async with asyncio.timeout(self._timeout):
                out, err = await proc.communicate()
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()
            raise TranscriptionFailed(f"no transcript within {self._timeout:g} s") from None
        if proc.returncode != 0:
            said = err.decode(errors="replace").strip()[-_STDERR_SHOWN:]
            raise TranscriptionFailed(
                f"{Path(self._argv[0]).name} exited with code {proc.returncode}"
                + (f": {said}" if said else "")
            )
        return _cut(out.decode(errors="replace"))
