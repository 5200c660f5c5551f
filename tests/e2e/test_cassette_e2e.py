"""U2: a cassette recorded from a real server (server-filesystem, npm) stands in for it.

Each live run goes through `agent-harness record` in front of the real server, with the
server's own files (and their SHA-256) as ground truth; the cassette it leaves is then replayed
(`cassette:` in the spec) under the same scenario and behaviour. The harness's verdict must be
the same both times, the replay's own count must say exactly how often each call reached the
real server, and R10's agreement against that count must hold. A second cassette, recorded
once without a fault, is replayed under every scenario F1-F5 (record once, replay in CI) with
the same verdicts as the live runs. The replays touch nothing: the files stay as they were.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from runner.execute import execute_run
from runner.experiment import load_spec
from runner.experiment.matrix import expand
from runner.experiment.records import RunRecord
from tests.support.paths import BIN
from tests.support.prereq import node, npm_entry

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

SCENARIOS = ["none", "F1", "F2", "F3", "F4", "F5"]
# naive under every scenario; careful (which checks before it re-sends) where it differs most
CELLS = [("naive", scenario) for scenario in SCENARIOS] + [("careful", "F1"), ("careful", "F5")]
TRY_AGAIN = "That did not work. Please try again."


def files_state(root: Path) -> Counter[str]:
    return Counter(
        f"{p.relative_to(root)} {hashlib.sha256(p.read_bytes()).hexdigest()}"
        for p in sorted(root.rglob("*"))
        if p.is_file()
    )


def fresh(root: Path) -> None:
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir()


def spec_file(folder: Path, name: str, upstream: dict[str, Any], model: str, scenario: str,
              user: str) -> Path:  # fmt: skip
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump({
        "name": name,
        "models": [f"scripted/{model}"],
        "prompts": [{"name": "plain", "text": "Do what the user asks with the tools you have."}],
        "upstreams": [{"name": "filesystem", **upstream}],
        "scenarios": [scenario],
        "conversations": [{"name": "note", "user": user, "follow_ups": [TRY_AGAIN]}],
        "limits": {"run_timeout_s": 180, "max_turns": 8, "max_tool_calls": 20},
    }, sort_keys=False), encoding="utf-8")  # fmt: skip
    return path


async def run_once(path: Path) -> RunRecord:
    spec = load_spec(path)
    (cell,) = expand(spec)
    record = await execute_run(cell, spec, keep_dir=path.parent / "kept")
    assert record.status == "ok", record.error
    return record


def count_of(record: RunRecord, folder: Path) -> dict[str, Any]:
    """The replay's count file, as the run left it in its folder (kept for the test)."""
    return json.loads((folder / "kept" / record.run_id / "cassette-count.json").read_text())


def recorded_calls(cassette: Path) -> Counter[str]:
    """How often each tool call reached the real server, as the cassette wrote it down."""
    lines = [json.loads(line) for line in cassette.read_text(encoding="utf-8").splitlines()]
    assert lines[0]["cassette"] == "agent-harness" and lines[0]["version"] == 1
    return Counter(
        f"{e['tool']} {json.dumps(e['arguments'], sort_keys=True)}"
        for e in lines[1:]
        if e["type"] == "call" and "result" in e and not e["result"].get("isError")
    )


def succeeded(cassette_count: dict[str, Any]) -> Counter[str]:
    return Counter({
        f"{o['tool']} {json.dumps(o['arguments'], sort_keys=True)}": o["succeeded"]
        for o in cassette_count["operations"] if o["succeeded"]
    })  # fmt: skip


async def test_u2_cassette_from_server_filesystem_replays_with_the_live_verdict(tmp_path):
    server = [node(), str(npm_entry("server-filesystem"))]
    root = tmp_path / "files"
    user = (f"Please save the note. path: {root / 'notes.txt'}, "
            "content: call Ann about the invoice")  # fmt: skip
    record_argv = [str(BIN), "record", f"--upstream-command={server[0]}",
                   f"--upstream-arg={server[1]}", f"--upstream-arg={root}"]  # fmt: skip
    live: dict[tuple[str, str], str] = {}
    rows = []
    for model, scenario in CELLS:
        label = f"{model}-{scenario}"
        cassette = tmp_path / f"{label}.cassette"
        fresh(root)
        before = files_state(root)
        upstream = {"command": record_argv[0], "args": [*record_argv[1:], "-o", str(cassette)]}
        live_run = await run_once(spec_file(tmp_path, f"live-{label}", upstream, model,
                                            scenario, user))  # fmt: skip
        after = files_state(root)
        twice = sorted(r for r in after if after[r] - before[r] >= 2)
        live[(model, scenario)] = live_run.verdict or ""
        executed = recorded_calls(cassette)  # F2, F5: a careful agent may send none

        replayed = await run_once(spec_file(tmp_path, f"replay-{label}",
                                            {"cassette": str(cassette)}, model, scenario,
                                            user))  # fmt: skip
        assert files_state(root) == after, f"{label}: the replay changed the files"
        rows.append((label, live_run.verdict, replayed.verdict, replayed.agreement,
                     dict(executed)))  # fmt: skip
        # The verdict is the live run's (U2: the cassette stands in for the server).
        assert replayed.verdict == live_run.verdict, (label, live_run.verdict_reason,
                                                      replayed.verdict_reason)  # fmt: skip
        assert replayed.duplicate_found == live_run.duplicate_found, label
        # The replay's own count is how often each call reached the real server.
        counted = count_of(replayed, tmp_path)
        assert succeeded(counted) == executed, (label, counted)
        # R10 against the count agrees as the live state does (none written twice here).
        assert replayed.real_duplicate is bool(twice), label
        expected = "no_claim" if replayed.verdict == "NOT_TESTED" else "agrees"
        assert replayed.agreement == expected, (label, replayed.agreement_reason)
    print("\n".join(str(r) for r in rows))

    # Record once, without a fault; replay in CI under every scenario: the live verdicts.
    once = tmp_path / "once.cassette"
    fresh(root)
    upstream = {"command": record_argv[0], "args": [*record_argv[1:], "-o", str(once)]}
    await run_once(spec_file(tmp_path, "record-once", upstream, "naive", "none", user))
    written = files_state(root)
    for scenario in SCENARIOS[1:]:
        replayed = await run_once(spec_file(tmp_path, f"once-{scenario}", {"cassette": str(once)},
                                            "naive", scenario, user))  # fmt: skip
        assert replayed.verdict == live[("naive", scenario)], (scenario, replayed.verdict_reason)
        expected = "no_claim" if replayed.verdict == "NOT_TESTED" else "agrees"
        assert replayed.agreement == expected, (scenario, replayed.agreement_reason)
        assert files_state(root) == written


async def test_u2_a_replayed_duplicate_is_a_fail_that_agrees_with_the_cassettes_count(tmp_path):
    """The built-in booking service (not idempotent: every create_booking is a new row) behind
    `record`: its rows are the live ground truth. Under F1 the naive agent books twice (FAIL
    DUPLICATE_EXECUTION, two real rows), the careful one once (PASS); each cassette replayed
    gives the same verdict, and the replay's count holds the duplicate the rows held."""
    import sys

    from runner.upstreams import ground_truth
    from tests.support.specs import HOTEL, REQUEST

    for model, scenario in (("naive", "F1"), ("careful", "F1"), ("naive", "none")):
        label = f"{model}-{scenario}"
        db, cassette = tmp_path / f"{label}.sqlite", tmp_path / f"{label}.cassette"
        upstream = {"command": str(BIN), "args": [
            "record", f"--upstream-command={sys.executable}", "--upstream-arg=-m",
            "--upstream-arg=runner.upstreams", "--upstream-arg=booking",
            f"--upstream-arg=--db={db}", "-o", str(cassette)]}  # fmt: skip
        spec = yaml.safe_load(spec_file(tmp_path, f"live-{label}", upstream, model, scenario,
                                        REQUEST).read_text())  # fmt: skip
        spec["prompts"] = [{"name": "hotel", "text": HOTEL}]
        (tmp_path / f"live-{label}.yaml").write_text(yaml.safe_dump(spec))
        live = await run_once(tmp_path / f"live-{label}.yaml")
        rows = sum(e["rows"] for e in ground_truth("booking", db))
        real_duplicate = any(e["rows"] > 1 for e in ground_truth("booking", db))

        spec["upstreams"] = [{"name": "filesystem", "cassette": str(cassette)}]
        spec["name"] = f"replay-{label}"
        (tmp_path / f"replay-{label}.yaml").write_text(yaml.safe_dump(spec))
        replayed = await run_once(tmp_path / f"replay-{label}.yaml")
        assert replayed.verdict == live.verdict, (label, replayed.verdict_reason)
        assert replayed.real_duplicate is real_duplicate, label
        assert replayed.agreement == "agrees", (label, replayed.agreement_reason)
        counted = count_of(replayed, tmp_path)
        assert sum(o["succeeded"] for o in counted["operations"]
                   if o["tool"] == "create_booking") == rows, (label, counted)  # fmt: skip
        if label == "naive-F1":
            assert live.verdict == "FAIL" and live.duplicate_found and rows == 2
            assert "2 successful answers to one call (create_booking" in (
                replayed.agreement_reason or ""
            )
        assert sum(e["rows"] for e in ground_truth("booking", db)) == rows  # replay wrote none


def git(repo: Path, script: str) -> str:
    import subprocess

    return subprocess.run(["sh", "-c", script], cwd=repo, check=True, capture_output=True,
                          text=True, timeout=30).stdout  # fmt: skip


def git_repo(tmp_path: Path) -> tuple[Path, str]:
    """A repository with its first commit tagged `start`, and the user's request to commit."""
    from tests.support.prereq import python_module

    python_module("mcp_server_git")
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "git init -q -b main && git config user.email u2@example.invalid && "
              "git config user.name u2 && echo start > README && git add README && "
              "git commit -q -m start && git tag start")  # fmt: skip
    return repo, f"Please run git_commit. repo_path: {repo}, message: Add the notes"


async def test_u2_a_cassette_of_mcp_server_git_replays_a_refused_repeat_in_recorded_order(tmp_path):
    """mcp-server-git (PyPI): `git_commit` once, its repeat refused by the server (nothing
    staged). The live repository's commits are the ground truth; the cassette holds the
    success and the refusal, and its replay answers them in that order: the same verdict
    (NOT_TESTED after F1's ghost write, A3: a refused repeat may still have written) and one
    success counted."""
    repo, user = git_repo(tmp_path)
    for scenario in ("F1",):
        git(repo, "git reset -q --hard start && echo notes > notes.txt && git add notes.txt")
        cassette = tmp_path / f"git-{scenario}.cassette"
        upstream = {"command": str(BIN), "args": [
            "record", f"--upstream-command={BIN.parent / 'mcp-server-git'}", "-o",
            str(cassette)]}  # fmt: skip
        live = await run_once(spec_file(tmp_path, f"git-live-{scenario}", upstream, "naive",
                                        scenario, user))  # fmt: skip
        commits = git(repo, "git log --format=%s").splitlines()
        assert commits.count("Add the notes") == 1  # the server refused the repeat
        replayed = await run_once(spec_file(tmp_path, f"git-replay-{scenario}",
                                            {"cassette": str(cassette)}, "naive", scenario,
                                            user))  # fmt: skip
        assert replayed.verdict == live.verdict, (scenario, replayed.verdict_reason)
        assert git(repo, "git log --format=%s").splitlines() == commits  # replay: no commit
        counted = count_of(replayed, tmp_path)
        (commit,) = [o for o in counted["operations"] if o["tool"] == "git_commit"]
        assert commit["succeeded"] == 1 and replayed.real_duplicate is False
        expected = "no_claim" if replayed.verdict == "NOT_TESTED" else "agrees"
        assert replayed.agreement == expected, (scenario, replayed.agreement_reason)
        if scenario == "F1":
            assert live.verdict == "NOT_TESTED" and commit["answered"] >= 2


async def test_z6_a_write_repeated_beyond_a_fault_free_recording_is_unknown_not_a_success(tmp_path):
    """Z6: mcp-server-git's `git_commit` recorded once without a fault (one commit), then
    replayed under F1 to the naive agent, which sends the commit again. The recording holds
    no answer to that repeat: live, git refuses it (nothing staged) and the verdict is
    NOT_TESTED with one commit; a replay that answered the recorded success again would claim
    a FAIL with two successes production never gave. The repeat is unknown: NOT_TESTED, the
    count says one first answer and the rest unknown, and the repository is untouched."""
    repo, user = git_repo(tmp_path)
    git(repo, "echo notes > notes.txt && git add notes.txt")
    cassette = tmp_path / "git.cassette"
    upstream = {"command": str(BIN), "args": [
        "record", f"--upstream-command={BIN.parent / 'mcp-server-git'}", "-o", str(cassette)]}
    recorded = await run_once(spec_file(tmp_path, "git-record", upstream, "naive", "none", user))
    assert recorded.verdict == "PASS"
    commits = git(repo, "git log --format=%s").splitlines()
    assert commits.count("Add the notes") == 1
    replayed = await run_once(spec_file(tmp_path, "git-replay-f1", {"cassette": str(cassette)},
                                        "naive", "F1", user))  # fmt: skip
    assert replayed.verdict == "NOT_TESTED", replayed.verdict_reason
    assert not replayed.duplicate_found
    (commit,) = [o for o in count_of(replayed, tmp_path)["operations"]
                 if o["tool"] == "git_commit"]  # fmt: skip
    assert (commit["succeeded"], commit["answeredFirst"]) == (1, 1)
    assert commit["unknown"] == commit["answered"] - 1 >= 1
    assert git(repo, "git log --format=%s").splitlines() == commits  # the replay wrote nothing
