"""What people press and submit: a card's buttons, "Answer…" and its modal pages, the
modal that asks for a message (Keep planning), and presses of buttons a message no longer
carries (a screen not yet redrawn, forged data).

A click is deferred at once (Discord wants an answer within 3 s), handed to the core, and
the core's Ack sent as an ephemeral followup (its token is valid 15 minutes). A modal must
be the first answer, so "Answer…" and Keep planning ask ``may_answer`` first (a stranger gets
no form) and then open it. A modal shows no errors: a page with a missing answer is answered
ephemerally with what is missing and a button that opens it again, pre-filled from the
person's draft; a page with more to come, with "Next" (a modal cannot answer a modal).
Submits are taken by ``custom_id`` whether or not this process opened the modal.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable
from typing import Any

import discord
from discord import ui

from gateway.action_tokens import interaction_named
from gateway.domain import Actor, ConversationRef
from gateway.platform import InboundAction, InboundForm, Inbox
from platforms.discord.forms import answers_of, build_page, pages_of, read_page
from platforms.discord.inbound import actor_of, conversation_of
from platforms.discord.receive import modal_values, place_of, roles_of
from platforms.discord.render import CUSTOM_ID_MAX, CUSTOM_ID_PREFIX, MESSAGE_ID_PREFIX, clip
from platforms.discord.sending import CONTENT_MAX
from platforms.discord.widgets import (
    MESSAGE_INPUT,
    PAGE_PREFIX,
    PageButton,
    form_modal,
    message_modal,
)
from platforms.form_drafts import Form, PendingForms

__all__ = ["Clicks"]

log = logging.getLogger(__name__)

_STARTING = "The gateway is starting; try again."


def _choice(token: str) -> str:
    parts = token.split(":")
    return parts[2] if len(parts) == 5 else ""


def _who_where(interaction: discord.Interaction[Any]) -> tuple[Actor, ConversationRef]:
    user = interaction.user
    place = place_of(interaction.channel, interaction.guild_id)
    return actor_of(str(user.id), user.name, roles_of(user)), conversation_of(place)


class Clicks:
    """Button presses and modal submits to the gateway's inbox, answered ephemerally."""

    def __init__(
        self,
        *,
        inbox_now: Callable[[], Inbox | None],
        inbox: Callable[[], Awaitable[Inbox | None]],
        forms: Callable[[], PendingForms[str]],
    ) -> None:
        self._inbox_now = inbox_now  # None until attached, and once input stopped
        self._inbox = inbox  # the attached inbox, waited for; None once input stopped
        self._forms = forms  # the cards' forms by submit token, and their drafts

    async def on_button(self, interaction: discord.Interaction[Any], token: str) -> None:
        actor, where = _who_where(interaction)
        action = InboundAction(conversation=where, actor=actor, token=token)
        if _choice(token) == "s":  # "Answer…": a modal must be the first response
            await self.open_page(interaction, token, 0)
            return
        answerable = await self._defer(interaction, thinking=False)
        inbox = await self._inbox()
        if inbox is None:
            return
        ack = await inbox.on_action(action)  # decided even when it can no longer be answered
        if answerable:
            await self._followup(interaction, ack.text)

    async def on_unlisted_click(self, interaction: discord.Interaction[Any]) -> None:
        """A press of a button the message no longer carries (a screen not yet redrawn, or
        forged data): discord.py's DynamicItems only take buttons that are on the message,
        so it is taken here, and the core says what it means."""
        data: Any = interaction.data or {}
        custom = str(data.get("custom_id") or "")
        message = interaction.message
        listed = message is not None and any(
            getattr(child, "custom_id", None) == custom
            for row in message.components
            for child in getattr(row, "children", [])
        )
        if listed:
            return  # the DynamicItem takes it
        if custom.startswith(PAGE_PREFIX):
            page, _, token = custom[len(PAGE_PREFIX) :].partition(":")
            if page.isdigit() and token:
                await self.open_page(interaction, token, int(page))
        elif custom.startswith(MESSAGE_ID_PREFIX) and len(custom) <= CUSTOM_ID_MAX:
            await self.ask_message(interaction, custom[len(MESSAGE_ID_PREFIX) :])
        elif custom.startswith(CUSTOM_ID_PREFIX) and len(custom) <= CUSTOM_ID_MAX:
            await self.on_button(interaction, custom[len(CUSTOM_ID_PREFIX) :])

    async def ask_message(self, interaction: discord.Interaction[Any], token: str) -> None:
        """A button that takes a message (Keep planning): may they decide? Then a modal for
        the message, which must be the first response; its submit is the press."""
        actor, where = _who_where(interaction)
        action = InboundAction(conversation=where, actor=actor, token=token)
        inbox = self._inbox_now()
        if inbox is None:
            await interaction.response.send_message(_STARTING, ephemeral=True)
            return
        verdict = await inbox.may_answer(action)
        if not verdict.accepted:
            await interaction.response.send_message(verdict.text, ephemeral=True)
            return
        await interaction.response.send_modal(message_modal(token))

    async def open_page(self, interaction: discord.Interaction[Any], token: str, page: int) -> None:
        """May they answer? Then page ``page`` of the form's modal, pre-filled with what they
        gave before."""
        actor, where = _who_where(interaction)
        inbox = self._inbox_now()
        if inbox is None:
            await interaction.response.send_message(_STARTING, ephemeral=True)
            return
        verdict = await inbox.may_answer(
            InboundAction(conversation=where, actor=actor, token=token)
        )
        if not verdict.accepted:
            await interaction.response.send_message(verdict.text, ephemeral=True)
            return
        found = await self._form(token, actor, where)
        if found is None or found.card.form is None:
            await interaction.response.send_message(
                "This form is no longer open here.", ephemeral=True
            )
            return
        drawn = build_page(
            found.card.form, page, title=found.card.title, draft=found.drafts.get(actor.user_id)
        )
        await interaction.response.send_modal(form_modal(drawn, token))

    async def _form(self, token: str, actor: Actor, where: ConversationRef) -> Form | None:
        """The form whose submit token is ``token``, with ``actor``'s draft (found by the
        request the token names where this host did not send the card)."""
        named = interaction_named(token)
        if named is None:
            return None
        return await self._forms().get(token, actor, at=(where, named))

    async def on_modal(self, interaction: discord.Interaction[Any]) -> None:
        data: Any = interaction.data or {}
        custom = str(data.get("custom_id") or "")
        if custom.startswith(MESSAGE_ID_PREFIX):
            await self._on_message_modal(interaction, custom[len(MESSAGE_ID_PREFIX) :])
            return
        if not custom.startswith(CUSTOM_ID_PREFIX):
            return
        token = custom[len(CUSTOM_ID_PREFIX) :]
        actor, where = _who_where(interaction)
        values = modal_values(data)
        found = await self._form(token, actor, where)
        form = found.card.form if found is not None else None
        if found is None or form is None:  # no longer pending: the core says what became of it
            await self._defer(interaction, thinking=True)
            await self._hand_form(
                interaction,
                InboundForm(conversation=where, actor=actor, token=token, answers={}, private=True),
            )
            return
        card = found.card
        numbers = {
            int(key[1:].split(".")[0]) for key in values if re.fullmatch(r"q[0-9]+(\.other)?", key)
        }
        pages = pages_of(form)
        page_number = next((n for n, qs in enumerate(pages) if numbers & set(qs)), 0)
        page = build_page(form, page_number, title=card.title)
        draft = found.draft(actor)
        read = read_page(form, page, values, draft)
        if page_number + 1 < len(pages) or not read.complete:
            await self._forms().save(token, found, actor)  # where the next page finds it
        if not read.complete:
            lines = [*read.refused]
            lines += [f"“{name}” needs an answer." for name in read.missing]
            view = ui.View(timeout=None)
            view.add_item(PageButton(page_number, token, "Answer again"))
            await interaction.response.send_message("\n".join(lines), view=view, ephemeral=True)
            return
        if page_number + 1 < len(pages):
            view = ui.View(timeout=None)
            view.add_item(PageButton(page_number + 1, token, "Next"))
            await interaction.response.send_message(
                f"Page {page_number + 1} of {len(pages)} taken.", view=view, ephemeral=True
            )
            return
        await self._defer(interaction, thinking=True)
        answers = answers_of(form, draft)
        await self._forms().drop_draft(token, actor)
        await self._hand_form(
            interaction,
            InboundForm(
                conversation=where, actor=actor, token=token, answers=answers, private=True
            ),
        )

    async def _on_message_modal(self, interaction: discord.Interaction[Any], token: str) -> None:
        actor, where = _who_where(interaction)
        typed = modal_values(interaction.data or {}).get(MESSAGE_INPUT)
        message = typed.strip() if isinstance(typed, str) else ""
        answerable = await self._defer(interaction, thinking=True)
        inbox = await self._inbox()
        if inbox is None:
            return
        ack = await inbox.on_action(
            InboundAction(conversation=where, actor=actor, token=token, message=message or None)
        )
        if answerable:
            await self._followup(interaction, ack.text)

    async def _defer(self, interaction: discord.Interaction[Any], *, thinking: bool) -> bool:
        """Acknowledge at once; False when Discord no longer takes an answer (given again
        past its 3 s, or answered already): the click is still handed to the core, and the
        card's edit tells everyone what came of it."""
        try:
            await interaction.response.defer(ephemeral=True, thinking=thinking)
        except discord.HTTPException as exc:
            log.info("discord: interaction %s not answerable (%s)", interaction.id, exc.code)
            return False
        return True

    async def _hand_form(self, interaction: discord.Interaction[Any], form: InboundForm) -> None:
        inbox = await self._inbox()
        if inbox is None:
            return
        ack = await inbox.on_form(form)
        await self._followup(interaction, ack.text)

    async def _followup(self, interaction: discord.Interaction[Any], text: str) -> None:
        if not text:
            return
        try:
            await interaction.followup.send(clip(text, CONTENT_MAX), ephemeral=True)
        except discord.HTTPException as exc:  # past 15 minutes: the card tells everyone
            log.info("discord: followup not sent (%s)", exc.code)
