"""Files shared with the app on Slack reach the agent (issue 32), through the real slack-sdk
against the fake Slack, which serves each file at its ``url_private`` for the bot token with
``files:read`` and redirects anyone else to an HTML sign-in page, as Slack does."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.scripted_launcher import ScriptedLauncher
from tests.servers.fake_slack import SCOPES, FakeSlack
from tests.slack_harness import ALICE, on_slack, slack_config

pytestmark = pytest.mark.timeout(60)

PDF = b"%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n"
INBOX = Path(".agent-gateway/inbox")


async def echoed(fake: FakeSlack, channel: str) -> str:
    def find() -> str | None:
        return next((m.text for m in fake.messages(channel) if m.text.startswith("echo:")), None)

    return await fake.wait_for(find, 20)


async def test_a_pdf_shared_in_a_dm_lands_in_the_inbox_and_is_named_in_the_prompt(
    tmp_path: Path,
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    async with FakeSlack() as fake:
        dm = fake.dm(ALICE)
        config = slack_config(fake, tmp_path / "data", work_dir=work)
        async with on_slack(config, fake, ScriptedLauncher({})):
            await fake.say(ALICE, dm.id, "read the spec", files=[("spec.pdf", PDF)])
            echo = await echoed(fake, dm.id)
    saved = work / INBOX / "spec.pdf"
    assert saved.read_bytes() == PDF
    assert echo.startswith("echo: read the spec")
    assert f"spec.pdf (application/pdf, {len(PDF)} bytes): {saved}" in echo
    assert fake.file_downloads == ["F0SHARE0001"]


async def test_an_app_installed_without_files_read_is_told_to_reinstall(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    async with FakeSlack(scopes=SCOPES - {"files:read"}) as fake:
        dm = fake.dm(ALICE)
        config = slack_config(fake, tmp_path / "data", work_dir=work)
        async with on_slack(config, fake, ScriptedLauncher({})):
            await fake.say(ALICE, dm.id, "read the spec", files=[("spec.pdf", PDF)])
            told = await fake.wait_for(
                lambda: next((m.seen for m in fake.messages(dm.id) if "files:read" in m.seen), None)
            )
    assert "Reinstall it with the manifest" in told and "Your message waits" in told
    assert not any(m.text.startswith("echo:") for m in fake.messages(dm.id))
    assert sorted(p.name for p in (work / INBOX).iterdir()) == [".gitignore"]


async def test_a_sign_in_page_in_place_of_the_file_is_refused_never_saved(
    tmp_path: Path,
) -> None:
    """... and the message waits for its author's choice: "Try again", once the file is
    served, delivers it; the card then says so, its buttons gone."""
    work = tmp_path / "work"
    work.mkdir()
    async with FakeSlack() as fake:
        fake.sign_in_instead = True  # url_private answers Slack's redirect to its sign-in page
        dm = fake.dm(ALICE)
        config = slack_config(fake, tmp_path / "data", work_dir=work)
        async with on_slack(config, fake, ScriptedLauncher({})) as slack:
            await fake.say(ALICE, dm.id, "read the spec", files=[("spec.pdf", PDF)])
            card = await slack.card(dm.id, None, lambda m: "files:read" in m.seen)
            assert card.labels == ["Send without the file", "Try again", "Drop it"]
            assert "not sent to the agent" not in card.seen  # the title says it waits
            assert fake.file_downloads == ["F0SHARE0001"]  # asked once: a refusal is not retried
            assert sorted(p.name for p in (work / INBOX).iterdir()) == [".gitignore"]
            fake.sign_in_instead = False
            answer = await slack.click(ALICE, card, "Try again")
            echo = await echoed(fake, dm.id)
    assert answer.text == "🔁 Trying the file again."
    assert card.labels == [] and "trying the file again" in card.seen
    saved = work / INBOX / "spec.pdf"
    assert saved.read_bytes() == PDF
    assert f"spec.pdf (application/pdf, {len(PDF)} bytes): {saved}" in echo
