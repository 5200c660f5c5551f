"""Replace a small file in one step: exclusive temp file beside it, then rename (as O4)."""

from __future__ import annotations

import os
import secrets
from pathlib import Path


def write_atomically(path: Path, data: str | bytes) -> None:
    """A reader (or a crash) sees the old file or the new one, never half of it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    payload = data.encode("utf-8") if isinstance(data, str) else data
    try:
        with open(tmp, "xb") as handle:  # exclusive: never write through a planted file
            handle.write(payload)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
