"""Runs on worker processes of this machine (SPEC G3); this process stays the store's only writer.

One runner process is one core of Python: a scripted run costs about 20-25 ms of CPU on a quiet
machine, twice that on a loaded one (litellm's work for its ~3.2 model calls 6.5-7.5 ms of it,
the in-process MCP sessions, proxy, judge and record the rest), so one process completes at
most about 40-50 runs a second. A pool
spreads the runs over worker processes, one per core, the way the Ray executor spreads them
over a cluster: `run_sweep` decides what runs and when (resume, `--only`, `auto` patches,
budget, early stop, caps) exactly as it does in one process; only "run this cell once" moves.

How the workers start without importing litellm again: this process starts one helper
interpreter (`python -m runner.execute.pool`, the fork server) that imports the runner and
litellm, makes one scripted run in process (a run's first use loads the MCP SDK and litellm's
per-call modules), freezes what it holds out of the collector's sight, then, with no thread
running (checked), forks the workers, which inherit all of it. The parent
itself never imports litellm in this mode; the fork server's imports run beside the parent's
own start (the store opening, the resume query).

Each worker talks to the parent over its own socket pair: the parent sends (job, cell, patch
text), the worker answers the run's record, the parent stores it (group commit, as in one
process: a run counts as done once committed). Workers die with the parent: they ignore Ctrl-C
and SIGTERM (the parent stops them), end on EOF of their socket, and carry PR_SET_PDEATHSIG
(SIGKILL), as the fork server does towards the parent, so a SIGKILLed parent leaves no
process behind. A worker that dies turns the runs it held into error records
(`--retry-errors` runs them again); the others go on; with none left, every further run is
an error too: never a hang.

T1: the runs against one upstream with a truth probe all go to one worker (chosen from the
upstream's name), whose per-process lock keeps them from overlapping, as in one process.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import gc
import os
import pickle
import signal
import socket
import struct
import subprocess
import sys
import time
import zlib
from dataclasses import dataclass, field
from typing import Any

from runner.execute.collector import THRESHOLD
from runner.experiment import ExperimentSpec
from runner.experiment.matrix import RunCell
from runner.experiment.records import RunRecord

# A pool pays its fork server's start (a second interpreter importing the runner and litellm,
# run beside this one's start) and a pickled record per run: below this many runs per worker
# one process is as fast, and the small sweeps tests make stay in one process.
MIN_RUNS_PER_PROCESS = 40
MAX_PROCESSES = 64
_HEADER = struct.Struct("!I")
_PR_SET_PDEATHSIG = 1
STOP_GRACE_S = 10.0  # how long `close` waits for the workers to finish cancelling their runs


def usable_cores() -> int:
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def processes_for(runs: int, requested: int | None) -> int:
    """Worker processes for `runs` runs: `requested` if given (1 = this process), else one per
    core once there are MIN_RUNS_PER_PROCESS runs for each, else 1."""
    if requested is not None:
        return requested
    return max(1, min(usable_cores(), runs // MIN_RUNS_PER_PROCESS))


def threads_running() -> int:
    """Threads of this process, as the kernel counts them (those of C libraries too)."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        import threading

        return threading.active_count()


def _die_with_parent(parent: int) -> None:
    """SIGKILL when the process that started this one dies (Linux); the pipes' EOF elsewhere."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the parent died before the line above took effect
        os._exit(1)


def _frame(message: Any) -> bytes:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return _HEADER.pack(len(data)) + data


async def _read(reader: asyncio.StreamReader) -> Any:
    """The next message, or None at EOF."""
    try:
        (size,) = _HEADER.unpack(await reader.readexactly(_HEADER.size))
        return pickle.loads(await reader.readexactly(size))
    except (asyncio.IncompleteReadError, ConnectionError):
        return None


# -- the parent ----------------------------------------------------------------------------


@dataclass
class _Worker:
    index: int
    sock: socket.socket
    pid: int | None = None  # from the worker's first message
    alive: bool = True
    why_gone: str = ""
    writer: asyncio.StreamWriter | None = None
    jobs: dict[int, tuple[asyncio.Future[RunRecord], RunCell, str | None]] = field(
        default_factory=dict
    )
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    starting: int = 0  # runs given to it that wait for it to start (not yet in `jobs`)
    spec: ExperimentSpec | None = None  # the spec sent to it (with its first run)


class ProcessPool:
    """`run_sweep`'s `execute` step on worker processes; `close` ends them."""

    def __init__(self, spec: ExperimentSpec, processes: int) -> None:
        self.spec = spec
        self.processes = processes
        self.crashed = 0  # workers that ended while the sweep ran
        self._jobs = 0
        self._started = False
        self._listeners: list[asyncio.Task[None]] = []  # held: the loop keeps weak references
        self._workers: list[_Worker] = []
        ends = []
        for index in range(processes):
            mine, theirs = socket.socketpair()
            self._workers.append(_Worker(index, mine))
            ends.append(theirs)
        self._server = subprocess.Popen(
            [sys.executable, "-P", "-m", "runner.execute.pool", str(os.getpid()),
             *(str(end.fileno()) for end in ends)],
            stdin=subprocess.PIPE, pass_fds=[end.fileno() for end in ends],
        )  # fmt: skip
        for end in ends:
            end.close()

    def describe(self) -> str:
        return f"{self.processes} worker processes"

    async def ready(self) -> None:
        """Wait until every worker has started (or ended): for a benchmark's start-up figure."""
        if not self._started:
            await self._start()
        for worker in self._workers:
            await worker.ready.wait()

    async def _start(self) -> None:
        self._started = True
        for worker in self._workers:
            reader, worker.writer = await asyncio.open_connection(sock=worker.sock)
            self._listeners.append(asyncio.create_task(self._listen(worker, reader)))

    async def _listen(self, worker: _Worker, reader: asyncio.StreamReader) -> None:
        while (message := await _read(reader)) is not None:
            if message[0] == "hello":
                worker.pid = message[1]
                worker.ready.set()
            elif message[0] == "done":
                entry = worker.jobs.pop(message[1], None)
                if entry is not None and not entry[0].done():
                    entry[0].set_result(message[2])
        self._gone(worker)

    def _gone(self, worker: _Worker) -> None:
        from runner.execute.run import failed_run

        worker.alive = False
        worker.ready.set()
        self.crashed += 1
        who = f"its worker process (pid {worker.pid})" if worker.pid else "its worker process"
        worker.why_gone = f"{who} ended while the run was in flight (crashed or killed)"
        for future, cell, patch_text in worker.jobs.values():
            if not future.done():
                future.set_result(failed_run(cell, self.spec, patch_text, worker.why_gone))
        worker.jobs.clear()

    def _pick(self, cell: RunCell) -> _Worker | None:
        live = [w for w in self._workers if w.alive]
        if not live:
            return None
        if cell.upstream.truth_probe is not None:  # T1: one worker per probed upstream
            key = f"{cell.experiment}\0{cell.upstream.name}".encode()
            return live[zlib.crc32(key) % len(live)]
        # The runs waiting for a worker to start count as its own: a sweep's first wave, sent
        # before any worker is ready, would otherwise all go to the first (issue 24: all 200 runs
        # of bench/concurrency.py's first wave on one worker, twice the other's CPU over the row).
        return min(live, key=lambda w: len(w.jobs) + w.starting)

    async def __call__(
        self, cell: RunCell, spec: ExperimentSpec, patch_text: str | None, in_process: str | None
    ) -> RunRecord:
        from runner.execute.run import failed_run

        if not self._started:
            await self._start()
        while True:
            worker = self._pick(cell)
            if worker is None:
                return failed_run(
                    cell, spec, patch_text,
                    f"no worker process left (all {self.processes} ended); "
                    "`--retry-errors` runs it again",
                )  # fmt: skip
            worker.starting += 1
            try:
                await worker.ready.wait()
            finally:
                worker.starting -= 1
            if worker.alive:
                break
        self._jobs += 1
        job = self._jobs
        future: asyncio.Future[RunRecord] = asyncio.get_running_loop().create_future()
        worker.jobs[job] = (future, cell, patch_text)
        assert worker.writer is not None
        new_spec = None if spec is worker.spec else spec
        worker.spec = spec
        try:
            worker.writer.write(_frame(("run", job, cell, patch_text, in_process, new_spec)))
            return await future
        except asyncio.CancelledError:
            worker.jobs.pop(job, None)
            if worker.alive:
                with contextlib.suppress(Exception):
                    worker.writer.write(_frame(("cancel", job)))
            raise

    def close(self) -> None:
        """End the workers and the fork server: EOF on every socket, then SIGKILL what is left."""
        for worker in self._workers:
            with contextlib.suppress(OSError):
                worker.sock.shutdown(socket.SHUT_RDWR)
            worker.sock.close()
        with contextlib.suppress(OSError):
            assert self._server.stdin is not None
            self._server.stdin.close()
        try:
            self._server.wait(STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            self._server.kill()  # its workers die with it (PR_SET_PDEATHSIG)
            self._server.wait()


# -- the fork server and the workers (python -m runner.execute.pool PARENT FD...) ----------------


# One scripted run against a built-in upstream in process, made by the fork server before it
# forks: a run's first use loads the MCP SDK's server and client (with starlette and uvicorn),
# builds pydantic validators lazily and warms litellm's per-call caches, about 0.5 s of CPU that
# every worker would otherwise pay again at its first run.
_WARM_UP_SPEC = """
name: warm-up
models: [scripted/naive]
prompts: [{name: p, text: "You book rooms with the tools you have."}]
upstreams: [{name: booking, builtin: booking}]
scenarios: [F1]
conversations:
  - name: c
    user: "Please book a room. guest: Alice Example, date: 2026-12-01, nights: 2"
runs: 1
proxy: {in_process: always}
"""


def _warm_up() -> None:
    """Import what a run needs and make one scripted run, so the workers inherit it all."""
    import anyio._backends._asyncio  # noqa: F401  (the MCP SDK's streams load it at first use)

    import runner.execute.run  # noqa: F401
    from runner.models.scripted import register_scripted_provider

    register_scripted_provider()
    import litellm
    from litellm.litellm_core_utils.logging_worker import GLOBAL_LOGGING_WORKER

    async def call() -> None:
        messages = [{"role": "user", "content": "warm up"}]
        await litellm.acompletion(model="scripted/naive", messages=messages)
        with contextlib.suppress(Exception):  # an optimisation: a failure costs only time
            await _warm_up_run()
        await asyncio.sleep(0.05)  # litellm queues its success logging a little later
        await GLOBAL_LOGGING_WORKER.flush()
        await GLOBAL_LOGGING_WORKER.stop()  # bound to this loop; each worker starts its own

    asyncio.run(call())


async def _warm_up_run() -> RunRecord:
    from runner.execute.cell import execute_run
    from runner.experiment import load_spec
    from runner.experiment.matrix import expand

    spec = load_spec("warm-up.yaml", text=_WARM_UP_SPEC)
    return await execute_run(expand(spec)[0], spec)


def _threads_ended(timeout_s: float = 10.0) -> int:
    """The threads running once those the warm-up started have ended (up to `timeout_s`).

    asyncio.run ends its default executor from a helper thread, which may still be finishing
    when asyncio.run returns: on a busy machine it was seen alive at the fork."""
    import threading

    deadline = time.monotonic() + timeout_s
    for thread in threading.enumerate():
        if thread is not threading.main_thread():
            thread.join(max(0.0, deadline - time.monotonic()))
    while (threads := threads_running()) != 1 and time.monotonic() < deadline:
        time.sleep(0.01)  # a thread that Python no longer lists, still leaving the kernel's
    return threads


def _serve_forks(parent: int, fds: list[int]) -> None:
    _die_with_parent(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent stops the pool (Ctrl-C, SIGTERM)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    _warm_up()
    threads = _threads_ended()
    if threads != 1:  # forking beside another thread could copy a lock it holds
        print(f"agent-harness pool: {threads} threads running, no worker started", file=sys.stderr)
        return
    sys.stdout.flush()
    sys.stderr.flush()
    # What the warm-up left (litellm's and the SDK's ~400,000 objects) is never garbage: out
    # of the collector's sight, the workers' full collections skip it and do not write to the
    # pages they share with this process (the gc module's advice for a fork server). The
    # warm-up run's own cyclic garbage is collected first, not frozen into every worker.
    gc.collect()
    gc.freeze()
    me = os.getpid()
    children = []
    for fd in fds:
        pid = os.fork()
        if pid == 0:
            try:
                for other in fds[len(children) + 1 :]:  # those before are closed already
                    os.close(other)
                _worker(me, fd)
            except BaseException:
                import traceback

                traceback.print_exc()  # the parent turns this worker's runs into errors
                os._exit(1)
            finally:
                os._exit(0)
        children.append(pid)
        os.close(fd)
    while sys.stdin.buffer.read(65536):  # EOF: the parent closed the pool or died
        pass
    deadline = time.monotonic() + STOP_GRACE_S
    for pid in children:  # each ends on its socket's EOF; one still there at the deadline is killed
        with contextlib.suppress(ChildProcessError):  # reaped already
            while os.waitpid(pid, os.WNOHANG)[0] == 0:  # not yet ended (a pid not yet reaped)
                if time.monotonic() >= deadline:
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
                    break
                time.sleep(0.05)


def _worker(server: int, fd: int) -> None:
    _die_with_parent(server)
    gc.set_threshold(*THRESHOLD)  # runner.execute.collector: what was frozen stays frozen
    asyncio.run(_work(socket.socket(fileno=fd)))


async def _work(sock: socket.socket) -> None:
    from runner.execute.cell import execute_run
    from runner.execute.run import failed_run

    reader, writer = await asyncio.open_connection(sock=sock)
    tasks: dict[int, asyncio.Task[None]] = {}

    async def one(job: int, cell: RunCell, patch_text: str | None, mode: str | None,
                  run_spec: ExperimentSpec) -> None:  # fmt: skip
        try:
            record = await execute_run(cell, run_spec, patch_text=patch_text, in_process=mode)
        except Exception as exc:  # execute_run records its own failures; this is a bug's last net
            record = failed_run(cell, run_spec, patch_text, f"{type(exc).__name__}: {exc}")
        finally:
            tasks.pop(job, None)
        writer.write(_frame(("done", job, record)))

    spec: ExperimentSpec | None = None
    writer.write(_frame(("hello", os.getpid())))
    while (message := await _read(reader)) is not None:
        if message[0] == "run":
            _, job, cell, patch_text, mode, new_spec = message
            spec = new_spec or spec
            assert spec is not None  # the parent sends it with a worker's first run
            tasks[job] = asyncio.create_task(one(job, cell, patch_text, mode, spec))
        elif message[0] == "cancel" and message[1] in tasks:
            tasks[message[1]].cancel()
    # The parent is gone or done: cancel what still runs (each run removes its folder).
    for task in list(tasks.values()):
        task.cancel()
    if tasks:
        await asyncio.wait(list(tasks.values()), timeout=STOP_GRACE_S)


if __name__ == "__main__":
    _serve_forks(int(sys.argv[1]), [int(fd) for fd in sys.argv[2:]])
