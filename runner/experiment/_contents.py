"""V18: a run's identity includes what the files it reads hold, not only their names.

A cassette re-recorded at the same path, a truth probe's script or an agent's script edited
in place: each is a new condition, so `run` (resume) runs it again instead of skipping it as
"already stored". Prompt and patch files count already (their text is the prompt's identity).

Which files: an upstream's cassette; in a command (an upstream's, a command agent's, a truth
probe's) the program when it is named by a path and every argument that names an existing
script (`SCRIPT_SUFFIXES`). Data files a command is handed (a SQLite file, a JSON store) are
state that runs change, not the condition: they are not hashed, or no run could ever resume.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence

SCRIPT_SUFFIXES = (".py", ".js", ".mjs", ".cjs", ".ts", ".mts", ".sh", ".bash", ".rb", ".pl",
                   ".php", ".lua", ".jar")  # fmt: skip
# (absolute path, size, mtime in ns) -> SHA-256: a matrix asks for the same files per cell.
_DIGESTS: dict[tuple[str, int, int], str] = {}


def digest(path: str, cwd: str | None = None) -> str | None:
    """The SHA-256 of a regular file's content (`path` relative to `cwd`), None when it is not
    one (then the spec's own checks or the run say why)."""
    full = os.path.abspath(os.path.join(cwd or ".", path))
    try:
        st = os.stat(full)
    except OSError:
        return None
    if not os.path.isfile(full):
        return None
    key = (full, st.st_size, st.st_mtime_ns)
    known = _DIGESTS.get(key)
    if known is None:
        sha = hashlib.sha256()
        try:
            with open(full, "rb") as f:
                while chunk := f.read(1 << 20):
                    sha.update(chunk)
        except OSError:
            return None
        known = _DIGESTS[key] = sha.hexdigest()
    return known


def command_files(argv: Sequence[str], cwd: str | None = None) -> dict[str, str]:
    """The program (when named by a path) and the scripts of a command, by the path given,
    with their content digests."""
    named = [argv[0]] if argv and os.sep in argv[0] else []
    named += [a for a in argv[1:] if a.lower().endswith(SCRIPT_SUFFIXES)]
    found = {path: digest(path, cwd) for path in named}
    return {path: sha for path, sha in found.items() if sha is not None}
