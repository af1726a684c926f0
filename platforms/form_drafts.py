"""A card's question form while people answer it: each person's own draft.

The core sends a card whose questions (``card.form``) are answered as a whole: one submit
token, one ``Inbox.on_form`` with every answer. Until then the answers in progress are
platform state, bounded: a form lives while its card is pending (at most :data:`MAX_FORMS`
forms, :data:`MAX_DRAFTS` people each, oldest dropped first). On one host they are kept in
memory (:class:`MemoryForms`: a gateway restart orphans every pending interaction, so
nothing in progress could be submitted after one anyway); where several hosts share a
ledger, in the ledger (:class:`LedgerForms`), because the next click may reach another host.

A *direct* form (one question, single choice, not secret) needs no state: an option's button
carries the option's token and the core decides on the click. Every other form keeps a
:class:`Draft` per person: which options they chose, what they typed ("other", free text, a
secret), which question they are at; the card shows the draft of the person who acted last.
Nothing in a form does IO or knows a platform: :class:`Form` methods return a :class:`Step` saying
what the platform must do (show the form again, refuse, ask for typed text, or hand the
answers to ``Inbox.on_form``), and each platform draws the form its own way: Telegram one
question at a time with buttons and ForceReply prompts (platforms/telegram/), a platform with
modals a page of inputs whose submission it feeds to the draft.

:class:`PendingForms` holds the forms of one platform by the key of the card's message there
(Telegram: chat id and message id), and reads and keeps the drafts (:func:`forms_for`
chooses where, once, when the platform is attached).
"""

from __future__ import annotations

import hashlib
import json
import logging
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from gateway.action_tokens import interaction_named
from gateway.cards import Card, FormQuestion
from gateway.domain import Actor, Answer, ConversationRef, Question
from gateway.errors import InvalidDecision, SealBroken, StoreError
from gateway.platform import FormLedger, Inbox, SharesForms, TextSealer
from gateway.render.commands import parse_answers
from gateway.store.codec import decode_answers, encode_answers

__all__ = [
    "MAX_DRAFTS",
    "MAX_FORMS",
    "Draft",
    "Form",
    "LedgerForms",
    "MemoryForms",
    "OpenPrompt",
    "PendingForms",
    "Place",
    "Redraw",
    "Refuse",
    "Step",
    "Submit",
    "decode_draft",
    "draft_context",
    "encode_draft",
    "form_id_of",
    "forms_for",
]

log = logging.getLogger(__name__)

K = TypeVar("K", bound=Hashable)

MAX_FORMS = 256
MAX_DRAFTS = 16


@dataclass(kw_only=True, slots=True)
class Draft:
    """One person's answers so far. Secret answers live here only until submitted."""

    actor: Actor
    step: int = 0
    chosen: dict[int, tuple[int, ...]] = field(default_factory=dict)  # question → options
    other: dict[int, str] = field(default_factory=dict)  # question → typed text
    secret: dict[int, Answer] = field(default_factory=dict)  # question → parsed answer
    # the platform's note of the prompt it sent for this person's typed answer (Telegram:
    # where it and the card are), so that a host that did not send it takes the reply
    prompt: str | None = None

    def answered(self, index: int) -> bool:
        return bool(self.chosen.get(index) or self.other.get(index) or index in self.secret)


@dataclass(frozen=True, kw_only=True, slots=True)
class Redraw:
    """Show the form again (the card message, with the acting person's draft)."""

    ack: str


@dataclass(frozen=True, kw_only=True, slots=True)
class Refuse:
    ack: str


@dataclass(frozen=True, kw_only=True, slots=True)
class OpenPrompt:
    """Ask the person for typed text to question ``question`` (privately for a secret)."""

    question: int
    private: bool


@dataclass(frozen=True, kw_only=True, slots=True)
class Submit:
    """Hand ``answers`` to ``Inbox.on_form`` with the form's submit token."""

    answers: dict[str, Answer]
    private: bool  # a secret answer was collected where only its person sees it


Step = Redraw | Refuse | OpenPrompt | Submit


@dataclass(kw_only=True, slots=True)
class Form:
    """The questions of one pending card message, and the drafts of those answering."""

    form_id: str  # form_id_of its submit token (a platform's local buttons may name it)
    conversation: ConversationRef
    card: Card
    drafts: OrderedDict[str, Draft] = field(default_factory=OrderedDict)
    viewer: str | None = None  # whose draft the card shows

    # --- what the card offers ---------------------------------------------------------

    @property
    def items(self) -> tuple[FormQuestion, ...]:
        return self.card.form.questions if self.card.form is not None else ()

    @property
    def submit_token(self) -> str:
        return self.card.form.submit_token if self.card.form is not None else ""

    def question(self, index: int) -> Question:
        return self.items[index].question

    @property
    def direct(self) -> bool:
        """One single-choice question, not secret: its option buttons decide on a click."""
        items = self.items
        return len(items) == 1 and not items[0].question.multi and not items[0].question.secret

    def option_at(self, token: str) -> tuple[int, int] | None:
        for q_index, item in enumerate(self.items):
            if token in item.option_tokens:
                return q_index, item.option_tokens.index(token)
        return None

    def draft_shown(self) -> Draft | None:
        return self.drafts.get(self.viewer) if self.viewer is not None else None

    def draft(self, actor: Actor) -> Draft:
        found = self.drafts.get(actor.user_id)
        if found is None:
            found = Draft(actor=actor)
            self.drafts[actor.user_id] = found
            while len(self.drafts) > MAX_DRAFTS:
                self.drafts.popitem(last=False)
        self.drafts.move_to_end(actor.user_id)
        self.viewer = actor.user_id
        return found

    # --- choices ------------------------------------------------------------------------

    def choose(self, actor: Actor, q_index: int, o_index: int) -> Step:
        question = self.question(q_index)
        if question.secret:
            return Refuse(ack="Answer this question privately.")
        draft = self.draft(actor)
        draft.step = q_index
        label = question.options[o_index].label
        if question.multi:
            chosen = set(draft.chosen.get(q_index, ()))
            chosen.symmetric_difference_update({o_index})
            draft.chosen[q_index] = tuple(sorted(chosen))
            return Redraw(ack=("☑ " if o_index in chosen else "☐ ") + label)
        draft.chosen[q_index] = (o_index,)
        draft.other.pop(q_index, None)
        draft.step = self._after(q_index)
        return Redraw(ack=f"● {label}")

    def ask_text(self, actor: Actor, q_index: int) -> Step:
        if not 0 <= q_index < len(self.items):
            return Refuse(ack="This form has changed; look at the card again.")
        question = self.question(q_index)
        if not (question.allow_other or question.secret or not question.options):
            return Refuse(ack="This question takes one of its options.")
        self.draft(actor).step = q_index
        return OpenPrompt(question=q_index, private=question.secret)

    def move(self, actor: Actor, where: str) -> Step:
        """``next``, ``back`` or ``skip`` on the acting person's draft."""
        draft = self.draft(actor)
        current = draft.step
        if where == "back":
            draft.step = max(0, current - 1)
            return Redraw(ack="Back")
        if current >= len(self.items):
            return Redraw(ack="")
        question = self.question(current)
        if where == "skip":
            if question.required:
                return Refuse(ack="This question needs an answer.")
            draft.chosen.pop(current, None)
            draft.other.pop(current, None)
            draft.secret.pop(current, None)
            draft.step = self._after(current)
            return Redraw(ack="Skipped")
        if question.required and not draft.answered(current):
            return Refuse(ack="Answer this question first.")
        draft.step = self._after(current)
        return Redraw(ack="")

    def submit(self, actor: Actor) -> Step:
        draft = self.draft(actor)
        for index, item in enumerate(self.items):
            if item.question.required and not draft.answered(index):
                draft.step = index
                name = item.question.header or item.question.text
                return Refuse(ack=f"Answer “{name[:60]}” first.")
        return Submit(answers=self.answers(draft), private=bool(draft.secret))

    # --- typed text ---------------------------------------------------------------------

    def typed(self, actor: Actor, q_index: int, text: str, *, in_private: bool) -> Step:
        """Text the person typed for question ``q_index`` (``in_private``: where only they
        see it, which a secret needs)."""
        question = self.question(q_index)
        draft = self.draft(actor)
        if question.secret:
            if not in_private:
                return Refuse(ack="A secret answer is only taken in a private chat.")
            try:
                draft.secret[q_index] = parse_answers([question], text, private=True)[question.id]
            except (InvalidDecision, KeyError) as exc:
                return Refuse(ack=f"Not taken: {exc}")  # never echoes what was typed
        else:
            draft.other[q_index] = text
            if not question.multi:
                draft.chosen.pop(q_index, None)
        if len(self.items) == 1 and not question.multi:
            return Submit(answers=self.answers(draft), private=bool(draft.secret))
        draft.step = self._after(q_index) if not question.multi else q_index
        return Redraw(ack="Answer noted.")

    # --- helpers ------------------------------------------------------------------------

    def _after(self, q_index: int) -> int:
        """The step after answering question ``q_index``; one question stays where it is."""
        return q_index if len(self.items) == 1 else q_index + 1

    def answers(self, draft: Draft) -> dict[str, Answer]:
        found: dict[str, Answer] = {}
        for index, item in enumerate(self.items):
            question = item.question
            if index in draft.secret:
                found[question.id] = draft.secret[index]
            elif draft.answered(index):
                found[question.id] = Answer(
                    option_ids=tuple(question.options[o].id for o in draft.chosen.get(index, ())),
                    other=draft.other.get(index),
                )
        return found


def form_id_of(submit_token: str) -> str:
    """The id a form's own buttons name it by (Telegram's ``f<id>:<op>``): the id of the
    request its submit token names, so that every host (and a restarted one) gives a card's
    form the same id, and a host that did not send the card finds it by the id (at most 48
    characters). A text that is no token (a test's) gets a digest of itself."""
    named = interaction_named(submit_token)
    if named is not None:
        return named
    return "x" + hashlib.sha256(submit_token.encode()).hexdigest()[:12]


# where a host that did not send a card finds it: the conversation clicked in, and the id of
# the request the click names (a form id, or a token's request)
Place = tuple[ConversationRef, str]


class PendingForms(ABC, Generic[K]):
    """The pending forms a platform knows, by the key of their card's message; ``on_forget``
    is told each key whose form is dropped (forgotten, or the oldest past MAX_FORMS).

    The forms (each card's questions) are held in this process's memory, for the cards it
    sent or edited; where each person's draft lives is the implementation's:
    :class:`MemoryForms` (one host: memory) or :class:`LedgerForms` (several hosts sharing
    a ledger). A click reads the form with :meth:`get` (the clicking person's draft as it
    stands), moves the draft (``Form`` methods), then :meth:`save` or :meth:`drop_draft`.
    """

    def __init__(self, *, on_forget: Callable[[K], None] = lambda key: None) -> None:
        self._forms: OrderedDict[K, Form] = OrderedDict()
        self._on_forget = on_forget

    def new(self, conversation: ConversationRef, card: Card) -> Form | None:
        """A form for a card about to be sent (its buttons name it); None without questions."""
        if card.form is None:
            return None
        return Form(
            form_id=form_id_of(card.form.submit_token), conversation=conversation, card=card
        )

    def keep(self, key: K, form: Form) -> None:
        """The card of ``form`` was sent as message ``key``."""
        self._forms[key] = form
        while len(self._forms) > MAX_FORMS:
            oldest, _ = self._forms.popitem(last=False)
            self._on_forget(oldest)

    def update(self, key: K, conversation: ConversationRef, card: Card) -> None:
        """A card was edited: keep its form while it has questions, else forget it."""
        if card.form is None:
            self.forget(key)
            return
        form = self._forms.get(key)
        if form is None:  # sent by an earlier process: its drafts are gone, its form is not
            form = self.new(conversation, card)
            assert form is not None
            self.keep(key, form)
        form.card = card
        self._forms.move_to_end(key)

    def peek(self, key: K) -> Form | None:
        """The form of message ``key`` as this process holds it (no trip: drawing a card)."""
        return self._forms.get(key)

    def forget(self, key: K) -> None:
        if self._forms.pop(key, None) is not None:
            self._on_forget(key)

    @abstractmethod
    async def get(self, key: K, actor: Actor, *, at: Place | None = None) -> Form | None:
        """The form of message ``key`` (``at``: where a host that did not send the card finds
        it), with ``actor``'s draft as it stands; None when no pending form is there."""

    @abstractmethod
    async def save(self, key: K, form: Form, actor: Actor) -> None:
        """``actor``'s draft of ``form`` moved: keep it where the next click finds it."""

    @abstractmethod
    async def drop_draft(self, key: K, actor: Actor, form: Form | None = None) -> None:
        """The person's answers were taken: their draft is done. ``form``: the form they
        were taken from, where it may have been forgotten since (its request decided and
        its card redrawn while the answers went to the agent)."""

    async def settled(self, key: K) -> Card | None:
        """After this process drew the form of message ``key``: the card as it must stay
        when its request was decided meanwhile elsewhere (then the form is forgotten), else
        None. In memory, the owner's own edit forgets the form: always None."""
        return None

    async def noted_prompt(self, interaction_id: str, actor: Actor) -> str | None:
        """``Draft.prompt`` of ``actor``'s draft for ``interaction_id`` where another host
        may have noted it (the ledger's; None in memory, where only this process prompts)."""
        return None

    def _drop_local(self, key: K, user_id: str) -> None:
        form = self._forms.get(key)
        if form is not None:
            form.drafts.pop(user_id, None)
            if form.viewer == user_id:
                form.viewer = None


class MemoryForms(PendingForms[K]):
    """Drafts in this process's memory: one host (a SQLite ledger), where every click of a
    card reaches the process that sent it. A restart orphans every pending request, so a
    lost draft could not have been submitted anyway."""

    async def get(self, key: K, actor: Actor, *, at: Place | None = None) -> Form | None:
        return self.peek(key)

    async def save(self, key: K, form: Form, actor: Actor) -> None:
        pass  # the draft was moved in place

    async def drop_draft(self, key: K, actor: Actor, form: Form | None = None) -> None:
        self._drop_local(key, actor.user_id)


class LedgerForms(PendingForms[K]):
    """Drafts in a ledger several hosts share (gateway/platform.py ``FormLedger``): each
    click reads the person's draft there and writes it back, so that their next click may
    reach any host; a host that did not send the card draws its form from the ledger's copy
    of it (one more read, once). Secret answers are sealed in the payload
    (:func:`encode_draft`)."""

    def __init__(
        self, ledger: FormLedger, *, on_forget: Callable[[K], None] = lambda key: None
    ) -> None:
        super().__init__(on_forget=on_forget)
        self._ledger = ledger

    async def get(self, key: K, actor: Actor, *, at: Place | None = None) -> Form | None:
        form = self.peek(key)
        if form is None:  # a card another host sent: drawn from the ledger's copy
            card = await self._ledger.card_at(*at) if at is not None else None
            form = self.new(at[0], card) if at is not None and card is not None else None
            if form is None:
                return None
            self.keep(key, form)
        interaction_id = self._ledger.interaction_of(form.submit_token)
        if interaction_id is None:
            return None
        # A form held here may be of a request decided through another host meanwhile. A
        # click is safe: the draft is then unreadable (read only while pending), and none is
        # started without the core's may_answer, which refuses it. Typed text (``at`` None:
        # the reply to a prompt) has no such gate, so the ledger is asked again.
        if at is None and await self._ledger.card_at(form.conversation, interaction_id) is None:
            self.forget(key)
            return None
        payload = await self._ledger.load_draft(interaction_id, actor.key())
        draft: Draft | None = None
        if payload is not None:
            try:
                draft = decode_draft(payload, self._ledger.sealer, interaction_id)
            except SealBroken:
                log.warning("a form draft of %s does not open here (hmac_key_file?)", actor)
        if draft is None:  # none in the ledger (never started, submitted, expired)
            self._drop_local(key, actor.user_id)
        else:
            form.drafts[actor.user_id] = draft
            form.drafts.move_to_end(actor.user_id)
            while len(form.drafts) > MAX_DRAFTS:
                form.drafts.popitem(last=False)
        return form

    async def settled(self, key: K) -> Card | None:
        form = self.peek(key)
        interaction_id = self._ledger.interaction_of(form.submit_token) if form else None
        if form is None or interaction_id is None:
            return None
        try:
            card = await self._ledger.card_now(form.conversation, interaction_id)
        except StoreError as exc:  # the click was taken: not worth failing it for this
            log.warning("a redrawn form's request not read again: %s", exc)
            return None
        if card is None or card.form is not None:
            return None  # still pending (or not found): the form as drawn stands
        self.forget(key)
        return card

    async def noted_prompt(self, interaction_id: str, actor: Actor) -> str | None:
        payload = await self._ledger.load_draft(interaction_id, actor.key())
        if payload is None:
            return None
        try:
            return decode_draft(payload, self._ledger.sealer, interaction_id).prompt
        except SealBroken:
            return None

    async def save(self, key: K, form: Form, actor: Actor) -> None:
        draft = form.drafts.get(actor.user_id)
        interaction_id = self._ledger.interaction_of(form.submit_token)
        if draft is None or interaction_id is None:
            return
        payload = encode_draft(draft, self._ledger.sealer, interaction_id)
        await self._ledger.save_draft(interaction_id, actor.key(), payload)

    async def drop_draft(self, key: K, actor: Actor, form: Form | None = None) -> None:
        form = form or self.peek(key)
        self._drop_local(key, actor.user_id)
        interaction_id = self._ledger.interaction_of(form.submit_token) if form else None
        if interaction_id is not None:
            await self._ledger.drop_draft(interaction_id, actor.key())


def forms_for(inbox: Inbox, on_forget: Callable[[K], None] = lambda key: None) -> PendingForms[K]:
    """The forms a platform attached to ``inbox`` keeps: in the ledger the gateway shares
    with other hosts, else in memory (chosen once, when the platform is attached)."""
    ledger = inbox.form_ledger() if isinstance(inbox, SharesForms) else None
    if ledger is None:
        return MemoryForms(on_forget=on_forget)
    return LedgerForms(ledger, on_forget=on_forget)


# --- a draft in the ledger (issue 19, design point 8) -----------------------------------------


def draft_context(interaction_id: str, actor: Actor) -> str:
    """What a draft's sealed secrets belong to: they open for this request and person only."""
    return f"draft:{interaction_id}:{actor.key()}"


def encode_draft(draft: Draft, sealer: TextSealer, interaction_id: str) -> str:
    """``draft`` as the ledger keeps it (store.form_drafts): JSON, secret answers sealed."""
    secret = {str(index): answer for index, answer in draft.secret.items()}
    actor = draft.actor
    return json.dumps(
        {
            "actor": [actor.platform, actor.user_id, actor.display],
            "step": draft.step,
            "chosen": {str(index): list(options) for index, options in draft.chosen.items()},
            "other": {str(index): text for index, text in draft.other.items()},
            "secret": (
                sealer.seal_text(draft_context(interaction_id, actor), encode_answers(secret))
                if secret
                else None
            ),
            "prompt": draft.prompt,
        },
        separators=(",", ":"),
    )


def decode_draft(payload: str, sealer: TextSealer, interaction_id: str) -> Draft:
    """The draft :func:`encode_draft` wrote; SealBroken when its secrets do not open here."""
    data = json.loads(payload)
    platform, user_id, display = data["actor"]
    actor = Actor(platform=platform, user_id=user_id, display=display)
    sealed = data["secret"]
    secret = (
        decode_answers(sealer.open_text(draft_context(interaction_id, actor), sealed))
        if sealed is not None
        else {}
    )
    return Draft(
        actor=actor,
        step=int(data["step"]),
        chosen={int(index): tuple(options) for index, options in data["chosen"].items()},
        other={int(index): text for index, text in data["other"].items()},
        secret={int(index): answer for index, answer in secret.items()},
        prompt=data.get("prompt"),
    )
