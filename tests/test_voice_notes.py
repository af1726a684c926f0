"""Voice notes (issue 34): a Telegram voice note is fetched like any file, sent to the
transcription service (a fake OpenAI-compatible endpoint on loopback), the transcript shown
back as a reply to the note, and queued as the prompt; with a card waiting, a spoken
"approve" (or "/approve ID") is words for the agent and decides nothing. No transcription
configured: said once per conversation. A failed or too long note: said, nothing sent."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from adapters.transcription import CommandTranscriber, HttpTranscriber
from gateway.config.model import TranscriptionConfig
from gateway.sessions.voice_notes import NOT_CONFIGURED, NOTHING_TO_TRANSCRIBE
from gateway.transcription import TranscriptionFailed
from tests.codex_env import CodexHome
from tests.platform_contract.discord_driver import DiscordDriver
from tests.scripted_gateway import REQUESTS
from tests.scripted_launcher import ScriptedLauncher
from tests.servers.fake_discord import ALICE as DISCORD_ALICE
from tests.servers.fake_discord import FakeDiscord
from tests.servers.fake_responses import FakeResponses, message
from tests.servers.fake_slack import FakeSlack
from tests.servers.fake_telegram import FakeTelegram
from tests.servers.fake_transcription import FakeTranscription
from tests.servers.telegram_people import message_update, private_chat, voice_update
from tests.slack_harness import ALICE as SLACK_ALICE
from tests.slack_harness import on_slack, slack_config
from tests.telegram_harness import ALICE, OnTelegram, on_telegram, telegram_config

pytestmark = pytest.mark.timeout(120)

OGG = b"OggS\x00\x02" + bytes(range(200))  # the start of an Ogg stream: sniffed as audio
INBOX = Path(".agent-gateway/inbox")


def transcription_table(url: str, more: str = "") -> str:
    return f'[transcription]\nurl = "{url}"\napi_key = "sk-voice"\n{more}'


def transcriber(fake: FakeTranscription) -> HttpTranscriber:
    return HttpTranscriber(fake.url, model="whisper-1", api_key="sk-voice", timeout=30)


async def voice(tg: OnTelegram, audio: bytes, *, duration: int = 3) -> int:
    update = voice_update(tg.fake, private_chat(ALICE), ALICE, audio, duration=duration)
    await tg.fake.push(update)
    return int(update["message"]["message_id"])


@pytest.mark.real_agent("codex")
async def test_a_voice_note_is_shown_as_text_then_reaches_codex_as_the_prompt(
    codex_bin: str,
    codex_home: CodexHome,
    fake_model: FakeResponses,
    fake_telegram: FakeTelegram,
    tmp_path: Path,
) -> None:
    fake_model.enqueue((message("Two files: a.txt and b.txt."),))
    async with FakeTranscription() as heard:
        heard.say(OGG, "what files are in the work dir?")
        config = telegram_config(
            fake_telegram,
            tmp_path / "data",
            work_dir=codex_home.workspace,
            codex_bin=codex_bin,
            home=codex_home,
            policy=transcription_table(heard.url),
        )
        async with on_telegram(config, fake_telegram, transcriber=transcriber(heard)) as tg:
            note = await voice(tg, OGG)
            shown = await tg.bot_message(ALICE.id, lambda m: m.text.startswith("🎤"))
            await tg.bot_message(ALICE.id, lambda m: "Two files" in m.text)
    assert shown.text == "🎤 what files are in the work dir?"
    [sent] = [c for c in fake_telegram.calls_to("sendMessage") if c["text"].startswith("🎤")]
    reply = sent["reply_parameters"]
    assert (json.loads(reply) if isinstance(reply, str) else reply)["message_id"] == note
    [request] = fake_model.model_requests()
    assert any("what files are in the work dir?" in t for t in request.user_texts())
    [call] = heard.heard
    assert call.audio == OGG and call.model == "whisper-1"
    assert call.authorization == "Bearer sk-voice"
    assert [p.read_bytes() for p in (codex_home.workspace / INBOX).glob("voice-*")] == [OGG]


@pytest.mark.parametrize("spoken", ["approve", "yes, approve it", "/approve {id}"])
async def test_a_spoken_approve_with_a_card_waiting_decides_nothing(
    spoken: str, fake_telegram: FakeTelegram, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    launcher = ScriptedLauncher(REQUESTS)
    async with FakeTranscription() as heard:
        config = telegram_config(
            fake_telegram, tmp_path / "data", work_dir=work, policy=transcription_table(heard.url)
        )
        async with on_telegram(
            config, fake_telegram, launcher, transcriber=transcriber(heard)
        ) as tg:
            await tg.fake.push(message_update(fake_telegram, private_chat(ALICE), ALICE, "approve"))
            card = await tg.card(ALICE.id)
            [waiting] = await tg.gateway.store.interactions.list_open()
            heard.say(OGG, spoken.format(id=waiting.id))
            await voice(tg, OGG)
            told = await tg.bot_message(
                ALICE.id, lambda m: m.text.startswith("Queued as a message for the agent")
            )
            [still] = await tg.gateway.store.interactions.list_open()
    assert "not as a decision" in told.text and waiting.id in told.text
    assert still.id == waiting.id and still.state.value == "pending"
    assert launcher.received == []  # nothing written to the agent
    assert fake_telegram.message(ALICE.id, card.message_id).buttons  # the card still asks


async def test_without_transcription_the_chat_says_how_to_turn_it_on_once(
    fake_telegram: FakeTelegram, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    launcher = ScriptedLauncher(REQUESTS)
    config = telegram_config(fake_telegram, tmp_path / "data", work_dir=work)
    async with on_telegram(config, fake_telegram, launcher) as tg:
        await voice(tg, OGG)
        await tg.bot_message(ALICE.id, lambda m: m.text == NOT_CONFIGURED)
        await voice(tg, OGG)
        await tg.fake.push(message_update(fake_telegram, private_chat(ALICE), ALICE, "hello"))
        await tg.bot_message(ALICE.id, lambda m: m.text == "echo: hello")
    assert tg.texts(ALICE.id).count(NOT_CONFIGURED) == 1
    assert [p.text for p in launcher.prompts] == ["hello"]  # no voice note reached the agent


async def test_a_failed_or_too_long_voice_note_is_said_and_nothing_is_sent(
    fake_telegram: FakeTelegram, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    launcher = ScriptedLauncher(REQUESTS)
    async with FakeTranscription() as heard:
        config = telegram_config(
            fake_telegram,
            tmp_path / "data",
            work_dir=work,
            policy=transcription_table(heard.url, "max_seconds = 60\nmax_bytes = 100000"),
        )
        async with on_telegram(
            config, fake_telegram, launcher, transcriber=transcriber(heard)
        ) as tg:
            chat = private_chat(ALICE)
            await tg.fake.push(message_update(fake_telegram, chat, ALICE, "/transcribe"))
            await tg.bot_message(ALICE.id, lambda m: m.text == NOTHING_TO_TRANSCRIBE)
            heard.fail_with = 503
            await voice(tg, OGG)
            failed = await tg.bot_message(ALICE.id, lambda m: "could not be turned" in m.text)
            await voice(tg, OGG + b"long", duration=600)
            long = await tg.bot_message(ALICE.id, lambda m: "long; the limit" in m.text)
            await voice(tg, OGG + bytes(200_000))
            large = await tg.bot_message(ALICE.id, lambda m: "transcription takes" in m.text)
            assert launcher.prompts == []
            heard.fail_with = None  # the service is back: /transcribe tries the note again
            heard.say(OGG, "try the build again")
            await tg.fake.push(message_update(fake_telegram, chat, ALICE, "/transcribe"))
            await tg.bot_message(ALICE.id, lambda m: m.text == "echo: try the build again")
    assert "🎤 try the build again" in tg.texts(ALICE.id)
    assert "the transcription service answered 503" in failed.text
    assert "/transcribe tries again" in failed.text
    [kept] = (work / INBOX).glob("voice-*")
    assert kept.read_bytes() == OGG  # kept, to send again
    assert str(kept) not in failed.text  # a path on the gateway's machine is no one's business
    assert "This voice note is 10 min long; the limit is 1 min" in long.text
    assert "is 195.5 KiB; the transcription takes up to 97.7 KiB." in large.text
    assert len(heard.heard) == 2 and [p.text for p in launcher.prompts] == ["try the build again"]


async def test_a_local_command_transcribes_and_one_that_fails_or_hangs_is_said(
    tmp_path: Path,
) -> None:
    audio = tmp_path / "note.ogg"
    audio.write_bytes(OGG)
    script = tmp_path / "transcribe.py"
    script.write_text(
        "import sys, time\n"
        "path = sys.argv[-1]\n"
        "if 'hang' in sys.argv: time.sleep(60)\n"
        "if 'fail' in sys.argv: sys.exit('no model loaded')\n"
        "print('heard', len(open(path, 'rb').read()), 'bytes')\n"
    )
    said = await CommandTranscriber((sys.executable, str(script)), timeout=30).transcribe(
        audio, "audio/ogg"
    )
    assert said == f"heard {len(OGG)} bytes"
    with pytest.raises(TranscriptionFailed, match="exited with code 1: no model loaded"):
        await CommandTranscriber((sys.executable, str(script), "fail"), timeout=30).transcribe(
            audio, "audio/ogg"
        )
    with pytest.raises(TranscriptionFailed, match=r"no transcript within 0\.5 s"):
        await CommandTranscriber((sys.executable, str(script), "hang"), timeout=0.5).transcribe(
            audio, "audio/ogg"
        )


async def test_a_slack_audio_clip_is_transcribed_and_queued(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    launcher = ScriptedLauncher(REQUESTS)
    async with FakeTranscription() as heard, FakeSlack() as fake:
        heard.say(OGG, "run the linter please")
        dm = fake.dm(SLACK_ALICE)
        config = slack_config(
            fake, tmp_path / "data", work_dir=work, slack="\n" + transcription_table(heard.url)
        )
        async with on_slack(config, fake, launcher, transcriber=transcriber(heard)):
            await fake.say(SLACK_ALICE, dm.id, "", files=[("audio_message.m4a", OGG)])
            echo = await fake.wait_for(
                lambda: next((m.text for m in fake.messages(dm.id) if "echo:" in m.text), None)
            )
    texts = [m.text for m in fake.messages(dm.id)]
    assert "🎤 run the linter please" in texts
    assert texts.index("🎤 run the linter please") < texts.index(echo)  # shown, then queued
    assert echo == "echo: run the linter please"


async def test_a_discord_voice_message_is_transcribed_and_queued(tmp_path: Path) -> None:
    async with FakeTranscription() as heard, FakeDiscord() as fake:
        heard.say(OGG, "what broke in the build?")
        driver = DiscordDriver(tmp_path, fake)
        driver.config = driver.config.model_copy(
            update={"transcription": TranscriptionConfig(url=heard.url, api_key=None)}
        )
        driver.transcriber = transcriber(heard)
        dm = fake.dm(DISCORD_ALICE)
        async with driver.running():
            await fake.say(DISCORD_ALICE, dm, "", files=[("voice-message.ogg", OGG)])
            echo = await fake.wait_for(
                lambda: next((m for m in fake.messages(dm) if "echo:" in m.content), None)
            )
    said = [m.content for m in fake.messages(dm)]
    assert "🎤 what broke in the build?" in said
    assert echo.content == "echo: what broke in the build?"
