"""An OpenAI-compatible transcription endpoint on loopback (``POST /v1/audio/transcriptions``,
multipart ``file`` and ``model``; answer ``{"text": …}``), for voice notes (issue 34).

The transcript of a file is what the test said it is (``say(audio, text)``), keyed by the
audio's bytes; each request is recorded (model, file name, bytes, the bearer token).
``fail_with`` answers that HTTP status instead."""

from __future__ import annotations

from dataclasses import dataclass
from types import TracebackType

from aiohttp import web

__all__ = ["FakeTranscription", "Heard"]


@dataclass(frozen=True)
class Heard:
    model: str
    filename: str
    audio: bytes
    authorization: str


class FakeTranscription:
    def __init__(self) -> None:
        self.heard: list[Heard] = []
        self.fail_with: int | None = None
        self._texts: dict[bytes, str] = {}
        self._runner: web.AppRunner | None = None
        self.port = 0

    def say(self, audio: bytes, text: str) -> None:
        self._texts[audio] = text

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def __aenter__(self) -> FakeTranscription:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/audio/transcriptions", self._transcribe)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        server = site._server
        assert server is not None and server.sockets  # type: ignore[attr-defined]
        self.port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _transcribe(self, request: web.Request) -> web.Response:
        form = await request.post()
        upload = form.get("file")
        if not isinstance(upload, web.FileField):
            return web.json_response({"error": {"message": "file is required"}}, status=400)
        audio = upload.file.read()
        self.heard.append(
            Heard(
                model=str(form.get("model", "")),
                filename=upload.filename,
                audio=audio,
                authorization=request.headers.get("Authorization", ""),
            )
        )
        if self.fail_with is not None:
            return web.json_response({"error": {"message": "down"}}, status=self.fail_with)
        return web.json_response({"text": self._texts.get(audio, "")})
