"""Split long agent text into platform-sized messages without breaking code fences.

A chunk that ends inside a fenced block is closed with a fence, and the next chunk reopens it
with the same info string, so every message renders as the agent meant it.
"""

from __future__ import annotations

__all__ = ["GrowingSplit", "split_text"]

_FENCE = "```"
_CLOSE = "\n" + _FENCE  # worst case: a newline before the closing fence


def split_text(text: str, limit: int) -> list[str]:
    """Split ``text`` into chunks of at most ``limit`` characters, preferring line breaks."""
    if len(text) <= limit:
        return [text]
    return _split(text, limit)


def _split(text: str, limit: int) -> list[str]:
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


class GrowingSplit:
    """``split_text`` of a text that mostly grows at its end (a streamed answer), without
    splitting its start again each time: the same chunks, in time proportional to the new
    text instead of the whole (a million streamed deltas spent a tenth of their time here).

    Chunks before the last two are settled: the greedy split closes a chunk on the length of
    the piece that follows it, and those pieces cannot change when text is appended. A
    settled chunk never holds a fence (whose state would carry over). Whenever the text does
    not start with the settled chunks (an item's final text replaced its deltas), the whole
    text is split again.
    """

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._settled: list[str] = []
        self._settled_chars = 0

    def split(self, text: str) -> list[str]:
        if not self._starts_with_settled(text):
            self._settled, self._settled_chars = [], 0
        if not self._settled:
            chunks = split_text(text, self._limit)
        else:
            rest = text[self._settled_chars :]
            chunks = [*self._settled, *(_split(rest, self._limit) if rest else [])]
        for chunk in chunks[len(self._settled) : -2]:
            if _FENCE in chunk:
                break
            self._settled.append(chunk)
            self._settled_chars += len(chunk)
        return chunks

    def _starts_with_settled(self, text: str) -> bool:
        offset = 0
        for chunk in self._settled:
            if not text.startswith(chunk, offset):
                return False
            offset += len(chunk)
        return True
