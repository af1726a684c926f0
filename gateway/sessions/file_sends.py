"""A session's ``send_file`` calls: asked, decided, uploaded, answered (issue 33).

The runner opens the file (gateway/sessions/outgoing_files.py) and, where a person must look
first, opens an interaction keyed by the tool call (``send_file:`` + the MCP request's key):
the call waits here (:meth:`FileSends.expect`) until that interaction is decided and
"delivered", which for a file means uploaded to the conversations that show the session
(:meth:`FileSends.deliver`); the upload's outcome is the tool's result, what the agent reads.
A call no person needs to see is uploaded at once (:meth:`FileSends.upload`). Either way the
bytes sent are the ones read when the call came, the ones the card described.

A delivered call is resolved by the agent's next event (:meth:`FileSends.delivered_keys`);
the end of the agent's process fails every call still waiting (its MCP server is gone with
it) and the ledger orphans their interactions, as for any request of that epoch.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gateway.domain import (
    Action,
    ConversationRef,
    Decision,
    Effect,
    InteractionKind,
    InteractionRequest,
    Scope,
)
from gateway.errors import PlatformError
from gateway.interactions.machine import Interaction
from gateway.platform import FileUpload, Platform, SendsFiles, gateway_speaking
from gateway.sessions.outgoing_files import OpenedFile
from gateway.wording import file_size, named

__all__ = ["FILE_KEY_PREFIX", "FileSends", "SendOutcome", "file_request"]

log = logging.getLogger(__name__)

FILE_KEY_PREFIX = "send_file:"
SEND = Action(id="send", label="Send it", effect=Effect.ALLOW, scope=Scope.ONCE)
DONT_SEND = Action(id="keep", label="Don't send", effect=Effect.DENY, scope=Scope.ONCE)


@dataclass(frozen=True, kw_only=True, slots=True)
class SendOutcome:
    sent: bool
    text: str  # what the agent reads


def file_request(
    call_key: str, opened: OpenedFile, caption: str | None, reasons: Sequence[str]
) -> InteractionRequest:
    """The interaction a file waits in: the card names the file, its size, type and first
    lines, and why a person is asked."""
    reason = "; ".join(reasons) or None
    return InteractionRequest(
        native_key=FILE_KEY_PREFIX + call_key,
        kind=InteractionKind.APPROVAL,
        title=f"Send {opened.name} to the chat?",
        summary=f"The agent wants to send {named(opened.relative)} ({file_size(opened.size)}).",
        detail=opened.detail(caption=caption, reason=reason),
        actions=(SEND, DONT_SEND),
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class _Waiting:
    opened: OpenedFile
    caption: str | None
    answer: asyncio.Future[SendOutcome]


class FileSends:
    def __init__(self, platforms: Mapping[str, Platform]) -> None:
        self._platforms = platforms
        self._waiting: dict[str, _Waiting] = {}  # native key -> the call waiting for a decision
        self._delivered: set[str] = set()  # native keys answered, not yet resolved

    @staticmethod
    def is_file_key(native_key: str | None) -> bool:
        return native_key is not None and native_key.startswith(FILE_KEY_PREFIX)

    def expect(
        self, native_key: str, opened: OpenedFile, caption: str | None
    ) -> asyncio.Future[SendOutcome]:
        answer: asyncio.Future[SendOutcome] = asyncio.get_running_loop().create_future()
        self._waiting[native_key] = _Waiting(opened=opened, caption=caption, answer=answer)
        return answer

    def forget(self, native_key: str) -> None:
        self._waiting.pop(native_key, None)

    def delivered_keys(self) -> list[str]:
        """The calls answered since the last look (the agent's next event resolves them)."""
        keys, self._delivered = sorted(self._delivered), set()
        return keys

    def end_epoch(self, why: str) -> None:
        """The agent's process ended: nobody waits for these calls any more."""
        for waiting in self._waiting.values():
            if not waiting.answer.done():
                waiting.answer.set_result(SendOutcome(sent=False, text=f"not sent: {why}"))
        self._waiting.clear()
        self._delivered.clear()

    async def deliver(
        self, interaction: Interaction, decision: Decision, conversations: Sequence[ConversationRef]
    ) -> str:
        """A person decided: upload (or not), and answer the waiting call with the outcome;
        the outcome's words (what the agent reads)."""
        key = interaction.native_key
        assert key is not None
        waiting = self._waiting.pop(key, None)
        action = next((a for a in interaction.actions if a.id == decision.action_id), None)
        fact = interaction.decision
        who = str(fact.actor) if fact is not None else "a person"
        if waiting is None:  # the call is gone (its MCP server ended): nothing to send for
            return "not sent: the agent no longer waits for it"
        if action is None or action.effect is not Effect.ALLOW:
            said = f" ({decision.message})" if decision.message else ""
            outcome = SendOutcome(
                sent=False, text=f"not sent: {who} chose not to send {waiting.opened.name}{said}"
            )
        else:
            outcome = await self.upload(conversations, waiting.opened, waiting.caption)
        self._delivered.add(key)
        if not waiting.answer.done():
            waiting.answer.set_result(outcome)
        return outcome.text

    async def upload(
        self, conversations: Sequence[ConversationRef], opened: OpenedFile, caption: str | None
    ) -> SendOutcome:
        """Upload to every conversation that shows the session; what the agent reads."""
        upload = FileUpload(
            name=opened.name, content=opened.content, media_type=opened.media_type, caption=caption
        )
        sent: list[str] = []
        missed: list[str] = []
        for conversation in conversations:
            platform = self._platforms.get(conversation.platform)
            if platform is None:
                continue
            problem = await self._upload_one(platform, conversation, upload)
            if problem is None:
                sent.append(conversation.platform)
            else:
                missed.append(f"{conversation.platform}: {problem}")
                await self._say_not_sent(platform, conversation, opened, problem)
        size = file_size(opened.size)
        if sent and not missed:
            return SendOutcome(sent=True, text=f"sent {opened.relative} ({size}) to the chat")
        if sent:
            return SendOutcome(
                sent=True,
                text=f"sent {opened.relative} ({size}) to the chat; not to {'; '.join(missed)}",
            )
        if not missed:
            return SendOutcome(sent=False, text="not sent: the session is shown in no chat")
        return SendOutcome(sent=False, text=f"not sent: {'; '.join(missed)}")

    @staticmethod
    async def _upload_one(
        platform: Platform, conversation: ConversationRef, upload: FileUpload
    ) -> str | None:
        """None when it was uploaded; else why not, in words."""
        if not isinstance(platform, SendsFiles):
            return "this chat platform does not take files from the gateway"
        limit = platform.file_limit(conversation, upload)
        if len(upload.content) > limit:
            return f"this chat takes files of up to {file_size(limit)}"
        try:
            await platform.send_file(conversation, upload)
        except PlatformError as exc:
            log.warning("send_file to %s failed: %s", conversation.platform, exc)
            return f"the upload failed ({exc})"
        return None

    @staticmethod
    async def _say_not_sent(
        platform: Platform, conversation: ConversationRef, opened: OpenedFile, problem: str
    ) -> None:
        size = file_size(opened.size)
        text = f"📎 The agent sent {named(opened.relative)} ({size}), not shown here: {problem}."
        try:
            with gateway_speaking():
                await platform.send_text(conversation, text)
        except PlatformError as exc:
            log.warning("send_file: the line about %s not sent: %s", opened.relative, exc)
