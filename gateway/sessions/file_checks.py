"""What is said of files refused (issue 32): pure checks of a message's files against the
project's ``[projects.X.files]`` limits, before anything is queued (the sizes the platform
declares) and again while they are saved (the bytes counted, the type sniffed)."""

from __future__ import annotations

from collections.abc import Sequence

from gateway.attachments import InboundAttachment
from gateway.config.model import FilesPolicy
from gateway.wording import named

__all__ = [
    "FILES_WITH_A_COMMAND",
    "declared_refusal",
    "human_size",
    "too_big_file",
    "too_big_for_prompt",
    "type_refused",
]

FILES_WITH_A_COMMAND = (
    "Files go with a message for the agent, not with a command: nothing was done. Send the "
    "files again with a message (or none), and the command on its own."
)


def human_size(size: int) -> str:
    """``size`` bytes as a person reads it: "812 bytes", "3.4 MB" (a MB is 1024 KB)."""
    if size < 1024:
        return f"{size} bytes"
    if size < 1024 * 1024:
        return f"{size / 1024:.0f} KB"
    return f"{size / (1024 * 1024):.1f} MB".replace(".0 MB", " MB")


def _sizes(size: int, limit: int) -> tuple[str, str]:
    """Both sizes as a person reads them, in bytes where rounding would make them equal."""
    if human_size(size) == human_size(limit):
        return f"{size:,} bytes", f"{limit:,} bytes"
    return human_size(size), human_size(limit)


def too_big_file(name: str, size: int | None, max_bytes: int) -> str:
    said, limit = ("", human_size(max_bytes)) if size is None else _sizes(size, max_bytes)
    said = f" ({said})" if said else ""
    return f"{named(name)}{said} is larger than this project takes for one file ({limit})."


def too_big_for_prompt(total: int, policy: FilesPolicy) -> str:
    said, limit = _sizes(total, policy.max_prompt_bytes)
    return f"These files come to {said}, more than this project takes with one message ({limit})."


def type_refused(name: str, media_type: str) -> str:
    return f"{named(name)} is {media_type}, a type this project does not take."


def declared_refusal(attachments: Sequence[InboundAttachment], policy: FilesPolicy) -> str | None:
    """Why a message's files are refused from what the platform declares of them, or None.
    A size the platform does not declare is counted while the file is saved."""
    for attachment in attachments:
        if attachment.size is not None and attachment.size > policy.max_file_bytes:
            return too_big_file(attachment.name, attachment.size, policy.max_file_bytes)
    total = sum(a.size or 0 for a in attachments)
    if total > policy.max_prompt_bytes:
        return too_big_for_prompt(total, policy)
    return None
