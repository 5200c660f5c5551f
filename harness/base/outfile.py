"""One writer for every file the tools write (SPEC V1, O4).

Reports (HTML, Markdown, JSON), JUnit XML, baselines, the proxy's report file and event log,
the self-test's and the demo's JSON files: each target is checked here, once, by the same
rules, and whole files are replaced here, atomically.

- The target is a regular file or does not exist: a device (`/dev/full`, `/dev/null`), a FIFO,
  a socket, a directory or anything under `/proc` or `/sys` is refused with one line.
- Symlinks are followed (O4: a symlinked report is written through), except one in a sticky
  world-writable folder (such as /tmp) that belongs neither to us nor to the folder's owner:
  the kernel's `protected_symlinks` rule, applied here whatever the kernel is set to, because
  a root process writing through a link another user planted overwrites any file.
- A whole file is written to `<file>.<pid>.<random>.tmp`, created exclusively beside the
  target, then switched in. On Linux the switch is an exchange (renameat2), so a device or
  folder put at the path after the check is put back, never replaced; a new file is linked
  in with RENAME_NOREPLACE. Elsewhere the path is checked right before a plain rename.
- `-` means standard output (`report -o -` pipes Markdown straight into a PR comment).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import secrets
import stat
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from harness.base.errors import OutputFileError, no_space

STDOUT = "-"
_MAX_SYMLINKS = 40  # as the kernel's path walk (ELOOP)
_PSEUDO_FS = (Path("/proc"), Path("/sys"))


def _reason(exc: OSError, path: str | os.PathLike[str] | None = None) -> str:
    """Why an OS call failed, in words; a full disk names the disk (V20): the disk that holds
    `path` when the error does not name a file."""
    return no_space(exc, path) or exc.strerror or str(exc)


def kind_of(mode: int) -> str:
    """What a non-regular file is, in words."""
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _sticky_world_writable(st: os.stat_result) -> bool:
    return bool(st.st_mode & stat.S_ISVTX) and bool(st.st_mode & stat.S_IWOTH)


def _foreign(owner: int, folder: os.stat_result) -> bool:
    """Owned neither by us nor by the folder's owner (the kernel's protected_* test)."""
    return owner != os.geteuid() and owner != folder.st_uid


@dataclass(frozen=True)
class Target:
    """Where a write lands: a symlink-free path, its folder's identity, what is there now."""

    path: Path
    folder: tuple[int, int]  # (st_dev, st_ino) of the folder, checked again when writing
    existing: os.stat_result | None


def resolve(path: str | os.PathLike[str], what: str = "output file", *,
            make_folders: bool = False) -> Target:
    """V1: resolve `path` as the kernel would, checking every symlink it follows, and refuse a
    target that is not a regular file. `make_folders` creates missing folders on the way."""
    shown = os.fspath(path)
    if not shown:
        raise OutputFileError(f"the {what} needs a path")
    pending = list(reversed(Path(shown).parts))
    current = Path("/") if shown.startswith("/") else Path(os.getcwd())
    hops = 0
    while pending:
        part = pending.pop()
        if part == "/":
            current = Path("/")
            continue
        if part in ("", "."):
            continue
        if part == "..":
            current = current.parent  # `current` holds no symlink, so this is the real parent
            continue
        candidate = current / part
        try:
            st = os.lstat(candidate)
        except FileNotFoundError:
            if not pending:
                return _final(shown, what, candidate, None)
            if not make_folders:
                raise OutputFileError(f"{shown}: folder {candidate} does not exist") from None
            try:
                os.mkdir(candidate)
            except FileExistsError:
                pending.append(part)  # appeared meanwhile: look again
                continue
            except OSError as exc:
                raise OutputFileError(
                    f"{shown}: cannot create folder {candidate}: {_reason(exc, shown)}"
                ) from exc
            current = candidate
            continue
        except OSError as exc:
            raise OutputFileError(f"{shown}: cannot use as {what}: {_reason(exc)}") from exc
        if stat.S_ISLNK(st.st_mode):
            hops += 1
            if hops > _MAX_SYMLINKS:
                raise OutputFileError(f"{shown}: too many levels of symbolic links")
            folder = os.stat(current)
            if _sticky_world_writable(folder) and _foreign(st.st_uid, folder):
                raise OutputFileError(
                    f"{shown}: refusing to follow the symlink {candidate}: it lies in the "
                    f"sticky world-writable folder {current} and belongs to another user "
                    f"(uid {st.st_uid}); give the real path"
                )
            link = os.readlink(candidate)
            pending.extend(reversed(Path(link).parts))
            if link.startswith("/"):
                current = Path("/")
            continue
        if not pending:
            return _final(shown, what, candidate, st)
        if not stat.S_ISDIR(st.st_mode):
            raise OutputFileError(f"{shown}: {candidate} is not a folder")
        current = candidate
    # The path named a folder (`.`, `/`, `x/..`).
    return _final(shown, what, current, os.stat(current))


def _final(shown: str, what: str, path: Path, st: os.stat_result | None) -> Target:
    for root in _PSEUDO_FS:
        if path == root or root in path.parents:
            raise OutputFileError(f"{shown}: refusing to write a {what} under {root}")
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise OutputFileError(
            f"{shown}: the {what} target is {kind_of(st.st_mode)}; give the path of a regular file"
        )
    try:
        folder = os.stat(path.parent)
    except OSError as exc:
        raise OutputFileError(f"{shown}: folder {path.parent}: {_reason(exc)}") from exc
    return Target(path, (folder.st_dev, folder.st_ino), st)


def same_file(a: Target, b: Target) -> bool:
    """Two targets that are one file: the same path, or hard links to one inode."""
    if a.path == b.path:
        return True
    if a.existing is None or b.existing is None:
        return False
    return (a.existing.st_dev, a.existing.st_ino) == (b.existing.st_dev, b.existing.st_ino)


def check_roles(
    outputs: dict[str, str | os.PathLike[str] | None],
    inputs: dict[str, str | os.PathLike[str] | None] | None = None,
) -> None:
    """V18: no file has two roles in one command: an output is never one of the inputs (by
    any path, link or hard link) nor another output. Each role is named by what it is
    ("count file": path); None is a role not given. OutputFileError (one line) otherwise."""
    given_inputs = {what: p for what, p in (inputs or {}).items() if p is not None}
    seen: list[tuple[str, str, tuple[object, ...]]] = []
    for what, path in given_inputs.items():
        if os.fspath(path) != STDOUT:
            seen.append((what, os.fspath(path), _identity_of_input(path)))
    for what, path in outputs.items():
        if path is None or os.fspath(path) == STDOUT:
            continue
        target = resolve(path, what)
        mine = _identity_of_output(target)
        for other, other_path, identity in seen:
            if identity == mine or (len(mine) == 2 and mine == identity[:2]):
                kind = "an input" if other in given_inputs else "an output"
                raise OutputFileError(
                    f"{os.fspath(path)}: the {what} would be written over the {other} "
                    f"({other_path}, {kind} of this command); give the {what} a path of its own"
                )
        seen.append((what, os.fspath(path), mine))


def _identity_of_input(path: str | os.PathLike[str]) -> tuple[object, ...]:
    """(device, inode) of an input that exists (links followed), else its absolute path."""
    try:
        st = os.stat(path)
    except OSError:
        return ("path", os.path.realpath(path))
    return (st.st_dev, st.st_ino)


def _identity_of_output(target: Target) -> tuple[object, ...]:
    if target.existing is not None:
        return (target.existing.st_dev, target.existing.st_ino)
    return ("path", str(target.path))


class WriterLock:
    """V18: one writer at a time for an output that a command builds over a while (a
    cassette: `record -o`). A lock file beside the target (`.<name>.lock`, flock) is held
    from before the work starts until the file is written; a second writer fails at once, in
    one line, before it starts anything. A writer that dies releases it (the kernel does)."""

    def __init__(self, path: str | os.PathLike[str], what: str) -> None:
        import fcntl

        shown = os.fspath(path)
        target = resolve(path, what)
        self.path = target.path.parent / f".{target.path.name}.lock"
        for _ in range(10):  # the lock file may be removed by the writer before us meanwhile
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            except OSError as exc:
                raise OutputFileError(f"{shown}: cannot lock the {what}: {_reason(exc, shown)}") from exc
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
                os.close(fd)
                by = f" (process {holder})" if holder.isdigit() else ""
                raise OutputFileError(
                    f"{shown}: another writer{by} is writing this {what} now; give another path "
                    "or wait until it ends"
                ) from None
            except OSError as exc:
                os.close(fd)
                raise OutputFileError(f"{shown}: cannot lock the {what}: {_reason(exc, shown)}") from exc
            try:
                same = os.stat(self.path, follow_symlinks=False).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
        else:
            raise OutputFileError(f"{shown}: cannot lock the {what}: its lock file keeps changing")
        self.fd = fd
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)

    def release(self) -> None:
        """Remove the lock file and let the next writer in."""
        if self.fd < 0:
            return
        with contextlib.suppress(OSError):
            if os.stat(self.path, follow_symlinks=False).st_ino == os.fstat(self.fd).st_ino:
                os.unlink(self.path)
        os.close(self.fd)
        self.fd = -1


# -- whole files ----------------------------------------------------------------------------

def _load_renameat2():  # type: ignore[no-untyped-def]
    if not sys.platform.startswith("linux"):
        return None
    try:
        func = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):  # no libc symbol (glibc < 2.28, other libcs)
        return None
    func.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    func.restype = ctypes.c_int
    return func


RENAMEAT2 = _load_renameat2()
AT_FDCWD = -100
RENAME_NOREPLACE = 1
RENAME_EXCHANGE = 2
# The file system cannot exchange (NFS, FUSE, ...) or the kernel is too old: rename instead.
NO_EXCHANGE = {errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.EXDEV, errno.EPERM}


def renameat2(dir_fd: int, a: str, b: str, flags: int) -> int:
    """0, or the errno of renameat2 (ENOSYS where there is none)."""
    if RENAMEAT2 is None:
        return errno.ENOSYS
    if RENAMEAT2(dir_fd, os.fsencode(a), dir_fd, os.fsencode(b), flags) == 0:
        return 0
    return ctypes.get_errno()


def temp_name(target: Path) -> str:
    """O4: `<file>.<pid>.<random>.tmp`, in the target's folder."""
    return f"{target.name}.{os.getpid()}.{secrets.token_hex(6)}.tmp"


def write_file(path: str | os.PathLike[str], data: str | bytes,
               what: str = "output file") -> Path | None:
    """Replace `path` with `data` atomically under the V1 rules, or write it to stdout for
    `-`; return the file written (None for stdout). OutputFileError (one line) if impossible."""
    payload = data.encode("utf-8") if isinstance(data, str) else data
    if os.fspath(path) == STDOUT:
        _to_stdout(payload, what)
        return None
    target = resolve(path, what, make_folders=True)
    try:
        dir_fd = os.open(target.path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise OutputFileError(f"{os.fspath(path)}: cannot open its folder: {_reason(exc)}") from exc
    try:
        here = os.fstat(dir_fd)
        if (here.st_dev, here.st_ino) != target.folder:
            raise OutputFileError(f"{os.fspath(path)}: its folder changed while writing")
        _replace(dir_fd, target, payload, os.fspath(path), what)
    finally:
        os.close(dir_fd)
    return target.path


def _to_stdout(payload: bytes, what: str) -> None:
    out: BinaryIO = sys.stdout.buffer
    try:
        out.write(payload)
        out.flush()
    except OSError as exc:
        raise OutputFileError(f"cannot write the {what} to standard output: {_reason(exc)}") from exc


def _replace(dir_fd: int, target: Target, payload: bytes, shown: str, what: str) -> None:
    name, tmp = target.path.name, temp_name(target.path)
    mode = stat.S_IMODE(target.existing.st_mode) if target.existing else 0o666
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                     mode, dir_fd=dir_fd)
    except OSError as exc:
        raise OutputFileError(f"{shown}: cannot write the {what}: {_reason(exc, shown)}") from exc
    try:
        try:
            view = memoryview(payload)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        _switch(dir_fd, tmp, name, shown, what)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise OutputFileError(f"{shown}: cannot write the {what}: {_reason(exc, shown)}") from exc
    except OutputFileError:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise


def _switch(dir_fd: int, tmp: str, name: str, shown: str, what: str) -> None:
    """Put `tmp` at `name`: never replacing anything but a regular file."""
    code = renameat2(dir_fd, tmp, name, RENAME_EXCHANGE)
    if code == 0:
        # `tmp` now names what was there; put back anything that is not a regular file.
        if not stat.S_ISREG(os.lstat(tmp, dir_fd=dir_fd).st_mode):
            renameat2(dir_fd, tmp, name, RENAME_EXCHANGE)
            raise OutputFileError(f"{shown}: the {what} target is no longer a regular file")
        os.unlink(tmp, dir_fd=dir_fd)
        return
    if code == errno.ENOENT:  # nothing there: link the new file in, unless something appears
        code = renameat2(dir_fd, tmp, name, RENAME_NOREPLACE)
        if code == 0:
            return
        if code == errno.EEXIST:
            raise OutputFileError(f"{shown}: the {what} target appeared while writing; try again")
    if code not in NO_EXCHANGE and code != errno.ENOENT:
        raise OSError(code, os.strerror(code), shown)
    try:  # no renameat2 here: check as late as possible, then rename
        st = os.lstat(name, dir_fd=dir_fd)
    except FileNotFoundError:
        st = None
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise OutputFileError(f"{shown}: the {what} target is no longer a regular file")
    os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)


# -- files written piece by piece -------------------------------------------------------------

def open_append(path: str | os.PathLike[str], what: str = "output file") -> int:
    """A V1-checked file opened for appending (the event log), as a file descriptor. A file
    owned by another user in a sticky world-writable folder is refused too (the kernel's
    `protected_regular` rule)."""
    shown = os.fspath(path)
    target = resolve(path, what)
    if target.existing is not None:
        folder = os.stat(target.path.parent)
        if _sticky_world_writable(folder) and _foreign(target.existing.st_uid, folder):
            raise OutputFileError(
                f"{shown}: refusing to append to a file of another user (uid "
                f"{target.existing.st_uid}) in the sticky world-writable folder {target.path.parent}"
            )
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(target.path, flags, 0o644)
    except OSError as exc:
        raise OutputFileError(f"{shown}: cannot open the {what}: {_reason(exc, shown)}") from exc
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):  # swapped in after the check
        os.close(fd)
        raise OutputFileError(
            f"{shown}: the {what} target is {kind_of(st.st_mode)}; give the path of a regular file"
        )
    os.set_blocking(fd, True)
    return fd
