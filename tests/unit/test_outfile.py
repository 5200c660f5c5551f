"""V1: one writer for every output file (harness.base.outfile), and its checks, on real files.

The symlink rule is the kernel's protected_symlinks rule applied by the harness itself: the
tests that plant a link "by another user" need root (to chown it) and a sticky folder.
"""

from __future__ import annotations

import os
import socket
import stat
from pathlib import Path

import pytest

from harness.base.errors import OutputFileError
from harness.base.outfile import open_append, resolve, same_file, write_file

OTHER_UID = 54321  # a user that owns nothing here
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to plant another user's link")


def one_line(exc: pytest.ExceptionInfo[BaseException]) -> str:
    text = str(exc.value)
    assert "\n" not in text and text
    return text


@pytest.mark.parametrize(
    ("target", "kind"),
    [("/dev/full", "a character device"), ("/dev/null", "a character device")],
)
def test_v1_a_device_is_refused_and_stays_a_device(target, kind):
    with pytest.raises(OutputFileError) as exc:
        write_file(target, "<html>report</html>", "report")
    assert f"{target}: the report target is {kind}" in one_line(exc)
    assert stat.S_ISCHR(os.stat(target).st_mode)  # issue 11: root once replaced /dev/full


def test_v1_a_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(OutputFileError, match="is a FIFO"):
        write_file(fifo, "x")
    with pytest.raises(OutputFileError, match="is a FIFO"):
        open_append(fifo, "event log")  # opening a FIFO for writing would wait for a reader
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_v1_a_directory_a_socket_and_proc_are_refused(tmp_path):
    with pytest.raises(OutputFileError, match="is a directory"):
        write_file(tmp_path, "x")
    sock_path = tmp_path / "s.sock"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(sock_path))
        with pytest.raises(OutputFileError, match="is a socket"):
            write_file(sock_path, "x")
    with pytest.raises(OutputFileError, match="under /proc"):
        write_file("/proc/self/comm", "x")
    with pytest.raises(OutputFileError, match="under /proc"):
        open_append(f"/proc/{os.getpid()}/attr/current", "event log")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.sock"]


def test_v1_a_symlink_to_a_device_is_refused(tmp_path):
    link = tmp_path / "report.html"
    link.symlink_to("/dev/full")
    with pytest.raises(OutputFileError, match="character device"):
        write_file(link, "x")
    assert link.is_symlink()


def test_v1_a_file_is_replaced_atomically_keeping_its_mode_and_no_temp_file(tmp_path):
    target = tmp_path / "out" / "report.html"
    assert write_file(target, "one") == target  # missing folders are made
    target.chmod(0o600)
    held = target.open()  # a reader of the old version keeps it whole
    write_file(target, "two")
    assert target.read_text() == "two" and held.read() == "one"
    held.close()
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert [p.name for p in target.parent.iterdir()] == ["report.html"]


def test_v1_a_symlink_is_written_through_in_an_ordinary_folder(tmp_path):
    real = tmp_path / "real.json"
    real.write_text("{}")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    write_file(link, '{"n": 1}')
    assert link.is_symlink() and real.read_text() == '{"n": 1}'


def _sticky_world_writable(path: Path) -> Path:
    path.mkdir()
    path.chmod(0o1777)
    return path


@root_only
def test_v1_another_users_symlink_in_a_sticky_folder_is_not_followed(tmp_path):
    # As root, with the kernel's own protection switched off or not: the planted link must
    # not make root overwrite a file it owns (issue 11).
    victim = tmp_path / "victim.conf"
    victim.write_text("root's data\n")
    shared = _sticky_world_writable(tmp_path / "shared")
    planted = shared / "report.html"
    planted.symlink_to(victim)
    os.lchown(planted, OTHER_UID, OTHER_UID)
    for attempt in (
        lambda: write_file(planted, "<html>"),
        lambda: open_append(planted, "event log"),
        lambda: resolve(shared / "report.html", "report file"),
    ):
        with pytest.raises(OutputFileError) as exc:
            attempt()
        assert "refusing to follow the symlink" in one_line(exc)
        assert f"uid {OTHER_UID}" in str(exc.value)
    assert victim.read_text() == "root's data\n" and planted.is_symlink()


@root_only
def test_v1_a_link_on_the_way_to_the_file_is_checked_too(tmp_path):
    # protected_symlinks applies to every link the path walk follows, not only the last.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shared = _sticky_world_writable(tmp_path / "shared")
    hop = shared / "dir"
    hop.symlink_to(elsewhere)
    os.lchown(hop, OTHER_UID, OTHER_UID)
    with pytest.raises(OutputFileError, match="refusing to follow the symlink"):
        write_file(hop / "report.html", "x")
    assert list(elsewhere.iterdir()) == []


@root_only
def test_v1_links_of_our_own_or_of_the_folder_owner_are_followed(tmp_path):
    real = tmp_path / "real.txt"
    shared = _sticky_world_writable(tmp_path / "shared")
    mine = shared / "mine"
    mine.symlink_to(real)  # owned by us (root), who also owns the folder
    write_file(mine, "ours")
    assert real.read_text() == "ours"
    os.chown(shared, OTHER_UID, OTHER_UID)
    os.lchown(mine, OTHER_UID, OTHER_UID)  # the folder's owner planted it: allowed
    write_file(mine, "owner's")
    assert real.read_text() == "owner's"


@root_only
def test_v1_appending_to_another_users_file_in_a_sticky_folder_is_refused(tmp_path):
    shared = _sticky_world_writable(tmp_path / "shared")
    planted = shared / "events.jsonl"
    planted.write_text("")
    os.chown(planted, OTHER_UID, OTHER_UID)  # the kernel's protected_regular rule
    with pytest.raises(OutputFileError, match="another user"):
        open_append(planted, "event log")


def test_v1_a_device_swapped_in_after_the_check_is_put_back(tmp_path, monkeypatch):
    # The exchange returns what was at the path; a non-file goes back, never replaced.
    target = tmp_path / "report.html"
    target.write_text("old")
    real_resolve = resolve

    def then_swap(path, what="output file", make_folders=False):
        checked = real_resolve(path, what, make_folders=make_folders)
        target.unlink()
        os.mkfifo(target)
        return checked

    monkeypatch.setattr("harness.base.outfile.resolve", then_swap)
    with pytest.raises(OutputFileError, match="no longer a regular file"):
        write_file(target, "new")
    assert stat.S_ISFIFO(os.lstat(target).st_mode)
    assert [p.name for p in tmp_path.iterdir()] == ["report.html"]


def test_v1_same_file_sees_symlinks_and_hard_links(tmp_path):
    a = tmp_path / "a.json"
    a.write_text("")
    link = tmp_path / "link.json"
    link.symlink_to(a)
    hard = tmp_path / "hard.json"
    os.link(a, hard)
    other = tmp_path / "b.json"
    assert same_file(resolve(a), resolve(link))
    assert same_file(resolve(a), resolve(hard))
    assert not same_file(resolve(a), resolve(other))
    assert same_file(resolve(other), resolve(tmp_path / "." / "b.json"))


def test_v1_a_missing_folder_is_one_line_when_folders_are_not_made(tmp_path):
    with pytest.raises(OutputFileError) as exc:
        open_append(tmp_path / "no" / "events.jsonl", "event log")
    assert "does not exist" in one_line(exc)
