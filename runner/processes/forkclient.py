"""The command that stands for a forked process (runner/processes/forkserver.py): a tiny program, the
standard library only, run as `python -I -S forkclient.py SOCKET PROGRAM SKIP FRESH-ARGV...`.

It hands its own stdin, stdout and stderr to the runner's fork server, which forks PROGRAM
(`agent-harness` or `upstream`) with them, this process's environment and working folder, and
the arguments FRESH-ARGV[SKIP:]. Then it stands for that process: a SIGTERM, SIGINT, SIGHUP,
SIGQUIT, SIGUSR1 or SIGUSR2 it gets is passed on to it, and it ends as that process ended (its
exit code, or killed by the same signal). If it is killed itself, the server kills the forked
process. Where the server cannot fork it (no server, a variable read at import that differs),
it becomes FRESH-ARGV itself (exec): the same command, started the ordinary way.
"""

import json
import os
import signal
import socket
import struct
import sys

FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1,
             signal.SIGUSR2)  # fmt: skip
SERVER_GONE = 70  # EX_SOFTWARE: the server ended before the forked process did


def _ask(path, program, argv):
    """The server's answer to a fork request ({"pid": N} or {"fresh": reason}) and the
    connection, or None when there is no server to ask."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(path)
        body = json.dumps(
            {"program": program, "argv": argv, "env": dict(os.environ), "cwd": os.getcwd()}
        ).encode()
        data = struct.pack("!I", len(body)) + body
        socket.send_fds(conn, [data[:65536]], [0, 1, 2])
        if len(data) > 65536:
            conn.sendall(data[65536:])
        reader = conn.makefile("rb")
        answer = json.loads(reader.readline() or b"{}")
    except (OSError, ValueError):
        conn.close()
        return None, None, None
    return answer, conn, reader


def main():
    path, program, skip, fresh = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
    answer, conn, reader = _ask(path, program, fresh[skip:])
    if not answer or "pid" not in answer:
        if conn is not None:
            conn.close()
        os.execv(fresh[0], fresh)
    # The forked process has the pipes now: hold none of their ends open (a reader waits for
    # every writer's end), except a copy of stderr for this program's own last word.
    err = os.dup(2)
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.close(devnull)

    def forward(signum, _frame):
        try:
            conn.sendall(b'{"signal": %d}\n' % signum)
        except OSError:
            pass

    for sig in FORWARDED:
        signal.signal(sig, forward)
    line = reader.readline()
    if not line:
        os.write(err, b"agent-harness: the fork server ended before its process did\n")
        os._exit(SERVER_GONE)
    status = json.loads(line)["status"]
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [sig])
        os.kill(os.getpid(), sig)
    os._exit(os.waitstatus_to_exitcode(status) & 0xFF)


if __name__ == "__main__":
    main()
