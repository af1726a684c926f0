"""Files a person sends with a message (issue 32; DESIGN.md, "Files in").

A platform turns a photo, a document or any file of a message into an
:class:`InboundAttachment`: the name as sent, the size the platform declares, the type it
claims, and its own reference to the file (Telegram ``file_id``, Slack file id, Discord
attachment URL). Nothing of the file is downloaded then: the prompt queue keeps the
attachments with the prompt (:func:`attachments_to_json`), and the host that runs the session
downloads them, into the work dir's inbox, when the prompt's turn comes
(gateway/sessions/upload_inbox.py). The saved file is a :class:`SavedFile`, whose type is
sniffed from its bytes (:func:`sniff_media_type`): what the platform claims is never trusted
for what the agent is given.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gateway.errors import StoreError
from gateway.wording import file_size, named, one_line

__all__ = [
    "SNIFF_BYTES",
    "InboundAttachment",
    "SavedFile",
    "attachments_from_json",
    "attachments_to_json",
    "files_in_prompt",
    "is_picture",
    "pictures_named_notice",
    "sent_without_notice",
    "sniff_media_type",
    "without_files",
]

SNIFF_BYTES = 8192  # what the sniffer reads of a file's start (puremagic needs far less)
OCTET_STREAM = "application/octet-stream"
# the pictures every agent that takes images takes (the Responses and Messages APIs' own list)
_PICTURES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})


@dataclass(frozen=True, kw_only=True, slots=True)
class InboundAttachment:
    """One file of an inbound message, as the platform describes it (untrusted).

    ``name``: as sent, never used as a path as it is (the inbox makes a safe name of it).
    ``size``: the platform's declared size in bytes, None where it says none; the download
    counts again. ``reference``: what the platform needs to fetch it, opaque to the core.
    ``declared_type``: the platform's claim ("" if none), only a hint for the chat.
    """

    name: str
    reference: str
    size: int | None = None
    declared_type: str = ""
    # issue 34: a voice note (Telegram voice and audio, a Slack audio clip, a Discord voice
    # message): transcribed, and the transcript is the prompt (gateway/sessions/voice_notes.py)
    voice: bool = False
    seconds: float | None = None  # its length, where the platform says it

    def __post_init__(self) -> None:
        if not self.reference:
            raise ValueError("an attachment needs the platform's reference to its file")
        if self.size is not None and self.size < 0:
            raise ValueError("an attachment's size cannot be negative")


@dataclass(frozen=True, kw_only=True, slots=True)
class SavedFile:
    """An attachment saved in the session's inbox: what an adapter hands its agent."""

    path: Path  # absolute, inside the inbox
    name: str  # the name as the person sent it
    media_type: str  # sniffed from the bytes
    size: int

    @property
    def picture(self) -> bool:
        return is_picture(self.media_type)


def is_picture(media_type: str) -> bool:
    """Whether an agent that takes images may be given this type as one."""
    return media_type in _PICTURES


def sniff_media_type(head: bytes) -> str:
    """The media type of a file whose first bytes are ``head`` (at least
    :data:`SNIFF_BYTES` of them, or the whole file), read from the content with puremagic
    (pure Python: installs wherever pip does). ``application/octet-stream`` when unknown;
    ``text/plain`` for a start that decodes as UTF-8 text."""
    if not head:
        return OCTET_STREAM
    # imported when a file comes, not with the contract every module reads (40 ms at start)
    import puremagic

    try:
        found = puremagic.magic_string(head)
    except (puremagic.PureError, ValueError):
        found = []
    for match in found:
        if match.mime_type:
            return str(match.mime_type)
    if _looks_like_text(head):
        return "text/plain"
    return OCTET_STREAM


def _looks_like_text(head: bytes) -> bool:
    if b"\0" in head:
        return False
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        # a multi-byte character cut at the end of the sample is still text
        return exc.start >= len(head) - 3 and exc.reason == "unexpected end of data"
    return True


def attachments_to_json(attachments: tuple[InboundAttachment, ...]) -> str:
    """The prompt queue's column (``prompts.attachments_json``), in the order sent."""
    return json.dumps(
        [
            {
                "name": a.name,
                "reference": a.reference,
                "size": a.size,
                "declared_type": a.declared_type,
            }
            for a in attachments
        ]
    )


def attachments_from_json(text: str | None) -> tuple[InboundAttachment, ...]:
    """Read back :func:`attachments_to_json` (None or ``[]``: a prompt without files)."""
    if not text:
        return ()
    try:
        items: Any = json.loads(text)
        return tuple(
            InboundAttachment(
                name=str(item["name"]),
                reference=str(item["reference"]),
                size=None if item.get("size") is None else int(item["size"]),
                declared_type=str(item.get("declared_type") or ""),
            )
            for item in items
        )
    except (ValueError, TypeError, KeyError) as exc:
        raise StoreError(f"a prompt's attachments are unreadable: {exc}") from exc


def files_in_prompt(
    text: str,
    files: tuple[SavedFile, ...],
    *,
    takes_pictures: bool,
    picture_max_bytes: int | None = None,
    links_files: bool = False,
) -> tuple[str, tuple[SavedFile, ...], tuple[SavedFile, ...]]:
    """The prompt for an agent given ``files`` with ``text``: the pictures it takes natively
    (``takes_pictures``, up to ``picture_max_bytes`` each) go apart as images; every other
    file goes as a link where the agent takes links (``links_files``), else is named in the
    text, with its saved path and its name as sent, for the agent to read with its own tools.
    Returns the text, the images and the linked files, each in the order sent."""
    images = _native(files, takes_pictures, picture_max_bytes)
    rest = tuple(f for f in files if f not in images)
    if links_files or not rest:
        return text, images, rest if links_files else ()
    lines = [
        "Files sent with this message, saved in the work dir (read them with your tools):",
        *(f"- {one_line(f.name)} ({f.media_type}, {f.size} bytes): {f.path}" for f in rest),
    ]
    note = "\n".join(lines)
    return (f"{text}\n\n{note}" if text.strip() else note), images, ()


def _native(
    files: tuple[SavedFile, ...], takes_pictures: bool, picture_max_bytes: int | None
) -> tuple[SavedFile, ...]:
    return tuple(
        f
        for f in files
        if takes_pictures
        and f.picture
        and (picture_max_bytes is None or f.size <= picture_max_bytes)
    )


def pictures_named_notice(
    files: tuple[SavedFile, ...], *, takes_pictures: bool, picture_max_bytes: int | None = None
) -> str | None:
    """What the chat is told when a picture cannot go to the agent as a picture; None when
    every picture went as one (or none came)."""
    native = _native(files, takes_pictures, picture_max_bytes)
    pictures = [f for f in files if f.picture and f not in native]
    if not pictures:
        return None
    names = ", ".join(one_line(f.name) for f in pictures)
    why = (
        "this agent is not given pictures directly"
        if not takes_pictures
        else f"larger than this agent takes as a picture ({file_size(picture_max_bytes or 0)})"
    )
    return f"📎 {names}: {why}; saved in the work dir and given as a file, for the agent to open."


def without_files(text: str, missing: tuple[InboundAttachment, ...]) -> str:
    """The prompt sent without its files, by its author's choice (issue 32): ``text`` and a
    line naming each file that did not come, so the agent does not look for it."""
    names = ", ".join(one_line(a.name) for a in missing)
    one = len(missing) == 1
    files, were, they = ("a file", "was", "It is") if one else ("files", "were", "They are")
    note = (
        f"(Sent with {files} that {were} refused or could not be downloaded: {names}."
        f" {they} not here.)"
    )
    return f"{text}\n\n{note}" if text.strip() else note


def sent_without_notice(missing: tuple[InboundAttachment, ...]) -> str:
    """What the chat is told when a message goes to the agent without its files."""
    names = ", ".join(named(a.name) for a in missing)
    them = "it" if len(missing) == 1 else "they"
    return f"📎 Sent to the agent without {names}; the agent is told {them} did not come."
