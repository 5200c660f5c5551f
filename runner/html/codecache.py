"""Compiled report templates kept between processes (N2).

Compiling the report's five templates costs about 0.15-0.25 s of CPU in every process that
renders a report; loading their compiled code costs under 1 ms. `TemplateCodeCache` is a jinja
bytecode cache in the user's cache folder (`$XDG_CACHE_HOME/agent-harness/templates`, else
`~/.cache/...`) that is never trusted further than the code that reads it:

- stale: a file's name is the SHA-256 of everything the compiled code depends on (the
  template's name, file name and source; jinja's version; the interpreter's bytecode magic;
  the environment's options; the source files of the functions jinja may run while it
  compiles: filters and tests applied to constants and `finalize` on constant output are
  folded into the code), so a changed template, jinja, Python, option or filter is a
  different file and is compiled afresh;
- damaged: a file holds a digest of its key and its code; one that does not match (cut short,
  overwritten, copied from another key) is ignored and written again;
- hostile: the folder must be ours (owner = this user, a directory, not a symbolic link,
  writable by nobody else), and so must each file (a regular file, not followed through a
  link, writable by nobody else); otherwise the cache is not read or written. Whoever can
  write there can also edit the installed package, as with Python's own `__pycache__`, which
  trusts its files the same way (marshalled code next to the source it came from).

Anything that fails (no home, a read-only disk, a foreign folder) means compiling as before:
the cache only ever saves time, and the HTML is the same either way
(tests/unit/test_template_cache.py).

The folder stays small: whenever a new entry is written (a template, jinja or Python changed),
the oldest written beyond the newest `KEEP` go, and so do temporary files a killed writer left
more than an hour ago; only files of ours are removed, never through a link.
"""

from __future__ import annotations

import hashlib
import marshal
import os
import stat
import sys
import tempfile
import time
import types
from importlib.util import MAGIC_NUMBER
from pathlib import Path
from typing import Any

import jinja2
from jinja2.bccache import Bucket

_FORMAT = b"agent-harness template code 1\n"
_DIGEST = 32  # bytes of SHA-256
KEEP = 64  # entries: a dozen versions of the report's five templates
_TEMPORARY_AGE_S = 3600  # a `.tmp-` file older than this was left by a killed writer


def default_cache_dir() -> Path | None:
    """`$XDG_CACHE_HOME/agent-harness/templates` (else under `~/.cache`); None without a home."""
    base = os.environ.get("XDG_CACHE_HOME")
    if not base or not os.path.isabs(base):
        try:
            base = str(Path.home() / ".cache")
        except RuntimeError:
            return None
    return Path(base) / "agent-harness" / "templates"


def _environment_key(env: jinja2.Environment) -> str | None:
    """What in the environment the compiled code depends on: the options, and the code of
    every function jinja may call while compiling (it folds a filter or test applied to
    constants, and `finalize` on constant output, into the compiled code). None when a
    function's source cannot be read: then nothing is cached."""
    finalize = env.finalize
    functions = _functions([
        ("environment", type(env)), ("finalize", finalize), ("autoescape", env.autoescape),
        *sorted((f"filter {name}", f) for name, f in env.filters.items()),
        *sorted((f"test {name}", f) for name, f in env.tests.items()),
    ])
    if functions is None:
        return None
    return repr((
        jinja2.__version__, MAGIC_NUMBER, env.block_start_string, env.block_end_string,
        env.variable_start_string, env.variable_end_string, env.comment_start_string,
        env.comment_end_string, env.line_statement_prefix, env.line_comment_prefix,
        env.trim_blocks, env.lstrip_blocks, env.newline_sequence, env.keep_trailing_newline,
        env.optimized, env.is_async, env.autoescape if isinstance(env.autoescape, bool) else None,
        None if finalize is None else getattr(finalize, "jinja_pass_arg", None),
        functions,
        sorted(env.filters), sorted(env.tests), sorted(env.extensions),
        type(env).__module__, type(env).__qualname__, env.code_generator_class.__qualname__,
        env.context_class.__qualname__,
    ))  # fmt: skip


def _functions(functions: list[tuple[str, Any]]) -> list[tuple[str, ...]] | None:
    """Per (role, function): its module, name and the SHA-256 of its module's source file
    (jinja's and markupsafe's own are covered by jinja's version); None when a source cannot
    be read."""
    keys, sources = [], {}
    for role, function in functions:
        if not callable(function):
            keys.append((role, repr(function)))
            continue
        module = getattr(function, "__module__", None) or ""
        name = getattr(function, "__qualname__", repr(function))
        if module.split(".")[0] in ("jinja2", "markupsafe", "builtins"):
            keys.append((role, module, name))
            continue
        if module not in sources:
            sources[module] = _source_digest(module)
        if sources[module] is None:
            return None
        keys.append((role, module, name, sources[module]))
    return keys


def _source_digest(module: str) -> str | None:
    """SHA-256 of a Python module's source; a built-in or compiled module (`_operator`) stands
    for itself with the interpreter's version."""
    loaded = sys.modules.get(module)
    if loaded is None:
        return None
    path = getattr(loaded, "__file__", None)
    if not path or not path.endswith(".py"):
        return f"{module} of Python {sys.version}"
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return None


def _ours(st: os.stat_result, kind: int) -> bool:
    """A file or folder of this user that nobody else may write to."""
    return (
        stat.S_IFMT(st.st_mode) == kind
        and st.st_uid == os.geteuid()
        and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    )


class TemplateCodeCache(jinja2.BytecodeCache):
    """Compiled templates as files in one folder of this user's (see the module's notes)."""

    def __init__(self, directory: Path | None = None) -> None:
        # None: `default_cache_dir()`, read when a template is loaded (not at import, so the
        # environment of the process that renders decides, also in a forked process).
        self.directory = directory

    def get_source_checksum(self, source: str) -> str:
        """SHA-256 of the source (jinja's default is SHA-1)."""
        return hashlib.sha256(source.encode("utf-8")).hexdigest()

    def _key(self, bucket: Bucket) -> bytes | None:
        # bucket.key is jinja's hash of the name and file name; checksum the source's.
        env_key = _environment_key(bucket.environment)
        if env_key is None:
            return None
        return "\n".join((bucket.key, bucket.checksum, env_key)).encode("utf-8")

    def _folder(self) -> Path | None:
        folder = self.directory or default_cache_dir()
        if folder is None or not hasattr(os, "geteuid"):
            return None
        try:
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            if _ours(os.lstat(folder), stat.S_IFDIR):
                return folder
        except OSError:
            pass
        return None

    def load_bytecode(self, bucket: Bucket) -> None:
        """Set the bucket's code from a sound file of ours; leave it None otherwise."""
        folder = self._folder()
        key = self._key(bucket)
        if folder is None or key is None:
            return
        try:
            fd = os.open(folder / _name(key), os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            return
        try:
            with os.fdopen(fd, "rb") as f:
                if not _ours(os.fstat(f.fileno()), stat.S_IFREG):
                    return
                data = f.read()
        except OSError:
            return
        head, digest = data[: len(_FORMAT)], data[len(_FORMAT) : len(_FORMAT) + _DIGEST]
        payload = data[len(_FORMAT) + _DIGEST :]
        if head != _FORMAT or digest != hashlib.sha256(key + payload).digest():
            return
        try:
            code = marshal.loads(payload)
        except (EOFError, ValueError, TypeError):
            return
        if isinstance(code, types.CodeType):
            bucket.code = code

    def dump_bytecode(self, bucket: Bucket) -> None:
        """Write the bucket's code atomically (a temporary file renamed); errors are ignored."""
        folder = self._folder()
        key = self._key(bucket)
        if folder is None or key is None or bucket.code is None:
            return
        payload = marshal.dumps(bucket.code)
        data = _FORMAT + hashlib.sha256(key + payload).digest() + payload
        try:
            fd, temporary = tempfile.mkstemp(dir=folder, prefix=".tmp-")  # mode 0600
        except OSError:
            return
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(temporary, folder / _name(key))
        except OSError:
            _unlink(Path(temporary))
            return
        prune(folder, KEEP)


def prune(folder: Path, keep: int) -> None:
    """Remove the entries written before the newest `keep` and the temporary files a killed
    writer left; files that are not ours (or links) are left alone. Errors are ignored."""
    now = time.time()
    entries: list[tuple[float, str]] = []
    try:
        with os.scandir(folder) as found:
            for entry in found:
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if not _ours(st, stat.S_IFREG):
                    continue
                if entry.name.endswith(".code"):
                    entries.append((st.st_mtime, entry.name))
                elif entry.name.startswith(".tmp-") and now - st.st_mtime > _TEMPORARY_AGE_S:
                    _unlink(folder / entry.name)
    except OSError:
        return
    entries.sort(reverse=True)
    for _, name in entries[keep:]:
        _unlink(folder / name)


def _unlink(path: Path) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _name(key: bytes) -> str:
    return hashlib.sha256(key).hexdigest() + ".code"
