"""What Slack's Web API accepts, checked as Slack checks it (sans-IO).

The limits are Block Kit's documented ones (https://docs.slack.dev/reference/block-kit):
a message holds at most 50 blocks and a modal 100; a header's text is at most 150
characters, a section's 3000 (its fields 10, each 2000), a button's label 75, an option's 75
and its value 150; radio buttons and checkboxes offer at most 10 options, a select 100; a
modal's title, submit and close labels are at most 24 characters. ``action_id`` and
``block_id`` must be unique in one message or view. Lengths are counted on the string as
sent (after the sender escaped ``&<>``), as Slack counts them.

A message past these limits is refused with ``invalid_blocks``; a view with
``invalid_arguments`` (what ``views.open``/``views.update``/``views.push`` answer), each
with Slack's ``response_metadata.messages`` naming the JSON pointer of the fault. Message
``text`` longer than 40,000 characters is ``msg_too_long``.

Also here: Slack's request signature (v0 HMAC-SHA256 over ``v0:<timestamp>:<body>``) and
what a person sees of a message's blocks (:func:`seen_text`).
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterator, Mapping
from typing import Any

__all__ = [
    "MAX_MESSAGE_BLOCKS",
    "MAX_MODAL_BLOCKS",
    "MAX_TEXT",
    "SlackError",
    "buttons_of",
    "check_message",
    "check_view",
    "inputs_of",
    "seen_text",
    "sign",
    "text_of",
]

MAX_MESSAGE_BLOCKS = 50
MAX_MODAL_BLOCKS = 100
MAX_TEXT = 40_000  # chat.postMessage's text: past it, msg_too_long

_BLOCK_TYPES = frozenset(
    "section header divider context actions image input rich_text markdown file video"
    " context_actions table".split()
)
_MARKDOWN_OPTIONS = frozenset({"radio_buttons", "checkboxes"})  # the others: plain_text only
# an option's description: only in these (docs.slack.dev/reference/block-kit/composition-objects)
_DESCRIBED_OPTIONS = frozenset({"radio_buttons", "checkboxes", "overflow"})
_OPTION_LIMITS = {
    "radio_buttons": 10,
    "checkboxes": 10,
    "static_select": 100,
    "multi_static_select": 100,
    "overflow": 5,
}


class SlackError(Exception):
    """A Web API refusal: ``{"ok": false, "error": error}`` with HTTP ``status``.

    ``messages`` become ``response_metadata.messages`` (Slack's "[ERROR] ... [json-pointer:
    ...]" lines); ``headers`` go into the answer (``Retry-After`` for a 429).
    """

    def __init__(
        self,
        error: str,
        *,
        status: int = 200,
        messages: list[str] | None = None,
        headers: Mapping[str, str] | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(error if not messages else f"{error}: {'; '.join(messages)}")
        self.error = error
        self.status = status
        self.messages = messages or []
        self.headers = dict(headers or {})
        self.extra = dict(extra or {})  # more fields of the answer (missing_scope's needed)

    def body(self) -> dict[str, Any]:
        body: dict[str, Any] = {"ok": False, "error": self.error, **self.extra}
        if self.messages:
            body["response_metadata"] = {"messages": self.messages}
        return body


# --- signing -------------------------------------------------------------------------------


def sign(secret: str, timestamp: str, body: str) -> str:
    """The ``X-Slack-Signature`` of ``body`` sent at ``timestamp`` (Slack's v0 scheme)."""
    base = f"v0:{timestamp}:{body}".encode()
    return "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()


# --- block checks --------------------------------------------------------------------------


class _Faults:
    """The faults found in one message or view, as Slack words them."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.action_ids: set[str] = set()
        self.block_ids: set[str] = set()

    def add(self, message: str, pointer: str) -> None:
        self.lines.append(f"[ERROR] {message} [json-pointer:{pointer}]")

    def at_most(self, value: Any, limit: int, pointer: str, what: str = "characters") -> None:
        if isinstance(value, str | list) and len(value) > limit:
            self.add(f"must be less than {limit + 1} {what}", pointer)


def check_message(blocks: Any, text: Any) -> None:
    """Refuse a message Slack would refuse (``invalid_blocks``, ``msg_too_long``, ``no_text``)."""
    if isinstance(text, str) and len(text) > MAX_TEXT:
        raise SlackError("msg_too_long")
    if blocks is None or blocks == []:
        if not text:
            raise SlackError("no_text")
        return
    faults = _Faults()
    _check_blocks(blocks, MAX_MESSAGE_BLOCKS, "/blocks", faults, modal=False)
    if faults.lines:
        raise SlackError("invalid_blocks", messages=faults.lines)


def check_view(view: Any) -> None:
    """Refuse a modal Slack would refuse (``invalid_arguments`` with the faults)."""
    faults = _Faults()
    if not isinstance(view, dict):
        raise SlackError("invalid_arguments", messages=["[ERROR] view must be an object"])
    if view.get("type") != "modal":
        faults.add("must be modal", "/view/type")
    for key in ("title", "submit", "close"):
        label = view.get(key)
        if label is None:
            if key == "title":
                faults.add("missing required field: title", "/view")
            continue
        _text(label, 24, f"/view/{key}", faults, plain=True)
    faults.at_most(view.get("private_metadata"), 3000, "/view/private_metadata")
    faults.at_most(view.get("callback_id"), 255, "/view/callback_id")
    faults.at_most(view.get("external_id"), 255, "/view/external_id")
    blocks = view.get("blocks")
    if not isinstance(blocks, list):
        faults.add("missing required field: blocks", "/view")
    else:
        _check_blocks(blocks, MAX_MODAL_BLOCKS, "/view/blocks", faults, modal=True)
        if any(isinstance(b, dict) and b.get("type") == "input" for b in blocks):
            if view.get("submit") is None:
                faults.add("must provide submit when input blocks are present", "/view")
    if faults.lines:
        raise SlackError("invalid_arguments", messages=faults.lines)


def _check_blocks(blocks: Any, limit: int, at: str, faults: _Faults, *, modal: bool) -> None:
    if not isinstance(blocks, list):
        faults.add("must be an array", at)
        return
    faults.at_most(blocks, limit, at, "items")
    for i, block in enumerate(blocks):
        _check_block(block, f"{at}/{i}", faults)


def _check_block(block: Any, at: str, faults: _Faults) -> None:
    if not isinstance(block, dict):
        faults.add("must be an object", at)
        return
    kind = block.get("type")
    if kind not in _BLOCK_TYPES:
        faults.add(f"unsupported type: {kind}", f"{at}/type")
        return
    block_id = block.get("block_id")
    if block_id is not None:
        faults.at_most(block_id, 255, f"{at}/block_id")
        if block_id in faults.block_ids:
            faults.add(f"duplicate block_id: {block_id}", f"{at}/block_id")
        faults.block_ids.add(block_id)
    if kind == "header":
        _text(block.get("text"), 150, f"{at}/text", faults, plain=True)
    elif kind == "section":
        if block.get("text") is None and block.get("fields") is None:
            faults.add("must provide text or fields", at)
        if block.get("text") is not None:
            _text(block["text"], 3000, f"{at}/text", faults)
        fields = block.get("fields")
        if fields is not None:
            faults.at_most(fields, 10, f"{at}/fields", "items")
            for j, field in enumerate(fields if isinstance(fields, list) else []):
                _text(field, 2000, f"{at}/fields/{j}", faults)
        if block.get("accessory") is not None:
            _element(block["accessory"], f"{at}/accessory", faults)
    elif kind == "context":
        elements = block.get("elements")
        if not isinstance(elements, list) or not elements:
            faults.add("must provide elements", f"{at}/elements")
        else:
            faults.at_most(elements, 10, f"{at}/elements", "items")
            for j, element in enumerate(elements):
                if isinstance(element, dict) and element.get("type") in ("plain_text", "mrkdwn"):
                    _text(element, 3000, f"{at}/elements/{j}", faults)
    elif kind == "actions":
        elements = block.get("elements")
        if not isinstance(elements, list) or not elements:
            faults.add("must provide elements", f"{at}/elements")
        else:
            faults.at_most(elements, 25, f"{at}/elements", "items")
            for j, element in enumerate(elements):
                _element(element, f"{at}/elements/{j}", faults)
    elif kind == "input":
        _text(block.get("label"), 2000, f"{at}/label", faults, plain=True)
        if block.get("hint") is not None:
            _text(block["hint"], 2000, f"{at}/hint", faults, plain=True)
        _element(block.get("element"), f"{at}/element", faults)
    elif kind == "markdown":
        faults.at_most(block.get("text"), 12_000, f"{at}/text")
    elif kind == "image":
        faults.at_most(block.get("alt_text"), 2000, f"{at}/alt_text")


def _text(obj: Any, limit: int, at: str, faults: _Faults, *, plain: bool = False) -> None:
    if not isinstance(obj, dict) or obj.get("type") not in ("plain_text", "mrkdwn"):
        faults.add("must be a text object", at)
        return
    if plain and obj["type"] != "plain_text":
        faults.add("must be plain_text", f"{at}/type")
    text = obj.get("text")
    if not isinstance(text, str) or not text:
        faults.add("must be more than 0 characters", f"{at}/text")
        return
    faults.at_most(text, limit, f"{at}/text")


def _element(element: Any, at: str, faults: _Faults) -> None:
    if not isinstance(element, dict) or not isinstance(element.get("type"), str):
        faults.add("must be an element object", at)
        return
    kind = element["type"]
    action_id = element.get("action_id")
    if action_id is not None:
        faults.at_most(action_id, 255, f"{at}/action_id")
        if action_id in faults.action_ids:
            faults.add(f"duplicate action_id: {action_id}", f"{at}/action_id")
        faults.action_ids.add(action_id)
    if kind == "button":
        _text(element.get("text"), 75, f"{at}/text", faults, plain=True)
        faults.at_most(element.get("value"), 2000, f"{at}/value")
        faults.at_most(element.get("url"), 3000, f"{at}/url")
        style = element.get("style")
        if style is not None and style not in ("primary", "danger"):
            faults.add("must be primary or danger", f"{at}/style")
    if element.get("confirm") is not None:
        confirm = element["confirm"]
        at_c = f"{at}/confirm"
        if not isinstance(confirm, dict):
            faults.add("must be an object", at_c)
        else:
            _text(confirm.get("title"), 100, f"{at_c}/title", faults, plain=True)
            _text(confirm.get("text"), 300, f"{at_c}/text", faults)
            _text(confirm.get("confirm"), 30, f"{at_c}/confirm", faults, plain=True)
            _text(confirm.get("deny"), 30, f"{at_c}/deny", faults, plain=True)
    if element.get("placeholder") is not None:
        _text(element["placeholder"], 150, f"{at}/placeholder", faults, plain=True)
    if kind == "plain_text_input":
        for key in ("max_length", "min_length"):
            value = element.get(key)
            if isinstance(value, int) and not 0 <= value <= 3000:
                faults.add("must be between 0 and 3000", f"{at}/{key}")
    if kind in _OPTION_LIMITS:
        options = element.get("options")
        groups = element.get("option_groups")
        if options is None and groups is None:
            faults.add("must provide options", at)
            return
        if options is not None:
            faults.at_most(options, _OPTION_LIMITS[kind], f"{at}/options", "items")
            _options(options, f"{at}/options", faults, plain=kind not in _MARKDOWN_OPTIONS)
            described = [o for o in options if isinstance(o, dict) and "description" in o]
            if described and kind not in _DESCRIBED_OPTIONS:
                faults.add(f"an option of a {kind} has no description", f"{at}/options")
        if groups is not None:
            faults.at_most(groups, 100, f"{at}/option_groups", "items")


def _options(options: Any, at: str, faults: _Faults, *, plain: bool) -> None:
    if not isinstance(options, list) or not options:
        faults.add("must provide at least 1 option", at)
        return
    values: set[str] = set()
    for k, option in enumerate(options):
        if not isinstance(option, dict):
            faults.add("must be an option object", f"{at}/{k}")
            continue
        _text(option.get("text"), 75, f"{at}/{k}/text", faults, plain=plain)
        if option.get("description") is not None:
            _text(option["description"], 75, f"{at}/{k}/description", faults, plain=plain)
        value = option.get("value")
        if not isinstance(value, str) or not value:
            faults.add("must be more than 0 characters", f"{at}/{k}/value")
            continue
        faults.at_most(value, 150, f"{at}/{k}/value")
        if value in values:
            faults.add(f"duplicate option value: {value}", f"{at}/{k}/value")
        values.add(value)


# --- what a person sees --------------------------------------------------------------------


def text_of(obj: Any) -> str:
    """The text of a text object (or '')."""
    if isinstance(obj, dict) and isinstance(obj.get("text"), str):
        return str(obj["text"])
    return ""


def _elements(blocks: list[dict[str, Any]]) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """(block, element) for every interactive element, in reading order."""
    for block in blocks:
        if block.get("type") == "actions":
            for element in block.get("elements") or []:
                yield block, element
        elif block.get("type") == "section" and isinstance(block.get("accessory"), dict):
            yield block, block["accessory"]
        elif block.get("type") == "input" and isinstance(block.get("element"), dict):
            yield block, block["element"]


def buttons_of(blocks: list[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(block, button) for every button, in reading order."""
    return [(b, e) for b, e in _elements(blocks) if e.get("type") == "button"]


def inputs_of(blocks: list[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(input block, its element) of a modal, in reading order."""
    return [(b, e) for b, e in _elements(blocks) if b.get("type") == "input"]


def seen_text(text: str, blocks: list[dict[str, Any]]) -> str:
    """What a person reads: the blocks' texts one per line (``text`` alone without blocks).

    Buttons read as ``[label]``; Slack shows ``text`` only in notifications once blocks
    exist, so it is left out then.
    """
    if not blocks:
        return text
    lines: list[str] = []
    for block in blocks:
        kind = block.get("type")
        if kind in ("header", "section"):
            if block.get("text") is not None:
                lines.append(text_of(block["text"]))
            lines.extend(text_of(f) for f in block.get("fields") or [])
            accessory = block.get("accessory")
            if isinstance(accessory, dict) and accessory.get("type") == "button":
                lines.append(f"[{text_of(accessory.get('text'))}]")
        elif kind == "context":
            lines.append(" ".join(text_of(e) for e in block.get("elements") or []))
        elif kind == "actions":
            labels = [
                f"[{text_of(e.get('text'))}]"
                for e in block.get("elements") or []
                if e.get("type") == "button"
            ]
            if labels:
                lines.append(" ".join(labels))
        elif kind == "markdown":
            lines.append(str(block.get("text", "")))
        elif kind == "input":
            lines.append(text_of(block.get("label")))
        elif kind == "rich_text":
            lines.append(_rich_text(block))
    return "\n".join(lines)


def _rich_text(block: dict[str, Any]) -> str:
    out: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("type") == "text":
                out.append(str(node.get("text", "")))
            elif node.get("type") == "user":
                out.append(f"<@{node.get('user_id')}>")
            for child in node.get("elements") or []:
                walk(child)

    walk(block)
    return "".join(out)
