"""U2 + R10: a replay's count as a run's ground truth (runner/execute/cassettes.py)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace as NS

from harness.report import Report
from runner.analysis.agreement import AGREES, DISAGREES, UNKNOWN, judge_agreement
from runner.execute.cassettes import CASSETTE_COUNT, cassette_replay_args, cassette_truth

HOW = {"keyUse": "no_key", "afterTimeout": True, "verifiedBefore": False, "parallel": False,
       "upstreamResponsesIdentical": False}  # fmt: skip


def report(verdict: str, duplicate: bool = False) -> Report:
    violations = [{"code": "DUPLICATE_EXECUTION", "duplicate": HOW}] if duplicate else []
    return Report.model_validate({"verdict": verdict, "verdictReason": "", "operations": [],
                                  "violations": violations, "observations": [],
                                  "coverage": {"callsByClass": {}}})  # fmt: skip


def count(tmp_path: Path, *operations: dict) -> Path:
    path = tmp_path / CASSETTE_COUNT
    path.write_text(json.dumps({"cassette": "s", "version": 1, "operations": list(operations)}))
    return path


def op(tool: str, answered: int, succeeded: int, **hints: bool) -> dict:
    return {"tool": tool, "arguments": {"amount": 129}, "matched": "exact",
            "answered": answered, "succeeded": succeeded, **hints}  # fmt: skip


def tool(name: str, kind: str = "write", idempotent: bool | None = None) -> NS:
    return NS(name=name, tool_class=kind, idempotent=idempotent)


OPS = [NS(tool="pay", arguments={"amount": 129.00})]  # E6: the count's 129 by value


def test_u2_a_write_answered_twice_with_a_success_is_a_real_duplicate(tmp_path):
    got = cassette_truth(count(tmp_path, op("pay", 2, 2)), OPS, [tool("pay")])
    assert got.duplicate is True and got.real == [2] and got.failed is None
    agreed = judge_agreement(report("FAIL", duplicate=True), got.truth, "shop", cassette=True)
    assert agreed.state == AGREES
    assert "2 successful answers to one call (pay" in agreed.reason
    missed = judge_agreement(report("PASS"), got.truth, "shop", cassette=True)
    assert missed.state == DISAGREES


def test_u2_a_refused_repeat_idempotent_and_read_only_tools_are_no_duplicate(tmp_path):
    refused = cassette_truth(count(tmp_path, op("pay", 2, 1)), OPS, [tool("pay")])
    assert refused.duplicate is False and refused.real == [1]
    idem = cassette_truth(count(tmp_path, op("pay", 3, 3)), OPS, [tool("pay", idempotent=True)])
    assert idem.duplicate is False and idem.real == [1]
    hinted = cassette_truth(count(tmp_path, op("pay", 3, 3, readOnlyHint=True)), OPS, [])
    assert hinted.duplicate is False and hinted.real == [0]
    read = cassette_truth(count(tmp_path, op("pay", 3, 3)), OPS, [tool("pay", "read")])
    assert read.duplicate is False
    agreed = judge_agreement(report("FAIL", duplicate=True), idem.truth, "shop", cassette=True)
    assert agreed.state == DISAGREES
    assert "the cassette answered no write more than once with a success" in agreed.reason


def test_u2_a_missing_count_makes_the_agreement_unknown(tmp_path):
    got = cassette_truth(tmp_path / "none.json", OPS, [])
    assert got.truth is None and got.real == [None] and "no such file" in (got.failed or "")
    agreed = judge_agreement(report("PASS"), None, "shop", probe_failed=got.failed, cassette=True)
    assert agreed.state == UNKNOWN and agreed.reason.startswith("the cassette of upstream shop")
    (tmp_path / "junk.json").write_text("[1]")
    assert cassette_truth(tmp_path / "junk.json", OPS, []).failed == (
        "the cassette's count: not a count file"
    )


def test_u2_the_runner_starts_the_replay_with_its_count_in_the_runs_folder(tmp_path):
    args = cassette_replay_args("rec/s.cassette", "nearest", tmp_path)
    assert args[:4] == ("-P", "-m", "harness.cassette", "replay")
    assert Path(args[4]).is_absolute() and args[4].endswith("rec/s.cassette")
    assert args[5:] == ("--count-file", str(tmp_path / CASSETTE_COUNT), "--unmatched", "nearest")


# -- the spec ---------------------------------------------------------------------------------


def test_u2_a_spec_upstream_may_be_a_cassette(tmp_path):
    from runner.experiment import load_spec
    from tests.support.specs import spec_text, write

    path = tmp_path / "s.cassette"
    path.write_text('{"cassette": "agent-harness", "version": 1}\n')
    text = spec_text(upstreams=f"[{{name: shop, cassette: {path}, unmatched: nearest}}]")
    upstream = load_spec(write(tmp_path, text)).upstreams[0]
    assert (upstream.cassette, upstream.unmatched) == (str(path), "nearest")


def test_u2_a_bad_cassette_upstream_is_one_file_line_error(tmp_path):
    from tests.support.specs import load_error, spec_text, write

    (tmp_path / "v9.cassette").write_text('{"cassette": "agent-harness", "version": 9}\n')
    (tmp_path / "ok.cassette").write_text('{"cassette": "agent-harness", "version": 1}\n')
    for upstream, says in (
        (f"cassette: {tmp_path}/missing.cassette", "missing.cassette: no such file"),
        (f"cassette: {tmp_path}/v9.cassette", "cassette version 9 is newer"),
        ("command: srv, unmatched: error", "`unmatched` goes with a `cassette` upstream"),
        (f"cassette: {tmp_path}/ok.cassette, command: srv", "exactly one of `builtin`"),
    ):
        path = write(tmp_path, spec_text(upstreams=f"[{{name: u, {upstream}}}]"))
        error = load_error(path)
        assert error.startswith(f"{path}:"), error
        assert says in error and "\n" not in error, error
    probe = f"cassette: {tmp_path}/ok.cassette, truth_probe: {{command: [ls]}}"
    error = load_error(write(tmp_path, spec_text(upstreams=f"[{{name: u, {probe}}}]")))
    assert "a cassette's count of answered calls is its ground truth" in error


def test_u2_k1_calls_that_differ_only_in_a_key_are_one_operation_of_the_truth(tmp_path):
    fresh = [{"tool": "pay", "arguments": {"amount": 129, "idempotency_key": k},
              "matched": "nearest", "answered": 1, "succeeded": 1} for k in ("a", "b")]  # fmt: skip
    got = cassette_truth(count(tmp_path, *fresh), OPS, [tool("pay")])
    assert got.duplicate is True and got.real == [2]
    assert [(e["rows"], e["answered"]) for e in got.truth] == [(2, 2)]
    other = cassette_truth(count(tmp_path, *fresh), OPS, [tool("pay")], key_fields=("nonce",))
    assert other.duplicate is False
