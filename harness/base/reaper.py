"""V16: every process started for a run ends with everything it started.

A process group is not enough: a child that calls `setsid` (a daemon, `setsid -f`, a tool's
own background server) leaves the group, outlives the kill, and holds the pipes it inherited,
so a reader waiting for their end waits forever (a truth probe hung `run`; a command agent's
children outlived the run). So each process the harness starts is a `ProcessTree`:

- where the kernel lets us (cgroup v2 with a folder of ours we may write), the process joins
  a cgroup of its own before its program starts (`/bin/sh` writes its pid, then `exec`s
  the program): nothing it starts can leave, whatever it calls; ending the tree is writing
  `cgroup.kill` (or SIGKILL to every member, before Linux 5.14);
- everywhere, the tree's processes carry `AGENT_HARNESS_TREE=<token>` in their environment,
  which children inherit through `setsid` and double forks; ending the tree also kills every
  process whose environment holds the token, every process of the leader's session and
  group, and every descendant of those, in rounds until a round finds none (a child forked
  meanwhile is found in the next round).

What escapes without a cgroup: a process that leaves the session, clears its environment and
whose parent has exited. `AGENT_HARNESS_CGROUPS=0` turns cgroups off (the tests run both
ways). The harness never waits for the end of a pipe that such a process may hold without a
bound: readers stop at the tree's end or their own time limit.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import secrets
import shutil
import signal
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

TREE_VARIABLE = "AGENT_HARNESS_TREE"
SHELL = "/bin/sh"
ROUNDS_S = 5.0  # how long `end` keeps sweeping while new processes keep appearing
_JOIN = 'echo $$ > "$0" 2>/dev/null; exec "$@"'  # join the cgroup (if allowed), run the program
# the shell exports a PWD of its own: the program gets exactly the environment it was given
_JOIN_UNSET_PWD = 'echo $$ > "$0" 2>/dev/null; unset PWD; exec "$@"'


def _cgroup_of(pid: int | str) -> str | None:
    """A process's cgroup v2 path (below the mount point), None without one."""
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return None
    own = next((line[3:] for line in lines if line.startswith("0::")), None)
    return None if own is None or own.endswith("(deleted)") else own


def _cgroup_mount() -> Path | None:
    """Where the cgroup v2 hierarchy is mounted (/sys/fs/cgroup, or .../unified beside v1)."""
    try:
        mounts = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return None
    found = next((m.split(" - ")[0].split()[4] for m in mounts if " - cgroup2 " in m), None)
    return None if found is None else Path(found)


def _cgroup_root() -> Path | None:
    """This process's cgroup v2 folder, if it is one we may create folders in."""
    if os.environ.get("AGENT_HARNESS_CGROUPS") == "0" or not os.path.exists(SHELL):
        return None
    own, mount = _cgroup_of("self"), _cgroup_mount()
    if own is None or mount is None:
        return None
    folder = mount / own.lstrip("/")
    return folder if os.access(folder, os.W_OK) else None


class _Cgroups:
    """This process's folder for the cgroups of its trees: `<own cgroup>/agent-harness.<pid>`."""

    def __init__(self) -> None:
        self.made_for: tuple[int, str | None] = (-1, None)
        self.base: Path | None = None

    def folder(self) -> Path | None:
        # A fork has its own (and must not remove its parent's); AGENT_HARNESS_CGROUPS is
        # read each time (tests turn it off and on).
        wanted = (os.getpid(), os.environ.get("AGENT_HARNESS_CGROUPS"))
        if self.made_for != wanted:
            self.made_for, self.base = wanted, None
            pid = os.getpid()
            root = _cgroup_root()
            if root is not None:
                base = root / f"agent-harness.{pid}"
                try:
                    base.mkdir(exist_ok=True)
                    _remove_stale(root)
                    self.base = base
                    atexit.register(_remove_cgroup, base)  # what is left at exit ends too
                except OSError:
                    self.base = None
        return self.base


_CGROUPS = _Cgroups()


def _remove_stale(root: Path) -> None:
    """Folders that processes killed before they could clean up left behind."""
    for folder in root.glob("agent-harness.*"):
        pid = folder.name.rpartition(".")[2]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            _remove_cgroup(folder)


def _remove_cgroup(folder: Path) -> None:
    with contextlib.suppress(OSError):
        for child in sorted(folder.rglob("*"), key=lambda p: len(p.parts), reverse=True):
            if child.is_dir():
                _kill_cgroup(child)
                child.rmdir()
        _kill_cgroup(folder)
        folder.rmdir()


def _kill_cgroup(folder: Path) -> None:
    """SIGKILL everything in a cgroup and below it."""
    try:
        (folder / "cgroup.kill").write_text("1")
        return
    except OSError:
        pass  # before Linux 5.14: each member
    for procs in [folder / "cgroup.procs", *folder.rglob("*/cgroup.procs")]:
        with contextlib.suppress(OSError):
            for pid in procs.read_text().split():
                with contextlib.suppress(OSError):
                    os.kill(int(pid), signal.SIGKILL)


def _populated(folder: Path) -> bool:
    try:
        return "populated 1" in (folder / "cgroup.events").read_text()
    except OSError:
        return False


class ProcessTree:
    """One process the harness starts and everything it starts in turn (V16).

    `command` and `environment` give what to start; `started(pid)` names the process once it
    runs; `end()` ends the tree (call it off the event loop: it reads /proc)."""

    def __init__(self) -> None:
        self.token = f"{os.getpid()}-{secrets.token_hex(8)}"
        self.leader: int | None = None
        self.leader_start: str | None = None  # its start time: a reused pid is not it
        self.cgroup: Path | None = None
        base = _CGROUPS.folder()
        if base is not None:
            try:
                (base / self.token).mkdir()
                self.cgroup = base / self.token
            except OSError:
                self.cgroup = None

    def command(
        self, argv: Sequence[str], cwd: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None,
    ) -> list[str]:
        """`argv` as started in the tree: through `/bin/sh`, which joins the tree's cgroup
        and then becomes the program (same pid), where there is a cgroup. A program that
        cannot be found is left as it is, so starting it fails as it always did."""
        if self.cgroup is None or not argv or not _runnable(argv[0], cwd, env):
            return list(argv)
        script = _JOIN if "PWD" in (os.environ if env is None else env) else _JOIN_UNSET_PWD
        return [SHELL, "-c", script, str(self.cgroup / "cgroup.procs"), *argv]

    def environment(self, env: Mapping[str, str] | None = None) -> dict[str, str]:
        """`env` (this process's when None) with the tree's token after those of the trees
        it is started in: a tree's end finds what its inner trees left as well."""
        base = os.environ if env is None else env
        outer = base.get(TREE_VARIABLE)
        return {**base, TREE_VARIABLE: f"{outer}:{self.token}" if outer else self.token}

    def kill_file(self) -> str | None:
        """The file that ends the tree's cgroup when "1" is written to it (a supervisor's,
        V7), None without a cgroup."""
        return None if self.cgroup is None else str(self.cgroup / "cgroup.kill")

    async def start(
        self, argv: Sequence[str], *, cwd: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None, **kwargs: Any,
    ) -> asyncio.subprocess.Process:
        """`asyncio.create_subprocess_exec` of `argv` as the tree's first process, in a
        session of its own."""
        proc = await asyncio.create_subprocess_exec(
            *self.command(argv, cwd, env), cwd=cwd, env=self.environment(env),
            start_new_session=True, **kwargs,
        )  # fmt: skip
        self.started(proc.pid)
        return proc

    async def aend(self) -> int:
        """`end` off the event loop (it reads /proc and waits in rounds)."""
        return await asyncio.to_thread(self.end)

    def started(self, pid: int) -> None:
        """The tree's first process runs as `pid`."""
        self.leader = pid
        stat = _stat(pid)
        self.leader_start = stat[4] if stat is not None else None

    def end(self) -> int:
        """SIGKILL every process of the tree, in rounds until none is left (bounded); how many
        were signalled. The cgroup is removed."""
        killed = 0
        deadline = time.monotonic() + ROUNDS_S
        while True:
            found = self._members()
            if self.cgroup is not None and _populated(self.cgroup):
                _kill_cgroup(self.cgroup)
                killed += 1
            for pid in found:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            killed += len(found)
            if not found and (self.cgroup is None or not _populated(self.cgroup)):
                break
            if time.monotonic() > deadline:
                break
            time.sleep(0.01)  # the killed ones leave /proc; what they forked shows
        if self.cgroup is not None:
            with contextlib.suppress(OSError):
                self.cgroup.rmdir()
        return killed

    def _session(self) -> int | None:
        """The leader's session and group number, while it names ours: a pid stays taken
        while any process has it as its session or group, so members of the leader's
        session outlive it under its number; a process that now has the leader's pid with
        another start time means that session is gone and the number is someone else's."""
        if self.leader is None:
            return None
        now = _stat(self.leader)
        if now is not None and now[4] != self.leader_start:
            return None
        return self.leader

    def _members(self) -> set[int]:
        """Living processes of the tree outside the cgroup: the token in their environment,
        the leader's session or group, and their descendants."""
        token = self.token.encode()
        protected = _ancestors(os.getpid())
        session = self._session()
        found: set[int] = set()
        children: dict[int, list[int]] = {}
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            pid = int(entry.name)
            stat = _stat(pid)
            if stat is None or stat[0] == "Z" or pid in protected:
                continue
            _, ppid, pgid, sid, _ = stat
            children.setdefault(ppid, []).append(pid)
            if session is not None and session in (pgid, sid):
                found.add(pid)
            elif _holds(pid, token):
                found.add(pid)
        pending = list(found)
        while pending:
            for child in children.get(pending.pop(), ()):
                if child not in found and child not in protected:
                    found.add(child)
                    pending.append(child)
        return found


async def exited(proc: asyncio.subprocess.Process) -> None:
    """Until the process itself has exited. `proc.wait()` alone also waits until its pipes
    close, which a process it left running may hold open (V16); this returns at the exit
    either way (as soon as `wait()` does when nothing holds them)."""
    waiter = asyncio.ensure_future(proc.wait())
    try:
        while proc.returncode is None and not waiter.done():
            await asyncio.wait({waiter}, timeout=0.02)
    finally:
        waiter.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await waiter


def _runnable(program: str, cwd: str | os.PathLike[str] | None,
              env: Mapping[str, str] | None) -> bool:  # fmt: skip
    """Whether `program` names a file that can be run (as exec would find it)."""
    if "/" in program:
        path = program if os.path.isabs(program) else os.path.join(cwd or ".", program)
        return os.path.isfile(path) and os.access(path, os.X_OK)
    search = (os.environ if env is None else env).get("PATH", os.defpath)
    return shutil.which(program, path=search) is not None


def _stat(pid: int | str) -> tuple[str, int, int, int, str] | None:
    """(state, ppid, pgid, sid, start time) of a process, None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            text = f.read().decode("ascii", "replace")
    except OSError:
        return None
    fields = text.rpartition(")")[2].split()
    try:
        return fields[0], int(fields[1]), int(fields[2]), int(fields[3]), fields[19]
    except (IndexError, ValueError):
        return None


_PREFIX = f"{TREE_VARIABLE}=".encode()


def _holds(pid: int, token: bytes) -> bool:
    """Whether the process's environment (as it was started) names the tree `token`."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            data = f.read()
    except OSError:
        return False
    for item in data.split(b"\0"):
        if item.startswith(_PREFIX):
            return token in item[len(_PREFIX) :].split(b":")
    return False


def _ancestors(pid: int) -> set[int]:
    """This process and its ancestors: never swept, whatever their environment says."""
    found = set()
    while pid > 1 and pid not in found:
        found.add(pid)
        stat = _stat(pid)
        if stat is None:
            break
        pid = stat[1]
    return found


def follow_cgroup(pid: int) -> None:
    """Join the cgroup of process `pid` (a fork server's child joins its client's tree), where
    there is one and it differs from ours; nothing otherwise."""
    theirs = _cgroup_of(pid)
    if theirs is None or theirs == _cgroup_of("self") or _cgroup_root() is None:
        return
    mount = _cgroup_mount()
    if mount is not None:
        with contextlib.suppress(OSError):
            (mount / theirs.lstrip("/") / "cgroup.procs").write_text(str(os.getpid()))
