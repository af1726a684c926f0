"""send_file's first step: the file is opened, then checked where it really is.

Real files, links and a FIFO in a temporary work dir; what is asserted is what the agent
would read (the refusal's words) and what would be sent (bytes, type, first lines).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gateway.config.policy_rules import PolicyRule, RuleKind
from gateway.interactions.policy import send_file_rule
from gateway.sessions.outgoing_files import (
    SendRefused,
    ask_reasons,
    open_in_work_dir,
)

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32
MAX = 1024 * 1024


@pytest.fixture
def work(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    (work / "out").mkdir(parents=True)
    (work / "out" / "chart.png").write_bytes(PNG)
    (work / "build.log").write_text("".join(f"line {n}\n" for n in range(1, 40)))
    (tmp_path / "secret.txt").write_text("outside")
    return work


def test_a_file_inside_is_read_whole_with_its_type_and_first_lines(work: Path) -> None:
    picture = open_in_work_dir(work, "out/chart.png", max_bytes=MAX)
    assert picture.relative == "out/chart.png"
    assert picture.content == PNG
    assert picture.is_picture and picture.media_type == "image/png"
    log = open_in_work_dir(work, str(work / "build.log"), max_bytes=MAX)  # absolute, inside
    assert log.media_type == "text/plain"
    assert log.preview is not None and log.preview.splitlines()[0] == "line 1"
    assert len(log.preview.splitlines()) == 12


@pytest.mark.parametrize("how", ["link", "dotdot", "absolute", "linked_dir"])
def test_anything_outside_the_work_dir_is_refused_and_says_why(work: Path, how: str) -> None:
    outside = work.parent / "secret.txt"
    if how == "link":
        (work / "innocent.txt").symlink_to(outside)
        requested = "innocent.txt"
    elif how == "linked_dir":
        (work / "up").symlink_to(work.parent)
        requested = "up/secret.txt"
    elif how == "dotdot":
        requested = "../secret.txt"
    else:
        requested = str(outside)
    with pytest.raises(SendRefused, match="outside this session's working directory"):
        open_in_work_dir(work, requested, max_bytes=MAX)


def test_a_link_inside_to_a_file_inside_is_followed(work: Path) -> None:
    (work / "latest.png").symlink_to(work / "out" / "chart.png")
    assert open_in_work_dir(work, "latest.png", max_bytes=MAX).relative == "out/chart.png"


def test_no_file_a_directory_a_fifo_and_a_large_file_are_refused(work: Path) -> None:
    with pytest.raises(SendRefused, match=r"there is no file nope\.txt"):
        open_in_work_dir(work, "nope.txt", max_bytes=MAX)
    with pytest.raises(SendRefused, match="out is not a regular file"):
        open_in_work_dir(work, "out", max_bytes=MAX)
    os.mkfifo(work / "pipe")  # opening it for reading would block: it is never opened so
    with pytest.raises(SendRefused, match="pipe is not a regular file"):
        open_in_work_dir(work, "pipe", max_bytes=MAX)
    with pytest.raises(SendRefused, match="more than the 16 bytes"):
        open_in_work_dir(work, "build.log", max_bytes=16)


def test_dotfiles_git_and_large_files_are_shown_to_a_person_first(work: Path) -> None:
    (work / ".env").write_text("TOKEN=x\n")
    (work / ".git").mkdir()
    (work / ".git" / "config").write_text("[core]\n")
    plain = open_in_work_dir(work, "build.log", max_bytes=MAX)
    assert ask_reasons(plain, ask_above=MAX) == ()
    assert ask_reasons(plain, ask_above=10) == ("it is larger than 10 bytes",)
    dotfile = open_in_work_dir(work, ".env", max_bytes=MAX)
    assert ask_reasons(dotfile, ask_above=MAX) == (
        "it is a hidden file (a dotfile: they often hold settings and secrets)",
    )
    git = open_in_work_dir(work, ".git/config", max_bytes=MAX)
    assert ask_reasons(git, ask_above=MAX) == ("it is under .git/",)


def test_a_send_file_rule_governs_by_kind_and_path_glob(work: Path) -> None:
    log = open_in_work_dir(work, "build.log", max_bytes=MAX).detail(caption=None, reason=None)
    chart = open_in_work_dir(work, "out/chart.png", max_bytes=MAX).detail(caption=None, reason=None)
    commands = PolicyRule(kind=RuleKind.COMMAND, approvals=2)
    prefix = PolicyRule(command_prefix="rm", approvals=2)
    logs = PolicyRule(kind=RuleKind.SEND_FILE, path_glob="*.log", approvals=2)
    every_file = PolicyRule(kind=RuleKind.SEND_FILE)
    assert send_file_rule([commands, prefix, logs], log) is logs
    assert send_file_rule([commands, prefix, logs], chart) is None
    assert send_file_rule([commands, logs, every_file], chart) is every_file
    assert send_file_rule([PolicyRule(approvals=3)], chart) == PolicyRule(approvals=3)  # any kind


def test_a_hard_link_is_shown_to_a_person_first(work: Path) -> None:
    """A hard link inside the work dir is the outside file itself: no path check sees it."""
    os.link(work.parent / "secret.txt", work / "innocent.txt")
    linked = open_in_work_dir(work, "innocent.txt", max_bytes=MAX)
    assert ask_reasons(linked, ask_above=MAX) == (
        "it has other names (hard links), which may lie outside the work dir",
    )
