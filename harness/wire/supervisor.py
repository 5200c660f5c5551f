"""The upstream's process group dies with the proxy, even when the proxy is SIGKILLed (V7).

The proxy ends the upstream's whole group itself on every orderly exit (X6). A SIGKILL leaves
it no chance; PR_SET_PDEATHSIG would reach only the direct child, never the children of a
`sh -c` or `npx` wrapper. So a tiny supervisor, `/bin/sh` running a few lines, holds the read
end of a pipe whose write end only the proxy has. When the proxy dies, however it dies, the
kernel closes that end, the supervisor's `read` returns, and it signals the whole group:
SIGTERM, up to a second to go, then SIGKILL. On an orderly exit the proxy stops the supervisor
first (the group is gone by then, and its number must not be signalled once it could be reused).

Starting a shell costs a few milliseconds, about as much as starting the upstream process
itself, where a second Python interpreter would cost tens (bench/proxy_startup.py, README).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal

SHELL = "/bin/sh"
SCRIPT = (
    "read _ignored; "  # EOF: the proxy is gone
    # The tree's cgroup (V16), where it has one: everything in it, whatever session.
    'if [ -n "$2" ]; then echo 1 > "$2" 2>/dev/null; fi; '
    'kill -TERM -"$1" 2>/dev/null || exit 0; '
    "i=0; "
    'while [ "$i" -lt 20 ] && kill -0 -"$1" 2>/dev/null; do sleep 0.05; i=$((i + 1)); done; '
    'kill -KILL -"$1" 2>/dev/null; exit 0'
)


class GroupSupervisor:
    """A supervisor for one process group, tied to this process by a pipe."""

    def __init__(self, proc: asyncio.subprocess.Process, pipe: int) -> None:
        self.proc = proc
        self._pipe = pipe  # write end, close-on-exec: no other process holds it

    @classmethod
    async def start(cls, group: int, cgroup_kill: str | None = None) -> GroupSupervisor | None:
        """Watch process group `group` (and the cgroup whose `cgroup.kill` file is
        `cgroup_kill`); None where there is no /bin/sh (not POSIX)."""
        if not os.path.exists(SHELL):
            return None
        read_end, write_end = os.pipe()  # both close-on-exec (PEP 446)
        try:
            proc = await asyncio.create_subprocess_exec(
                SHELL, "-c", SCRIPT, "agent-harness-supervisor", str(group), cgroup_kill or "",
                stdin=read_end, stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.DEVNULL,
                # Its own session: a Ctrl-C meant for the proxy's terminal does not reach it.
                start_new_session=True,
            )  # fmt: skip
        except OSError:
            os.close(write_end)
            return None
        finally:
            os.close(read_end)
        return cls(proc, write_end)

    async def stop(self) -> None:
        """The proxy ends the group itself: stop watching without signalling anything."""
        with contextlib.suppress(ProcessLookupError):
            self.proc.send_signal(signal.SIGKILL)
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self.proc.wait(), 5)
        with contextlib.suppress(OSError):
            os.close(self._pipe)
