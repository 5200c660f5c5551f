"""`agent-harness wrap CONFIG`: a client's own MCP configuration, its servers behind the proxy.

Wrap reads the configuration, rewrites the entries of the servers asked for (all by default)
so that the client starts `agent-harness proxy` in front of each, with a scenario and a report
file of its own per server, and keeps two files beside it:

- `CONFIG.agent-harness-backup`: the original, byte for byte (its owner only may read it: it
  holds whatever the original holds);
- `CONFIG.agent-harness-wrap.json`: what was wrapped, and the SHA-256 of the file wrap wrote.

`--unwrap` puts the original back byte for byte when the file is as wrap left it. When the
client or its user changed it since (a JSON file), the wrapped entries alone are put back from
the backup and every other change is kept. Nothing is written when anything is refused: every
server is checked before the file is touched.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

from harness.base.errors import InputFileError, OutputFileError, UsageError
from harness.base.infile import read_bytes
from harness.base.outfile import write_file
from harness.clients.entries import WrapPlan, parse_scenarios, report_name, scenario_for
from harness.clients.formats import ClientConfig, Wrapped, load

BACKUP_SUFFIX = ".agent-harness-backup"
RECORD_SUFFIX = ".agent-harness-wrap.json"
MAX_CONFIG_BYTES = 64 * 1024 * 1024  # Claude Code's ~/.claude.json grows with its history
RECORD_VERSION = 1


@dataclass(frozen=True)
class Paths:
    """A configuration and the two files wrap keeps beside it."""

    config: Path
    backup: Path
    record: Path

    @classmethod
    def of(cls, config: Path) -> Paths:
        return cls(
            config,
            config.with_name(config.name + BACKUP_SUFFIX),
            config.with_name(config.name + RECORD_SUFFIX),
        )


def _read(path: Path, what: str) -> bytes:
    try:
        return read_bytes(path, what, MAX_CONFIG_BYTES)
    except InputFileError as exc:
        raise UsageError(str(exc)) from None


def _text(data: bytes, shown: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"{shown}: not UTF-8 text") from None


def _load(data: bytes, path: Path) -> ClientConfig:
    return load(_text(data, str(path)), str(path), path.suffix.lower() == ".toml")


def default_report_dir(config: Path) -> Path:
    """Where a wrapped configuration's reports go by default: the user's state folder (a
    desktop client starts its servers in a folder of its own), one folder per config file."""
    from harness.proxy.verdict import state_folder

    digest = hashlib.sha256(str(config).encode()).hexdigest()[:8]
    return state_folder().parent / "wrapped" / f"{config.name}-{digest}"


def wrap_config(
    config: Path,
    servers: list[str] | None = None,
    scenarios: list[str] | None = None,
    report_dir: Path | None = None,
    proxy_flags: list[str] | None = None,
) -> list[str]:
    """Wrap the servers of `config` (all, or those named); the lines that say what was done.
    UsageError (one line) for anything it cannot rewrite safely; then nothing is written."""
    config = Path(os.path.abspath(config))
    paths = Paths.of(config)
    if paths.backup.exists() or paths.record.exists():
        raise UsageError(
            f"{config} is already wrapped (its backup is {paths.backup}); unwrap it first: "
            f"agent-harness wrap {config} --unwrap"
        )
    original = _read(config, "client configuration")
    client = _load(original, config)
    by_scenario = parse_scenarios(scenarios or [])
    names = client.names()
    chosen = names if not servers else servers
    for name in chosen:
        if name not in names:
            raise UsageError(f"{config}: no server {name!r} (it has {', '.join(names) or 'none'})")
    for name in by_scenario:
        if name is not None and name not in chosen:
            raise UsageError(f"--scenario {name}=...: {name!r} is not among the servers wrapped")
    if not chosen:
        raise UsageError(f"{config}: it lists no server")
    folder = Path(os.path.abspath(report_dir)) if report_dir else default_report_dir(config)
    taken: set[str] = set()
    done: list[Wrapped] = []
    problems: list[str] = []
    for name in chosen:
        plan = WrapPlan(
            scenario_for(name, by_scenario),
            str(folder / report_name(name, taken)),
            tuple(proxy_flags or ()),
        )
        try:
            done.append(client.wrap(name, plan))
        except UsageError as exc:
            problems.append(str(exc))
    if problems:
        raise UsageError("; ".join(problems) + ". Nothing was written")
    wrapped = client.result().encode("utf-8")
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"{folder}: cannot make the reports' folder: {exc.strerror}") from None
    _write_backup(paths, original)
    record = {
        "version": RECORD_VERSION,
        "config": str(config),
        "backup": paths.backup.name,
        "originalSha256": hashlib.sha256(original).hexdigest(),
        "wrappedSha256": hashlib.sha256(wrapped).hexdigest(),
        "servers": {w.name: {"scenario": w.scenario, "reportFile": w.report_file} for w in done},
    }
    try:
        write_file(paths.record, json.dumps(record, indent=2) + "\n", "wrap record")
        write_file(config, wrapped, "client configuration")
    except OutputFileError as exc:
        _forget(paths)
        raise UsageError(str(exc)) from None
    lines = [
        f"wrapped {w.name} ({w.upstream}): {f'scenario {w.scenario}' if w.scenario else 'no fault (a baseline)'}; "
        f"report {w.report_file}"
        for w in done
    ]
    lines.append(
        f"the original is kept in {paths.backup}; restart the client to use the wrapped "
        f"servers; agent-harness wrap {config} --unwrap puts the original back"
    )
    return lines


def _write_backup(paths: Paths, original: bytes) -> None:
    """The original, byte for byte, readable by its owner only."""
    try:
        fd = os.open(paths.backup, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise UsageError(f"{paths.backup}: cannot write the backup: {exc.strerror}") from None
    with os.fdopen(fd, "wb") as handle:
        handle.write(original)
        handle.flush()
        os.fsync(handle.fileno())


def _forget(paths: Paths) -> None:
    for path in (paths.backup, paths.record):
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def unwrap_config(config: Path) -> list[str]:
    """Put the original configuration back; the lines that say what was done."""
    config = Path(os.path.abspath(config))
    paths = Paths.of(config)
    if not paths.backup.exists():
        raise UsageError(f"{config} is not wrapped: there is no {paths.backup}")
    original = _read(paths.backup, "backup")
    current = _read(config, "client configuration")
    try:
        record = json.loads(_read(paths.record, "wrap record"))
        servers = list(record["servers"])
        wrapped_sha = record["wrappedSha256"]
    except (UsageError, ValueError, KeyError, TypeError):
        record, servers, wrapped_sha = None, [], None
    if hashlib.sha256(current).hexdigest() == wrapped_sha or current == original:
        restored = original
        said = f"restored {config} from {paths.backup}, byte for byte"
    else:
        # Changed since wrap (the client rewrote it, or its user): the wrapped entries alone.
        now, before = _load(current, config), _load(original, config)
        if record is None:
            raise UsageError(
                f"{config} changed since it was wrapped and {paths.record} is missing or "
                f"unreadable; its original is {paths.backup}: restore it by hand"
            )
        back = [name for name in servers if now.is_wrapped(name) and name in before.names()]
        for name in back:
            now.restore(name, before)  # type: ignore[arg-type]
        restored = now.result().encode("utf-8")
        said = (
            f"{config} changed since it was wrapped: put back the original entries of "
            f"{', '.join(back) or 'no server'} from {paths.backup}, kept every other change"
        )
    try:
        write_file(config, restored, "client configuration")
    except OutputFileError as exc:
        raise UsageError(str(exc)) from None
    _forget(paths)
    return [said]
