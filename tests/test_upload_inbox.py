"""The inbox is hostile ground (issue 32): files land inside it, never through a link, never
over another file, never half-written; hostile names land as safe, distinct files."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterable
from pathlib import Path

import pytest

from gateway.errors import FileRefused
from gateway.platform import PlatformUnreachable
from gateway.sessions.upload_inbox import GITIGNORE, NAME_MAX_BYTES, UploadInbox, safe_name

pytestmark = pytest.mark.timeout(30)

INBOX = Path(".agent-gateway/inbox")
PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 64


async def chunks(*parts: bytes) -> AsyncIterator[bytes]:
    for part in parts:
        yield part


async def cut_after(parts: Iterable[bytes]) -> AsyncIterator[bytes]:
    for part in parts:
        yield part
    raise PlatformUnreachable("the connection was cut")


def everything_under(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


async def test_a_file_lands_in_the_inbox_with_a_gitignore_and_its_sniffed_type(
    tmp_path: Path,
) -> None:
    inbox = UploadInbox(tmp_path, INBOX)
    saved = await inbox.save("screen shot.png", chunks(PNG[:5], PNG[5:]), max_bytes=1000)
    assert saved.path == tmp_path / INBOX / "screen shot.png"
    assert saved.path.read_bytes() == PNG
    assert (saved.name, saved.media_type, saved.size) == ("screen shot.png", "image/png", len(PNG))
    assert saved.picture
    assert (tmp_path / INBOX / ".gitignore").read_text() == GITIGNORE
    assert everything_under(tmp_path) == {
        ".agent-gateway",
        ".agent-gateway/inbox",
        ".agent-gateway/inbox/.gitignore",
        ".agent-gateway/inbox/screen shot.png",
    }


@pytest.mark.parametrize("link_at", [".agent-gateway", ".agent-gateway/inbox"])
async def test_an_inbox_reached_through_a_symlink_is_refused_and_nothing_is_written_there(
    tmp_path: Path, link_at: str
) -> None:
    work, secret = tmp_path / "work", tmp_path / "ssh"
    work.mkdir()
    secret.mkdir()
    (secret / "authorized_keys").write_text("ssh-ed25519 AAAA mine\n")
    if link_at == ".agent-gateway/inbox":
        (work / ".agent-gateway").mkdir()
    (work / link_at).symlink_to(secret if link_at.endswith("inbox") else tmp_path)
    inbox = UploadInbox(work, INBOX)
    with pytest.raises(FileRefused, match="through a link"):
        await inbox.save("authorized_keys", chunks(b"ssh-ed25519 AAAA theirs\n"), max_bytes=1000)
    assert everything_under(secret) == {"authorized_keys"}
    assert (secret / "authorized_keys").read_text() == "ssh-ed25519 AAAA mine\n"
    assert not (tmp_path / "inbox").exists()


async def test_a_symlink_planted_under_the_sent_name_is_not_followed_nor_replaced(
    tmp_path: Path,
) -> None:
    target = tmp_path / "elsewhere.txt"
    target.write_text("keep me\n")
    inbox = UploadInbox(tmp_path / "work", INBOX)
    (tmp_path / "work" / INBOX).mkdir(parents=True)
    (tmp_path / "work" / INBOX / "notes.txt").symlink_to(target)
    (tmp_path / "work" / INBOX / ".gitignore").symlink_to(target)
    saved = await inbox.save("notes.txt", chunks(b"new notes\n"), max_bytes=1000)
    assert saved.path.name == "notes (2).txt"
    assert saved.path.read_text() == "new notes\n"
    assert target.read_text() == "keep me\n"  # neither the link nor the .gitignore followed
    assert (tmp_path / "work" / INBOX / "notes.txt").is_symlink()


@pytest.mark.parametrize(
    ("sent", "expected"),
    [
        ("../../x", "_.._x"),
        ("/etc/passwd", "_etc_passwd"),
        ("a\0b.txt", "a_b.txt"),
        ("..", "file"),
        ("...", "file"),
        (".", "file"),
        ("", "file"),
        (".bashrc", "bashrc"),
        (".gitignore", "gitignore"),
        ("a\\b\nc.log", "a_b_c.log"),
        ("screen, v2.png", "screen_ v2.png"),
    ],
)
def test_hostile_names_are_made_safe(sent: str, expected: str) -> None:
    assert safe_name(sent) == expected


async def test_hostile_names_land_as_distinct_files_inside_the_inbox(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    inbox = UploadInbox(work, INBOX)
    long = "é" * 300 + ".pdf"
    sent = ["../../x", "a\0b", long, "..", "...", "Report.PDF", "report.pdf", "same", "same"]
    saved = [await inbox.save(name, chunks(name.encode()), max_bytes=10_000) for name in sent]
    paths = [s.path for s in saved]
    assert len(set(paths)) == len(sent)  # distinct, none overwritten
    for name, path in zip(sent, paths, strict=True):
        assert path.parent == work / INBOX
        assert path.read_bytes() == name.encode()  # each file still holds its own bytes
        assert len(path.name.encode()) <= NAME_MAX_BYTES
    assert paths[2].suffix == ".pdf"
    assert [paths[7].name, paths[8].name] == ["same", "same (2)"]
    assert [s.name for s in saved] == sent  # the names as sent, for the prompt
    outside = {p for p in everything_under(tmp_path) if not p.startswith("work/.agent-gateway")}
    assert outside == {"work"}  # nothing outside the inbox


async def test_an_oversized_file_is_refused_and_nothing_is_left_half_written(
    tmp_path: Path,
) -> None:
    inbox = UploadInbox(tmp_path, INBOX)
    with pytest.raises(FileRefused, match="larger than this project takes"):
        await inbox.save("big.log", chunks(b"x" * 600, b"x" * 600), max_bytes=1000)
    assert sorted(os.listdir(tmp_path / INBOX)) == [".gitignore"]


async def test_a_cut_download_leaves_nothing_behind(tmp_path: Path) -> None:
    inbox = UploadInbox(tmp_path, INBOX)
    with pytest.raises(PlatformUnreachable):
        await inbox.save("half.pdf", cut_after([b"%PDF-1.4\n", b"x" * 100]), max_bytes=10_000)
    assert sorted(os.listdir(tmp_path / INBOX)) == [".gitignore"]


async def test_a_refused_type_is_named_and_not_saved(tmp_path: Path) -> None:
    inbox = UploadInbox(tmp_path, INBOX)
    with pytest.raises(FileRefused, match="image/png, a type this project does not take"):
        await inbox.save(
            "x.txt", chunks(PNG), max_bytes=1000, refuse_type=lambda t: t.startswith("image/")
        )
    assert sorted(os.listdir(tmp_path / INBOX)) == [".gitignore"]


def test_an_inbox_outside_the_work_dir_cannot_be_made(tmp_path: Path) -> None:
    for bad in (Path("../out"), Path("/tmp/inbox"), Path(".")):
        with pytest.raises(ValueError, match="not a folder inside the work dir"):
            UploadInbox(tmp_path, bad)
