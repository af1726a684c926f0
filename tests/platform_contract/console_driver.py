"""The web console under the contract: real HTTP on 127.0.0.1 (a free port), its pages read
as a browser gets them and its forms posted as a browser posts them (CSRF token and Origin).

The console acts as one configured identity (``local:alice``, an approver); it is served
by the gateway's own process, so it has no connection to lose and nothing answers 429."""

from __future__ import annotations

import asyncio
import html
import io
import json
import re
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import aiohttp

from gateway.domain import InteractionRequest
from gateway.sessions.engine import Gateway
from platforms.console.config import ConsoleConfig
from platforms.console.platform import CONSOLE_LIMITS, ConsolePlatform
from platforms.registry import parse_config
from tests.console_harness import client, logged_in, origin
from tests.platform_contract.contract import (
    DEADLINE,
    Button,
    Case,
    Driver,
    FormAnswers,
    Seen,
    not_seen,
    policy_rules,
    requests_for,
)

__all__ = ["ConsoleDriver", "page_items"]

T = TypeVar("T")
_ITEM = re.compile(
    r'<div class="msg( mine)?(?: md)?(?: gateway)?" data-key="(t-[^"]+)"'
    r' data-version="(\d+)(?:-waiting)?">(?:<span class="who">agent-gateway</span>)?(.*?)</div>'
    r'|<article class="card [^"]*" id="(?:i-)?([^"]+)" data-key="[^"]*" data-version="(\d+)">'
    r"(.*?)</article>",
    re.DOTALL,
)
# a card that is no request's (a message whose files did not come): pressed at /m/<id>/act
_NOTICE = re.compile(r'<article class="card notice [^"]*" id="([^"]+)"')
_BUTTON = re.compile(r'<button type="submit" name="token"[^>]*value="([^"]*)">([^<]*)</button>')
_STATUS = re.compile(
    r'<p class="status">((?:[^<]|</?time[^>]*>)*)</p>'
    r"(?:<details class=\"hash\"><summary>Details</summary>([^<]*)</details>)?"
)
_FILE = re.compile(
    r"<details open><summary>([^<]*) \([\d,]+ lines?\)</summary><pre>(.*?)</pre></details>",
    re.DOTALL,
)
_TAG = re.compile(r"<(/?)(\w+)[^>]*>")
_INLINE = {"a", "b", "code", "i", "small", "span", "time", "button", "label", "input"}
_INLINE |= {"strong", "em", "s"}  # the agent's Markdown, drawn
_SUBMIT = re.compile(r'<input type="hidden" name="token" value="([^"]*)">')


def text_of(fragment: str) -> str:
    """What a browser shows of an HTML fragment; a <pre> block shown as a fenced block."""

    def tag(match: re.Match[str]) -> str:
        closing, name = match.group(1), match.group(2)
        if name == "pre":
            return "\n```" if closing else "```\n"
        return "" if name in _INLINE else "\n"

    lines = html.unescape(_TAG.sub(tag, fragment)).split("\n")
    return "\n".join(line for line in lines if line.strip()).strip()


def page_items(page: str, bodies: dict[str, str] | None = None) -> list[Seen]:
    """The texts and cards of a conversation page, in order (the person's own left out);
    each card's HTML into ``bodies``, by its key."""
    live = page.split('<div id="live" data-live>', 1)[-1]
    items = []
    for match in _ITEM.finditer(live):
        mine, key, version, body, interaction, card_version, card_body = match.groups()
        if key is not None:
            if not mine:
                items.append(Seen(key=key, text=text_of(body), edits=int(version) - 1))
            continue
        buttons = tuple(
            Button(label=html.unescape(label), token=html.unescape(token))
            for token, label in _BUTTON.findall(card_body)
        )
        status = _STATUS.search(card_body)
        if bodies is not None:
            bodies[interaction] = card_body
        items.append(
            Seen(
                key=interaction,
                text=text_of(card_body),
                card=True,
                status=html.unescape(re.sub(r"</?time[^>]*>", "", status.group(1)))
                if status
                else "",
                details=html.unescape(status.group(2) or "") if status else "",
                buttons=buttons,
                files=tuple(
                    (html.unescape(name), html.unescape(_TAG.sub("", content)))
                    for name, content in _FILE.findall(card_body)
                ),
                edits=int(card_version) - 1,
            )
        )
    return items


class ConsoleDriver(Driver):
    shown_as = {"alice": "alice"}
    name = "console"
    accounts = {"alice": "local:alice", "carol": "local:carol"}
    not_applicable = {
        Case.NON_APPROVER: "the console acts as one configured identity, an approver here",
        Case.SECOND_VOTE: "the console acts as one configured identity: no second person",
        Case.ESCALATION: "the console is one person's pages: no direct message, no channel",
        Case.STORM: "served by the gateway's own process: nothing answers 429",
        Case.OUTAGE: "served by the gateway's own process: no connection to lose",
        Case.DELETED: "the page shows the gateway's own record: nobody deletes a message",
        Case.FILES_KEPT: "the console keeps picked files in its process only (a spool it"
        " removes when it closes): a prompt held over a restart is refused for its files",
    }

    def __init__(self, tmp_path: Path) -> None:
        self.limits = CONSOLE_LIMITS
        super().__init__(requests_for(self.limits))
        self.work_dir = tmp_path / "work"
        self.work_dir.mkdir()
        self.config = parse_config(
            f"""
[gateway]
data_dir = {json.dumps(str(tmp_path / "data"))}
stop_grace_seconds = 5

[projects.demo]
work_dir = {json.dumps(str(tmp_path / "work"))}
agent = "codex-app-server"

[projects.demo.auth.local]
allow_from = ["alice"]
approvers = ["alice"]

[platforms.console]
identity = "local:alice"
{policy_rules(self.accounts, None)}""",
            "console-contract.toml",
        )
        self.session: str | None = None  # the conversation's session, once started
        self.refusals: list[str] = []  # what a form was told it was refused, in order
        self._bodies: dict[str, str] = {}  # each card's HTML as last read
        self._notices: set[str] = set()  # the keys of the cards that are no request's

    @asynccontextmanager
    async def running(self) -> AsyncIterator[Gateway]:
        settings = self.config.platforms.get("console", ConsoleConfig)
        assert settings is not None
        console = ConsolePlatform(settings, announce=io.StringIO(), limits=self.limits)
        platforms = {"console": console}
        async with (
            console,
            Gateway(self.config, platforms=platforms, launcher=self.launcher) as gateway,
            client() as http,
        ):
            self.console, self.http = console, http
            self.csrf = await logged_in(http, self)  # type: ignore[arg-type]
            yield gateway

    @property
    def gateway(self) -> Gateway:
        gateway = self.console.gateway
        assert gateway is not None
        return gateway

    async def _post(self, path: str, data: Any) -> dict[str, Any]:
        if isinstance(data, dict):
            data = [*data.items(), ("csrf", self.csrf)]
        else:
            data = [*data, ("csrf", self.csrf)]
        headers = origin(self)  # type: ignore[arg-type]
        async with self.http.post(self.console.url + path, data=data, headers=headers) as response:
            assert response.status == 200, await response.text()
            reply: dict[str, Any] = await response.json()
            return reply

    async def say(self, text: str, *, who: str = "alice") -> None:
        assert who == "alice", "the console acts as its one identity"
        if self.session is None:
            reply = await self._post("new", {"project": "demo", "text": text})
            assert reply["accepted"], reply
            self.session = reply["location"].rsplit("/", 1)[-1]
        else:
            reply = await self._post(f"s/{self.session}/say", {"text": text})
            assert reply["accepted"], reply

    async def say_with_files(
        self, text: str, files: Sequence[tuple[str, bytes]], *, who: str = "alice"
    ) -> None:
        """The message box's file picker: the files posted with the text, as multipart."""
        assert who == "alice", "the console acts as its one identity"
        form = aiohttp.FormData(quote_fields=False)  # names as a browser sends them
        form.add_field("csrf", self.csrf)
        form.add_field("text", text)
        for name, content in files:
            form.add_field("files", content, filename=name)
        if self.session is None:
            form.add_field("project", "demo")
        path = "new" if self.session is None else f"s/{self.session}/say"
        headers = origin(self)  # type: ignore[arg-type]
        async with self.http.post(self.console.url + path, data=form, headers=headers) as response:
            assert response.status == 200, await response.text()
            reply: dict[str, Any] = await response.json()
        if self.session is None and reply["accepted"]:
            self.session = reply["location"].rsplit("/", 1)[-1]
        elif not reply["accepted"]:  # said next to the form: what the person reads there
            self.refusals.append(str(reply["text"]))
            self.console.changes.bump()

    async def click(self, card: Seen, token: str, *, who: str = "alice") -> str:
        assert who == "alice", "the console acts as its one identity"
        where = "m" if card.key in self._notices else "i"
        reply = await self._post(f"{where}/{card.key}/act", {"token": token})
        return str(reply["text"])

    async def press_with_message(
        self, card: Seen, label: str, message: str, *, who: str = "alice"
    ) -> str:
        assert who == "alice", "the console acts as its one identity"
        assert 'name="message"' in self._bodies[card.key], "no message field on the card"
        data = {"token": card.button(label).token, "message": message}
        reply = await self._post(f"i/{card.key}/act", data)
        return str(reply["text"])

    async def answer_form(
        self, card: Seen, request: InteractionRequest, answers: FormAnswers, *, who: str = "alice"
    ) -> str:
        assert who == "alice", "the console acts as its one identity"
        body = self._bodies[card.key]
        [token] = _SUBMIT.findall(body)
        data = [("token", html.unescape(token))]
        for question in request.questions:
            inputs = re.findall(
                rf'name="q\.{re.escape(question.id)}" value="([^"]*)"> ([^<]*)', body
            )
            by_label = {html.unescape(label): html.unescape(value) for value, label in inputs}
            data += [
                (f"q.{question.id}", by_label[label])
                for label in answers.chosen.get(question.id, ())
            ]
            if question.id in answers.typed:
                assert f'name="o.{question.id}"' in body, f"no field for {question.id}"
                data.append((f"o.{question.id}", answers.typed[question.id]))
        reply = await self._post(f"i/{card.key}/form", data)
        return str(reply["text"])

    def lose_files(self) -> None:
        # each file kept from now on is removed from the spool as soon as it is kept, as a
        # restart removes a held prompt's (uploads.py), without the restart
        self.console.uploads = _Losing(self.console.uploads)  # type: ignore[assignment]

    async def seen(self) -> list[Seen]:
        refused = [Seen(key=f"refusal-{n}", text=t) for n, t in enumerate(self.refusals)]
        if self.session is None:
            return refused
        async with self.http.get(f"{self.console.url}s/{self.session}") as response:
            assert response.status == 200
            page = await response.text()
        self._notices.update(_NOTICE.findall(page))
        return [*refused, *page_items(page, self._bodies)]

    async def wait_for(
        self, probe: Callable[[list[Seen]], T | None], deadline: float = DEADLINE
    ) -> T:
        last: list[Seen] = []
        try:
            async with asyncio.timeout(deadline):
                while True:
                    count = self.console.changes.count
                    last = await self.seen()
                    found = probe(last)
                    if found is not None and found is not False:
                        return found
                    await self.console.changes.wait_past(count)
        except TimeoutError:
            raise not_seen(self.name, deadline, last) from None


class _Losing:
    """The console's spool that loses every file it keeps (see ConsoleDriver.lose_files)."""

    def __init__(self, uploads: Any) -> None:
        self._uploads = uploads

    def keep(self, name: str, data: Any) -> Any:
        attachment = self._uploads.keep(name, data)
        spool = self._uploads._spool
        if spool is not None:
            (spool / attachment.reference).unlink()
        return attachment

    def fetch(self, attachment: Any) -> Any:
        return self._uploads.fetch(attachment)  # the real one: "no longer has this file"

    def close(self) -> None:
        self._uploads.close()
