"""Pictures and files sent to the bot on Telegram reach the agent (issue 32), through the real
python-telegram-bot against the fake Bot API, which serves getFile and the file download at
its own file URL with the cloud's 20 MB limit."""

from __future__ import annotations

import base64
import logging
from pathlib import Path

import pytest

from tests.codex_env import CodexHome
from tests.scripted_launcher import ScriptedLauncher
from tests.servers.fake_responses import FakeResponses, message
from tests.servers.fake_telegram import FILE_MAX_BYTES, TOKEN, FakeTelegram
from tests.servers.telegram_people import (
    document_update,
    photo_update,
    private_chat,
    video_update,
)
from tests.telegram_harness import ALICE, OnTelegram, on_telegram, telegram_config

pytestmark = pytest.mark.timeout(120)

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)
PDF = b"%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n"
INBOX = Path(".agent-gateway/inbox")


async def send(tg: OnTelegram, update: dict[str, object]) -> None:
    await tg.fake.push(update)


def user_images(request_input: list[dict[str, object]]) -> list[bytes]:
    found = []
    for item in request_input:
        if item.get("type") != "message" or item.get("role") != "user":
            continue
        for part in item.get("content") or []:  # type: ignore[attr-defined]
            if part.get("type") == "input_image":
                found.append(base64.b64decode(part["image_url"].split(",", 1)[1]))
    return found


@pytest.mark.real_agent("codex")
async def test_a_photo_with_a_caption_reaches_codex_as_an_input_image(
    codex_bin: str,
    codex_home: CodexHome,
    fake_model: FakeResponses,
    fake_telegram: FakeTelegram,
    tmp_path: Path,
) -> None:
    fake_model.enqueue((message("A red dot."),), (message("Read it."),))
    config = telegram_config(
        fake_telegram,
        tmp_path / "data",
        work_dir=codex_home.workspace,
        codex_bin=codex_bin,
        home=codex_home,
    )
    chat = private_chat(ALICE)
    async with on_telegram(config, fake_telegram) as tg:
        await send(tg, photo_update(fake_telegram, chat, ALICE, PNG, caption="why is this broken?"))
        await tg.bot_message(ALICE.id, lambda m: "A red dot." in m.text)
        await send(
            tg,
            document_update(
                fake_telegram, chat, ALICE, PDF, "spec.pdf", mime_type="application/pdf"
            ),
        )
        await tg.bot_message(ALICE.id, lambda m: "Read it." in m.text)
    first, second = fake_model.model_requests()
    assert user_images(first.input) == [PNG]  # the largest size, byte for byte
    assert any("why is this broken?" in t for t in first.user_texts())
    saved = codex_home.workspace / INBOX / "spec.pdf"
    assert saved.read_bytes() == PDF
    [named] = [t for t in second.user_texts() if "spec.pdf" in t]
    assert f"- spec.pdf (application/pdf, {len(PDF)} bytes): {saved}" in named


async def test_a_download_cut_midway_is_fetched_again_and_no_log_holds_the_token(
    fake_telegram: FakeTelegram, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    work = tmp_path / "work"
    work.mkdir()
    log = b"line of the build\n" * 60_000  # about 1 MB: cut after a third
    config = telegram_config(fake_telegram, tmp_path / "data", work_dir=work)
    fake_telegram.file_cuts = 1
    async with on_telegram(config, fake_telegram, ScriptedLauncher({})) as tg:
        await send(tg, document_update(fake_telegram, private_chat(ALICE), ALICE, log, "b.log"))
        echo = await tg.bot_message(ALICE.id, lambda m: m.text.startswith("echo:"))
    assert (work / INBOX / "b.log").read_bytes() == log
    assert f"(text/plain, {len(log)} bytes): {work / INBOX / 'b.log'}" in echo.text
    assert len(fake_telegram.downloads) == 2
    ours = [r for r in caplog.records if r.name.startswith(("gateway", "platforms"))]
    assert any("try 1 of 3 failed" in r.getMessage() for r in ours)  # the cut was logged...
    assert not any(TOKEN in r.getMessage() for r in ours)  # ...without the file's URL
    assert sorted(p.name for p in (work / INBOX).iterdir()) == [".gitignore", "b.log"]


async def test_a_file_over_telegrams_20_mb_is_refused_with_the_reason(
    fake_telegram: FakeTelegram, tmp_path: Path
) -> None:
    """A project that takes more (for a self-hosted Bot API server) still meets the cloud's
    limit: getFile says "file is too big", and the person is told, nothing saved."""
    work = tmp_path / "work"
    work.mkdir()
    config = telegram_config(
        fake_telegram,
        tmp_path / "data",
        work_dir=work,
        policy="[projects.demo.files]\nmax_file_bytes = 52428800\nmax_prompt_bytes = 52428800",
    )
    big = b"\0" * (FILE_MAX_BYTES + 1)
    async with on_telegram(config, fake_telegram, ScriptedLauncher({})) as tg:
        await send(
            tg,
            document_update(
                fake_telegram, private_chat(ALICE), ALICE, big, "dump.bin", caption="look"
            ),
        )
        told = await tg.bot_message(ALICE.id, lambda m: "dump.bin" in m.text)
    assert "up to 20 MB" in told.text and "Your message waits" in told.text
    # asking Telegram again cannot help: no "Try again"
    assert [b["text"] for b in told.buttons] == ["Send without the file", "Drop it"]
    assert not any(t.startswith("echo:") for t in tg.texts(ALICE.id))
    assert fake_telegram.downloads == []
    assert sorted(p.name for p in (work / INBOX).iterdir()) == [".gitignore"]


async def test_a_file_declared_over_the_projects_limit_is_refused_before_it_is_queued(
    fake_telegram: FakeTelegram, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    config = telegram_config(fake_telegram, tmp_path / "data", work_dir=work)
    async with on_telegram(config, fake_telegram, ScriptedLauncher({})) as tg:
        update = document_update(
            fake_telegram,
            private_chat(ALICE),
            ALICE,
            b"small really",
            "video.mp4",
            declared_size=25 * 1024 * 1024,
        )
        await send(tg, update)
        told = await tg.card(ALICE.id, lambda m: "video.mp4" in m.text)
        assert [b["text"] for b in told.buttons] == ["Send without the file", "Drop it"]
        await tg.press(ALICE, told, "Send without the file")  # the message kept: issue 32
        echo = await tg.bot_message(ALICE.id, lambda m: m.text.startswith("echo:"))
    assert "(25 MB) is larger than this project takes for one file (20 MB)" in told.text
    assert "refused or could not be downloaded: video.mp4." in echo.text
    assert fake_telegram.calls_to("getFile") == []


@pytest.mark.real_agent("codex")
async def test_an_album_is_one_prompt_its_caption_from_any_part_its_pictures_in_order(
    codex_bin: str,
    codex_home: CodexHome,
    fake_model: FakeResponses,
    fake_telegram: FakeTelegram,
    tmp_path: Path,
) -> None:
    fake_model.enqueue((message("Two dots."),))
    config = telegram_config(
        fake_telegram,
        tmp_path / "data",
        work_dir=codex_home.workspace,
        codex_bin=codex_bin,
        home=codex_home,
    )
    chat = private_chat(ALICE)
    second = PNG[:-12] + PNG[-12:]  # the same picture, sent twice: two files all the same
    async with on_telegram(config, fake_telegram) as tg:
        await send(tg, photo_update(fake_telegram, chat, ALICE, PNG, media_group_id="g1"))
        await send(
            tg,
            photo_update(
                fake_telegram, chat, ALICE, second, caption="compare these", media_group_id="g1"
            ),
        )
        await tg.bot_message(ALICE.id, lambda m: "Two dots." in m.text)
    [request] = fake_model.model_requests()  # one prompt, one turn
    assert user_images(request.input) == [PNG, second]
    assert any("compare these" in t for t in request.user_texts())
    saved = sorted(p.name for p in (codex_home.workspace / INBOX).iterdir())
    assert len(saved) == 3 and saved[0] == ".gitignore"  # two photos, distinct names


async def test_a_video_without_a_name_is_saved_under_one_and_named_in_the_prompt(
    fake_telegram: FakeTelegram, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    clip = b"\x00\x00\x00\x18ftypmp42" + b"\x00" * 64  # an MP4's start
    config = telegram_config(fake_telegram, tmp_path / "data", work_dir=work)
    async with on_telegram(config, fake_telegram, ScriptedLauncher({})) as tg:
        await send(
            tg, video_update(fake_telegram, private_chat(ALICE), ALICE, clip, caption="why?")
        )
        echo = await tg.bot_message(ALICE.id, lambda m: m.text.startswith("echo: why?"))
    [saved] = [p for p in (work / INBOX).iterdir() if p.name.startswith("video-")]
    assert saved.read_bytes() == clip
    assert f"{saved.name} (video/mp4, {len(clip)} bytes): {saved}" in echo.text
