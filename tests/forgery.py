"""Tokens a test forges: well formed, but not signed by the gateway."""

from __future__ import annotations

__all__ = ["tampered"]


def tampered(token: str) -> str:
    """The same token with the last character of its tag changed (never to itself: a tag
    ending in "A" made a "forged" token the genuine one, once in 64 runs)."""
    return token[:-1] + ("A" if token[-1] != "A" else "B")
