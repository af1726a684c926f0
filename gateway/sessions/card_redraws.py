"""Cards that are no request's (a /model list, a schedule's), redrawn where this process
showed them: best effort, one the platform refuses keeps what it showed (its buttons are
answered from the ledger when pressed)."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

from gateway.cards import Card
from gateway.errors import PlatformError
from gateway.platform import MessageRef, Platform

__all__ = ["redraw_all"]

log = logging.getLogger(__name__)


async def redraw_all(
    platforms: Mapping[str, Platform], refs: Iterable[MessageRef], card: Card, *, what: str
) -> None:
    """Edit every message of ``refs`` to show ``card`` (``what``: the card, for the log)."""
    for ref in refs:
        platform = platforms.get(ref.conversation.platform)
        if platform is None:
            continue
        try:
            await platform.edit_card(ref, card)
        except PlatformError as exc:
            log.info("%s in %s not redrawn: %s", what, ref.conversation.key(), exc)
