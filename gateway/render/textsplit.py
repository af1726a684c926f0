"""Split long agent Markdown into platform-sized messages, each one valid on its own.

A part holds at most ``limit`` characters of source, cut where the text allows it best: after
a blank line (or around a code block), else at a line break, else (a line longer than a
message) at a space. A part that ends inside a fenced code block is closed with a fence, and
the next part reopens it with the same fence and info string, so that every part renders as
the agent meant it (each part is rendered on its own: gateway/render/markdown.py). Fences are read
as
CommonMark reads them: ``` or ~~~, three or more, up to three spaces of indentation (or inside
a list item or a quote), closed by the same character at least as many times; a fence of four
backticks may hold lines of three.

Take the added fences away (:func:`split_parts` says which they are) and the parts are exactly
the text, character for character.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from itertools import accumulate

__all__ = ["GrowingSplit", "SplitPart", "fit_rendered", "split_parts", "split_text"]

_INFO_MAX = 32  # characters of a fence's info string carried into the next part
_MIN_SPLIT = 64  # the least limit a text is split for
_MIN_PIECE = 16  # the least text a part must have room for besides its fences
# an opening fence: a quote's "> " markers, a list item's marker, then up to three spaces
_OPENS = re.compile(
    r"(?P<quote>(?:[ ]{0,3}>[ ]?)*)(?P<item>[ ]{0,3}(?:[-+*]|[0-9]{1,9}[.)])[ ]{1,4})?"
    r"(?P<indent>[ ]{0,3})(?P<marker>`{3,}|~{3,})(?P<info>[^\n]*)"
)


@dataclass(frozen=True, slots=True)
class _Fence:
    """An open fenced code block: how to close it, and how to open it again."""

    quote: str  # the quote markers each of its lines starts with
    indent: int  # spaces before its marker (a list item's marker counts as spaces)
    marker: str

    @property
    def close(self) -> str:
        return f"{self.quote}{' ' * self.indent}{self.marker}"

    def closed_by(self, line: str) -> bool:
        body = line[len(self.quote) :] if line.startswith(self.quote) else line.lstrip(" >")
        stripped = body.lstrip(" ")
        if len(body) - len(stripped) > self.indent + 3:
            return False
        run = len(stripped) - len(stripped.lstrip(self.marker[0]))
        return run >= len(self.marker) and not stripped[run:].strip(" \t\r\n")


def _opening(line: str) -> tuple[_Fence, str] | None:
    """The fence ``line`` opens, and the line that opens it again in the next part."""
    if "`" not in line and "~" not in line:  # the common case, cheaply
        return None
    match = _OPENS.match(line)
    if match is None:
        return None
    marker, info = match["marker"], match["info"].strip()
    if marker[0] == "`" and "`" in info:
        return None  # CommonMark: a backtick fence's info string has no backtick
    quote = match["quote"]
    indent = len(match["item"] or "") + len(match["indent"])
    fence = _Fence(quote=quote, indent=indent, marker=marker)
    return fence, f"{quote}{' ' * indent}{marker}{info[:_INFO_MAX]}\n"


@dataclass(frozen=True, slots=True)
class SplitPart:
    """One part: ``text`` is the agent's own, ``before`` and ``after`` the fences added."""

    before: str
    text: str
    after: str

    def __str__(self) -> str:
        return f"{self.before}{self.text}{self.after}"


@dataclass(frozen=True, slots=True)
class _Chunk:
    part: SplitPart
    settles: bool  # the parts after it are those of the text after it, split alone
    seen: int  # how far into the text its place was decided (the end of a line)


def split_text(text: str, limit: int) -> list[str]:
    """Split ``text`` into parts of at most ``limit`` characters (see the module's doc)."""
    if len(text) <= limit:
        return [text]
    return [str(chunk.part) for chunk in _split(text, limit)]


def fit_rendered(parts: list[str], limit: int, length: Callable[[str], int]) -> list[str]:
    """``parts`` (of at most ``limit`` characters of source each), each split again where
    ``length``, the platform's count of a part once rendered (escapes included), says it is
    still too long; unchanged where ``length`` is ``len``."""
    if length is len:
        return parts
    return [fitted for part in parts for fitted in _fit(part, limit, length)]


def _fit(part: str, limit: int, length: Callable[[str], int]) -> list[str]:
    rendered = length(part)
    if rendered <= limit:
        return [part]
    smaller = len(part) * limit // rendered - 1  # what the source may hold at this ratio
    if smaller < _MIN_SPLIT:
        return [part]  # nothing sensible to cut: the platform clips it, and says so
    return [fitted for piece in split_text(part, smaller) for fitted in _fit(piece, limit, length)]


def split_parts(text: str, limit: int) -> list[SplitPart]:
    """:func:`split_text`, with the fences each part adds told apart from the agent's text."""
    if len(text) <= limit:
        return [SplitPart("", text, "")]
    return [chunk.part for chunk in _split(text, limit)]


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


def _split(text: str, limit: int) -> list[_Chunk]:
    if limit < _MIN_SPLIT:
        raise ValueError("limit too small to split text sensibly")
    # pieces: the lines, a line too long cut in pieces; for each, the fence open before it
    # (a piece inside a line has its line's), whether it starts a line, and how good a
    # place to cut the gap before it is (2: a blank line or a code block's edge, outside
    # any code block; 1: a line break; 0: inside a line)
    pieces: list[str] = []
    fences: list[tuple[_Fence, str] | None] = []
    quality: list[int] = []
    lines_of: list[int] = []  # the line each piece is of
    line_ends: list[int] = []  # where each line ends in the text
    fence: tuple[_Fence, str] | None = None
    previous_blank = False
    previous_closed = False
    for number, line in enumerate(text.splitlines(keepends=True)):
        line_ends.append((line_ends[-1] if line_ends else 0) + len(line))
        before = fence
        if fence is None:
            fence = _opening(line)
        elif fence[0].closed_by(line):
            fence = None
        open_ = before or fence
        reserve = len(before[1]) if before else 0
        close = len(open_[0].close) + 1 if open_ else 0
        if limit - reserve - close < _MIN_PIECE:  # a fence too long to carry: plain lines
            fence, before, reserve, close = None, None, 0, 0
        blank = not line.strip()
        good = before is None and (blank or previous_blank or previous_closed or fence is not None)
        for index, piece in enumerate(_pieces(line, limit - reserve - close)):
            pieces.append(piece)
            fences.append(before)
            quality.append(0 if index else 2 if good else 1)
            lines_of.append(number)
        previous_blank = blank
        previous_closed = before is not None and fence is None
    fences.append(fence)  # after the last piece
    ends = [0, *accumulate(len(piece) for piece in pieces)]

    def size(start: int, end: int) -> int:
        """The part of pieces [start, end): its reopening, its text, its closing fence."""
        head, tail = fences[start], fences[end] if end < len(pieces) else None
        return (
            (len(head[1]) if head else 0)
            + ends[end]
            - ends[start]
            + (len(tail[0].close) + 1 if tail else 0)
        )

    chunks: list[_Chunk] = []
    start, count = 0, len(pieces)
    while start < count:
        end = start + 1  # the first piece that does not fit
        while end < count and size(start, end + 1) <= limit:
            end += 1
        if end >= count:
            cut, looked = count, count - 1
        else:
            cut, looked = _best_cut(start, end, limit, quality, size), end
        head, tail = fences[start], fences[cut] if cut < count else None
        body = text[ends[start] : ends[cut]]
        after = ""
        if tail is not None:
            after = tail[0].close if body.endswith("\n") else "\n" + tail[0].close
        part = SplitPart(head[1] if head else "", body, after)
        # nothing it looked at can change: the last line may still grow (and its pieces,
        # whether it opens a fence, where it is cut with it)
        settles = (
            tail is None and cut < count and quality[cut] > 0 and lines_of[looked] < lines_of[-1]
        )
        chunks.append(_Chunk(part, settles, line_ends[lines_of[looked]]))
        start = cut
    return chunks


def _best_cut(
    start: int, end: int, limit: int, quality: list[int], size: Callable[[int, int], int]
) -> int:
    """Where to end a part of pieces from ``start`` that cannot hold piece ``end``: the
    last blank line (or a code block's edge) past half the limit, else the last line
    break, else the last piece that fits."""
    best_line = 0
    for cut in range(end, start, -1):
        good = quality[cut]
        if good == 2 and size(start, cut) >= limit // 2:
            return cut
        if good and not best_line:
            best_line = cut
    return best_line or end


class GrowingSplit:
    """``split_text`` of a text that mostly grows at its end (a streamed answer), without
    splitting its start again each time: the same parts, in time proportional to the new
    text instead of the whole (a million streamed deltas spent a tenth of their time here).

    A part is settled once nothing after it can change it: it ends at a line break outside
    any code block, and the lines it looked at to decide where to end are complete (the
    last line may still grow) and unchanged. Whenever the text does not start with the
    settled parts and those lines (an item's final text replaced its deltas), the whole text
    is split again.
    """

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._settled: list[str] = []
        self._settled_chars = 0
        self._seen = ""  # the text past the settled parts that their places depend on

    def split(self, text: str) -> list[str]:
        if not self._starts_with_settled(text):
            self._settled, self._settled_chars, self._seen = [], 0, ""
        rest = text[self._settled_chars :]
        if len(rest) <= self._limit:  # never empty after a settled part: it looked past it
            return [*self._settled, rest]
        chunks = _split(rest, self._limit)
        seen_end = self._settled_chars + len(self._seen)
        base = self._settled_chars
        for chunk in chunks[:-1]:
            if not chunk.settles:
                break
            self._settled.append(chunk.part.text)
            self._settled_chars += len(chunk.part.text)
            seen_end = max(seen_end, base + chunk.seen)
            chunks = chunks[1:]
        self._seen = text[self._settled_chars : seen_end]
        return [*self._settled, *(str(chunk.part) for chunk in chunks)]

    def _starts_with_settled(self, text: str) -> bool:
        offset = 0
        for chunk in self._settled:
            if not text.startswith(chunk, offset):
                return False
            offset += len(chunk)
        return text.startswith(self._seen, offset)
