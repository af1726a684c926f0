"""The pure parts of the files' choice (issue 32): its tokens (signed, one choice of one
prompt in one round, within Telegram's 64 bytes, never a request's), its card, and the
checks a press meets before the ledger is touched."""

from __future__ import annotations

from datetime import UTC, datetime

from gateway.action_tokens import interaction_named
from gateway.attachments import InboundAttachment, without_files
from gateway.domain import Actor, ConversationRef
from gateway.session_record import SessionRecord
from gateway.sessions.file_choice import (
    click_refusal,
    encode_files_token,
    files_card,
    verify_files_token,
)
from gateway.store.records import FilesChoice, PromptRecord, PromptState
from tests.session_records import session_record

KEY = b"k" * 32
ALICE = Actor(platform="memory", user_id="alice", display="Alice")
BOB = Actor(platform="memory", user_id="bob", display="Bob")
ROOM = ConversationRef(platform="memory", space="team", channel="room", thread="t1")
ELSEWHERE = ConversationRef(platform="memory", space="team", channel="other", thread="t1")
NOW = datetime(2026, 1, 1, tzinfo=UTC)
SHOT = InboundAttachment(name="screen\nshot.png", reference="f1", size=10)


def _prompt(
    choice: FilesChoice | None = FilesChoice.WAITING,
    state: PromptState = PromptState.INTERRUPTED,
    files: tuple[InboundAttachment, ...] = (SHOT,),
) -> PromptRecord:
    return PromptRecord(
        id=123456789012345678,
        session_id="s1",
        conversation=ROOM,
        platform_message_id="m5",
        author=ALICE,
        text="why?",
        state=state,
        position=5,
        created_at=NOW,
        updated_at=NOW,
        attachments=files,
        files_choice=choice,
        files_round=2,
    )


def _session(closed_at: datetime | None = None) -> SessionRecord:
    return session_record(created_at=NOW, closed_at=closed_at)


SESSION = _session()


def test_a_token_names_one_choice_of_one_prompt_in_one_round_and_fits_telegram() -> None:
    token = encode_files_token(KEY, FilesChoice.WITHOUT, 123456789012345678, 999_999_999)
    assert len(token) <= 64 and interaction_named(token) is None  # never a request's
    assert verify_files_token(KEY, token) == (FilesChoice.WITHOUT, 123456789012345678, 999_999_999)
    assert verify_files_token(b"x" * 32, token) is None  # another gateway's key
    forged = token.replace(":w:", ":d:")  # the same tag on another choice
    assert verify_files_token(KEY, forged) is None
    assert verify_files_token(KEY, "f1:w:1:1") is None


def test_the_card_offers_try_again_only_where_fetching_again_may_help() -> None:
    card = files_card(KEY, _prompt(), "'screen.png' could not be downloaded", again=True)
    assert [a.label for a in card.actions] == ["Send without the file", "Try again", "Drop it"]
    assert card.summary == "'screen.png' could not be downloaded"  # the buttons say the rest
    assert [verify_files_token(KEY, a.token) for a in card.actions] == [
        (choice, 123456789012345678, 2)
        for choice in (FilesChoice.WITHOUT, FilesChoice.AGAIN, FilesChoice.DROPPED)
    ]
    many = _prompt(files=(SHOT, SHOT))
    sized = files_card(KEY, many, "too large", again=False)
    assert [a.label for a in sized.actions] == ["Send without the files", "Drop it"]
    assert "its files did not come" in sized.title


def test_a_press_is_refused_before_the_ledger_unless_it_is_the_authors_current_one() -> None:
    waiting = _prompt()
    assert click_refusal(waiting, 2, clicker=ALICE, where=ROOM, session=SESSION) is None
    assert click_refusal(None, 2, clicker=ALICE, where=ROOM, session=SESSION) is not None
    assert click_refusal(waiting, 2, clicker=ALICE, where=ELSEWHERE, session=SESSION) == (
        "This button is not valid."
    )
    other = click_refusal(waiting, 2, clicker=BOB, where=ROOM, session=SESSION)
    assert other is not None and other.startswith("Only ")
    stale = click_refusal(waiting, 1, clicker=ALICE, where=ROOM, session=SESSION)
    assert stale == "These buttons are from an earlier try: use the newest ones."
    sent = _prompt(FilesChoice.WITHOUT, PromptState.DONE)
    assert click_refusal(sent, 2, clicker=ALICE, where=ROOM, session=SESSION) == (
        "This message was already sent without its file."
    )
    ended = click_refusal(waiting, 2, clicker=ALICE, where=ROOM, session=_session(NOW))
    assert ended == "Its session has ended: send the message again."


def test_the_text_sent_without_its_files_names_each_on_one_line() -> None:
    assert without_files("why?", (SHOT,)) == (
        "why?\n\n(Sent with a file that was refused or could not be downloaded: screen shot.png."
        " It is not here.)"
    )
    assert without_files("", (SHOT, SHOT)).startswith("(Sent with files that")
