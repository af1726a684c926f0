"""Turning a voice note into text (issue 34): what the core asks of a transcriber.

The core imports no HTTP library: the transcribers (an OpenAI-compatible
``/audio/transcriptions`` endpoint, or a local command) live in adapters/transcription.py and
are handed to the gateway by the application, as its agents' launcher is.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from gateway.errors import GatewayError

__all__ = ["Transcriber", "TranscriptionFailed"]


class TranscriptionFailed(GatewayError):
    """The voice note was not turned into text; the message says why, in a person's words."""


class Transcriber(Protocol):
    async def transcribe(self, path: Path, media_type: str) -> str:
        """The text spoken in the audio file at ``path``; TranscriptionFailed otherwise
        (within the transcriber's own time limit)."""
        ...
