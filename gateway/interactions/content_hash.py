"""The content hash: what exactly a person was asked to approve (issue 17, "nothing approved
unseen").

SHA-256 over the request's kind, title, summary and its full detail, actions and questions
as the ledger stores them (the codec's JSON, which does not change once written), so the
hash is the same on every read and after a restart. Every card shows its short form; each
vote and the decision record the full one.
"""

from __future__ import annotations

import functools
import hashlib

__all__ = ["SHORT_HASH_CHARS", "content_hash", "short_hash"]

SHORT_HASH_CHARS = 10
# a request's hash is taken on each of its reads (several per approval): small ones are
# remembered (the parts are the key), a big diff is hashed again
_MEMO_ENTRIES = 512
_MEMO_MAX_CHARS = 4096


def content_hash(
    *, kind: str, title: str, summary: str, detail_json: str, actions_json: str, questions_json: str
) -> str:
    parts = (kind, title, summary, detail_json, actions_json, questions_json)
    if sum(map(len, parts)) <= _MEMO_MAX_CHARS:
        return _remembered(parts)
    return _digest(parts)


@functools.lru_cache(maxsize=_MEMO_ENTRIES)
def _remembered(parts: tuple[str, ...]) -> str:
    return _digest(parts)


def _digest(parts: tuple[str, ...]) -> str:
    digest = hashlib.sha256()
    for part in parts:
        encoded = part.encode("utf-8")
        digest.update(len(encoded).to_bytes(8, "big"))  # no two splits hash alike
        digest.update(encoded)
    return digest.hexdigest()


def short_hash(full: str) -> str:
    return full[:SHORT_HASH_CHARS]
