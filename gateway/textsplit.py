"""Split long agent text into platform-sized messages without breaking code fences.

A chunk that ends inside a fenced block is closed with a fence, and the next chunk reopens it
with the same info string, so every message renders as the agent meant it.
"""

from __future__ import annotations

__all__ = ["split_text"]

_FENCE = "```"
_CLOSE = "\n" + _FENCE  # worst case: a newline before the closing fence


def split_text(text: str, limit: int) -> list[str]:
    """Split ``text`` into chunks of at most ``limit`` characters, preferring line breaks."""
    if len(text) <= limit:
        return [text]
    if limit < 64:
        raise ValueError("limit too small to split text sensibly")
    chunks: list[str] = []
    current = ""
    fence: str | None = None  # the opening fence line (with its info string) still open
    for line in text.splitlines(keepends=True):
        reopen_cost = len(fence) + 1 if fence else 0
        max_piece = limit - len(_CLOSE) - max(reopen_cost, 32)
        for piece in _pieces(line, max_piece):
            # room for a closing fence is always kept: the piece may itself open one
            if current and len(current) + len(piece) > limit - len(_CLOSE):
                chunks.append(_closed(current, fence))
                current = fence + "\n" if fence else ""
            current += piece
        if line.lstrip().startswith(_FENCE):
            fence = None if fence is not None else line.strip()[:32]
    if current:
        chunks.append(current)
    return chunks


def _pieces(line: str, size: int) -> list[str]:
    """A line too long for one message, cut at spaces where there are some."""
    pieces = []
    while len(line) > size:
        cut = line.rfind(" ", size // 2, size)
        cut = size if cut <= 0 else cut + 1
        pieces.append(line[:cut])
        line = line[cut:]
    pieces.append(line)
    return pieces


def _closed(chunk: str, fence: str | None) -> str:
    if fence is None:
        return chunk
    return chunk + _FENCE if chunk.endswith("\n") else chunk + _CLOSE
