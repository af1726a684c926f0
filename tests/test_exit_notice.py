"""The notice a person reads when the agent process ends unexpectedly: what happened and what
to do, then the agent's last output cleaned of terminal escapes and of the startup noise that
reads like a cause (Codex's stderr as 0.171 writes it on a machine without bubblewrap)."""

from __future__ import annotations

from gateway.render.exit_notice import LINE_CHARS, exit_notice, last_output

# codex 0.171 app-server's stderr, as captured: colours on, and an ERROR line at every start
CODEX_STDERR = (
    "WARNING: proceeding, even though we could not create PATH aliases: Refusing to create"
    ' helper binaries under temporary dir "/tmp" (codex_home: AbsolutePathBuf("/tmp/h"))\n'
    "\x1b[2m2026-12-01T05:30:56.354688Z\x1b[0m \x1b[31mERROR\x1b[0m \x1b[2mcodex_app_server"
    "\x1b[0m\x1b[2m:\x1b[0m Codex could not find bubblewrap on PATH. Install bubblewrap with"
    " your OS package manager. Codex will use the bundled bubblewrap in the meantime.\n"
    "\x1b[2m2026-12-01T05:30:56.480016Z\x1b[0m \x1b[33m WARN\x1b[0m \x1b[2mcodex_core_plugins::"
    "startup_sync\x1b[0m\x1b[2m:\x1b[0m git sync failed for curated plugin sync\n"
)


def test_codex_startup_noise_alone_shows_no_output_and_no_escape() -> None:
    notice = exit_notice("killed by a signal", CODEX_STDERR, turn_cut=True)
    assert notice == (
        "⚠ The agent process ended unexpectedly (killed by a signal). Its answer to your last"
        " message is cut short. Your next message starts it again and carries on the same"
        " conversation; /new starts a fresh one."
    )


def test_real_last_lines_are_shown_as_its_last_output_cleaned() -> None:
    tail = (
        CODEX_STDERR
        + "\x1b[2m2026-12-01T05:31:00.1Z\x1b[0m \x1b[31mERROR\x1b[0m codex_core: out of memory\n"
        + "\x1b]0;a window title\x07progress 10%\rprogress 100%\r\n"
        + "thread 'main' panicked at ```src/main.rs```\x07\x00\n\n"
    )
    notice = exit_notice("exited with code 101", tail, turn_cut=False)
    assert notice == (
        "⚠ The agent process ended unexpectedly (exited with code 101). Your next message"
        " starts it again and carries on the same conversation; /new starts a fresh one.\n\n"
        "The agent's last output (it may not say why):\n"
        "````\n"
        "ERROR codex_core: out of memory\n"
        "progress 100%\n"
        "thread 'main' panicked at ```src/main.rs```\n"
        "````"
    )
    assert not any(ord(c) < 32 and c != "\n" for c in notice)


def test_the_output_is_short_enough_for_a_phone() -> None:
    tail = "".join(f"line {n}: " + "x" * 1000 + "\n" for n in range(50))
    lines = last_output(tail)
    assert [line.split(":")[0] for line in lines] == [f"line {n}" for n in range(45, 50)]
    assert all(len(line) == LINE_CHARS and line.endswith("…") for line in lines)


def test_messages_held_behind_the_cut_turn_are_named_with_what_to_do() -> None:
    notice = exit_notice("killed by a signal", "", turn_cut=True, held=1)
    assert notice.endswith(
        "/new starts a fresh one. 1 earlier message is held: /resume runs it, /clear drops it;"
        " a new message runs first."
    )
