"""Secret answers sealed for the host that runs the agent (issue 19, design point 4).

The ledger keeps secret answers redacted (``store.codec``). When a form is submitted on one
host for a session another host runs, the owner must still write the clear text to its
agent: the receiver seals the secret answers with AES-GCM under a key derived from the
shared HMAC key (HKDF-SHA256, its own ``info``, so the two uses of the key never meet) and
the ledger keeps the sealed text in ``sealed_answers`` until the owner's delivery record
deletes it. The interaction id is the associated data: a sealed text moved to another
interaction's row does not open.

Pure: bytes in, bytes out; no IO.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Mapping

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from gateway.domain import Answer
from gateway.errors import SealBroken
from gateway.store.codec import decode_answers, encode_answers

__all__ = ["SEAL_INFO", "Sealer"]

SEAL_INFO = b"agent-gateway sealed answers v1"
_NONCE_BYTES = 12  # AES-GCM's standard nonce, random per seal (2^32 seals per key are safe)
_VERSION = "v1."  # the sealed text's prefix: a later scheme can be told apart


class Sealer:
    """Seals and opens secret answers under the key every host derives alike."""

    def __init__(self, hmac_key: bytes) -> None:
        key = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=SEAL_INFO).derive(hmac_key)
        self._aead = AESGCM(key)

    def seal(self, interaction_id: str, answers: Mapping[str, Answer]) -> str:
        """``answers`` as text for the ledger (base64url of nonce + ciphertext + tag)."""
        return self.seal_text(interaction_id, encode_answers(answers))

    def open(self, interaction_id: str, text: str) -> dict[str, Answer]:
        """The answers sealed for ``interaction_id``; SealBroken when they do not open."""
        return decode_answers(self.open_text(interaction_id, text))

    def seal_text(self, context: str, plain: str) -> str:
        """``plain`` sealed for ``context`` (what it belongs to: it opens for that only)."""
        nonce = os.urandom(_NONCE_BYTES)
        sealed = self._aead.encrypt(nonce, plain.encode(), context.encode())
        return _VERSION + base64.urlsafe_b64encode(nonce + sealed).decode("ascii")

    def open_text(self, context: str, text: str) -> str:
        """What :meth:`seal_text` sealed for ``context``; SealBroken when it does not open."""
        if not text.startswith(_VERSION):
            raise SealBroken("a sealed answer of an unknown scheme")
        try:
            raw = base64.urlsafe_b64decode(text[len(_VERSION) :])
            nonce, sealed = raw[:_NONCE_BYTES], raw[_NONCE_BYTES:]
            return self._aead.decrypt(nonce, sealed, context.encode()).decode()
        except (InvalidTag, ValueError) as exc:
            raise SealBroken(
                "a sealed answer does not open: is hmac_key_file the same on every host?"
            ) from exc
