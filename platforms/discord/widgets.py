"""What discord.py draws for the gateway: a card's buttons, its view and whom it may ping,
the form's modal pages and the modal that asks for a message (Keep planning).

Buttons are ``ui.DynamicItem``s registered in the client's ``setup_hook``: discord.py
matches a click's ``custom_id`` against their templates whatever process sent the card, so a
click on a card sent before a restart still reaches the gateway. A click goes to the client's
``clicks`` (:class:`TakesClicks`: platforms/discord/clicks.py), which decides what it means.
"""

from __future__ import annotations

import re
from typing import Any, Protocol, runtime_checkable

import discord
from discord import ui

from platforms.discord.forms import Page
from platforms.discord.render import CUSTOM_ID_PREFIX, MESSAGE_ID_PREFIX, RenderedCard

__all__ = [
    "MESSAGE_INPUT",
    "MESSAGE_MAX",
    "PAGE_PREFIX",
    "CardButton",
    "MessageButton",
    "PageButton",
    "TakesClicks",
    "allowed_mentions",
    "card_view",
    "form_modal",
    "message_modal",
]

PAGE_PREFIX = "agwp:"  # "Next" / "Answer again" buttons: agwp:<page>:<token>
MESSAGE_INPUT = "message"  # the message modal's one text input
MESSAGE_MAX = 4000  # a paragraph text input's most


@runtime_checkable
class TakesClicks(Protocol):
    """What a button's press is handed to (the client's ``clicks``)."""

    async def on_button(self, interaction: discord.Interaction[Any], token: str) -> None: ...

    async def ask_message(self, interaction: discord.Interaction[Any], token: str) -> None: ...

    async def open_page(
        self, interaction: discord.Interaction[Any], token: str, page: int
    ) -> None: ...


def _clicks_of(interaction: discord.Interaction[Any]) -> TakesClicks | None:
    clicks = getattr(interaction.client, "clicks", None)
    return clicks if isinstance(clicks, TakesClicks) else None


class CardButton(ui.DynamicItem[ui.Button[Any]], template=r"agw:(?P<token>[A-Za-z0-9:_.-]{1,96})"):
    """A card's button, whatever process sent it: ``agw:<token>``."""

    def __init__(self, token: str, label: str = "…", style: int = 2) -> None:
        super().__init__(
            ui.Button(
                label=label, style=discord.ButtonStyle(style), custom_id=CUSTOM_ID_PREFIX + token
            )
        )
        self.token = token

    @classmethod
    async def from_custom_id(
        cls, interaction: discord.Interaction[Any], item: ui.Item[Any], match: re.Match[str], /
    ) -> CardButton:
        return cls(match["token"])

    async def callback(self, interaction: discord.Interaction[Any]) -> None:
        clicks = _clicks_of(interaction)
        if clicks is not None:
            await clicks.on_button(interaction, self.token)


class MessageButton(
    ui.DynamicItem[ui.Button[Any]], template=r"agwm:(?P<token>[A-Za-z0-9:_.-]{1,95})"
):
    """A button that asks for a message first (Keep planning), whatever process sent it:
    ``agwm:<token>``; pressed, it opens the modal for the message."""

    def __init__(self, token: str, label: str = "…", style: int = 2) -> None:
        super().__init__(
            ui.Button(
                label=label, style=discord.ButtonStyle(style), custom_id=MESSAGE_ID_PREFIX + token
            )
        )
        self.token = token

    @classmethod
    async def from_custom_id(
        cls, interaction: discord.Interaction[Any], item: ui.Item[Any], match: re.Match[str], /
    ) -> MessageButton:
        return cls(match["token"])

    async def callback(self, interaction: discord.Interaction[Any]) -> None:
        clicks = _clicks_of(interaction)
        if clicks is not None:
            await clicks.ask_message(interaction, self.token)


class PageButton(
    ui.DynamicItem[ui.Button[Any]],
    template=r"agwp:(?P<page>[0-9]{1,2}):(?P<token>[A-Za-z0-9:_.-]{1,90})",
):
    """ "Next" or "Answer again" under a modal's page: opens page ``page`` of the form."""

    def __init__(self, page: int, token: str, label: str = "Next") -> None:
        super().__init__(
            ui.Button(
                label=label,
                style=discord.ButtonStyle.primary,
                custom_id=f"{PAGE_PREFIX}{page}:{token}",
            )
        )
        self.page, self.token = page, token

    @classmethod
    async def from_custom_id(
        cls, interaction: discord.Interaction[Any], item: ui.Item[Any], match: re.Match[str], /
    ) -> PageButton:
        return cls(int(match["page"]), match["token"])

    async def callback(self, interaction: discord.Interaction[Any]) -> None:
        clicks = _clicks_of(interaction)
        if clicks is not None:
            await clicks.open_page(interaction, self.token, self.page)


def allowed_mentions(drawn: RenderedCard) -> discord.AllowedMentions:
    """Whom a new card may ping: its approvers (users, roles), nobody else."""
    allowed = drawn.allowed_mentions
    users = [discord.Object(id=int(u)) for u in allowed.get("users", [])]
    roles = [discord.Object(id=int(r)) for r in allowed.get("roles", [])]
    return discord.AllowedMentions(
        everyone=False, users=users or False, roles=roles or False, replied_user=False
    )


def card_view(drawn: RenderedCard) -> ui.View | None:
    """The card's action rows as a view of DynamicItems (None: no buttons)."""
    if not drawn.components:
        return None
    view = ui.View(timeout=None)
    for row_number, row in enumerate(drawn.components):
        for button in row["components"]:
            custom: str = button["custom_id"]
            item: ui.DynamicItem[ui.Button[Any]]
            if custom.startswith(MESSAGE_ID_PREFIX):
                token = custom[len(MESSAGE_ID_PREFIX) :]
                item = MessageButton(token, button["label"], button["style"])
            else:
                item = CardButton(custom[len(CUSTOM_ID_PREFIX) :], button["label"], button["style"])
            item.row = row_number
            view.add_item(item)
    return view


def message_modal(token: str) -> ui.Modal:
    """The modal that asks what should change (its submit is the press of ``token``)."""
    modal = ui.Modal(title="What should change?", custom_id=MESSAGE_ID_PREFIX + token, timeout=None)
    text: ui.TextInput[Any] = ui.TextInput(
        custom_id=MESSAGE_INPUT,
        style=discord.TextStyle.paragraph,
        required=False,
        placeholder="What should the agent change?",
        max_length=MESSAGE_MAX,
    )
    modal.add_item(ui.Label(text="Your message (optional)", description=None, component=text))
    return modal


def form_modal(page: Page, token: str) -> ui.Modal:
    """One page of a question form (platforms/discord/forms.py ``build_page``) as a modal
    whose ``custom_id`` is ``"agw:"`` + the submit token."""
    modal = ui.Modal(title=page.title, custom_id=CUSTOM_ID_PREFIX + token, timeout=None)
    for item in page.inputs:
        if item.kind == "display":
            modal.add_item(ui.TextDisplay(item.text))
            continue
        component: ui.Item[Any]
        if item.kind == "text":
            component = ui.TextInput(
                custom_id=item.custom_id,
                style=discord.TextStyle.paragraph if item.paragraph else discord.TextStyle.short,
                required=item.required,
                default=item.value or None,
                placeholder=item.placeholder or None,
                max_length=item.max_length,
            )
        elif item.kind == "radio":
            component = ui.RadioGroup(
                custom_id=item.custom_id,
                required=item.required,
                options=[
                    discord.RadioGroupOption(
                        label=label,
                        value=value,
                        description=about or None,
                        default=value in item.defaults,
                    )
                    for label, value, about in item.options
                ],
            )
        elif item.kind == "checkbox":
            component = ui.CheckboxGroup(
                custom_id=item.custom_id,
                required=item.required,
                min_values=item.min_values,
                max_values=item.max_values,
                options=[
                    discord.CheckboxGroupOption(
                        label=label,
                        value=value,
                        description=about or None,
                        default=value in item.defaults,
                    )
                    for label, value, about in item.options
                ],
            )
        else:
            component = ui.Select(
                custom_id=item.custom_id,
                required=item.required,
                min_values=item.min_values,
                max_values=item.max_values,
                options=[
                    discord.SelectOption(
                        label=label,
                        value=value,
                        description=about or None,
                        default=value in item.defaults,
                    )
                    for label, value, about in item.options
                ],
            )
        modal.add_item(
            ui.Label(text=item.label, description=item.description or None, component=component)
        )
    return modal
