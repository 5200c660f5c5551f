"""Bounded specs (SPEC V13): YAML aliases, the matrix's size, references to the environment.

Issue 22: a 629-byte alias bomb in model `params` took 30 s and 358 MB (733 bytes: > 1 GB),
`--dry-run` of 100 models x 100 prompts x 10,000 runs began building ~40 GB of runs, and an
unset `os.environ/NAME` passed `--dry-run`. The alias budget is counted while the YAML is
composed (before any value is built), the matrix size is computed from the spec before a run
is built, and an unset variable fails before the first run. Memory is measured in the tests
with a stated ceiling (tracemalloc, this process's Python allocations); times are printed,
never asserted.
"""

from __future__ import annotations

import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from runner.experiment import SpecError, load_spec
from runner.experiment._experiment import DEFAULT_MAX_MATRIX_RUNS
from runner.experiment._load import MAX_ALIAS_NODES
from runner.experiment.matrix import expand
from tests.support.specs import bomb_text, huge_spec, write

CEILING_MB = 50  # generous: the refusals below allocate well under 5 MB

TAIL = """\
prompts: [{name: p, text: You book rooms.}]
upstreams: [{name: booking, builtin: booking}]
conversations: [{name: c, user: Please book a room.}]
"""


def measured(action: Callable[[], Any]) -> tuple[BaseException | None, float, float]:
    """(the exception raised, peak MB allocated, CPU seconds) of one call."""
    tracemalloc.start()
    started = time.process_time()
    raised: BaseException | None = None
    try:
        action()
    except BaseException as exc:  # noqa: BLE001 - returned to the test
        raised = exc
    seconds = time.process_time() - started
    peak = tracemalloc.get_traced_memory()[1] / 1e6
    tracemalloc.stop()
    return raised, peak, seconds


def test_v13_a_629_byte_alias_bomb_in_model_params_fails_fast_with_file_line(tmp_path: Path):
    text = bomb_text()
    assert len(text.encode()) == 629
    path = write(tmp_path, text)
    raised, peak, seconds = measured(lambda: load_spec(path))
    print(f"629-byte alias bomb: refused in {seconds:.3f} s CPU, peak {peak:.2f} MB allocated")
    assert isinstance(raised, SpecError), raised
    message = str(raised)
    # a..d stand for 8,289 values together; the first alias on the line of e passes 10,000.
    line = next(i for i, t in enumerate(text.splitlines(), 1) if "e: &e" in t)
    assert message.startswith(f"{path}:{line}: YAML aliases expand to more than")
    assert "\n" not in message
    assert peak < CEILING_MB, f"{peak:.1f} MB"


def test_v13_a_recursive_alias_is_refused_at_its_line(tmp_path: Path):
    text = "name: loop\nmodels:\n  - name: scripted/careful\n    params:\n" \
           "      extra_body: &x {again: *x}\n" + TAIL  # fmt: skip
    path = write(tmp_path, text)
    with pytest.raises(SpecError, match=rf"^{path}:5: the alias \*x stands inside the value"):
        load_spec(path)


def test_v13_aliases_that_share_a_value_still_work(tmp_path: Path):
    text = """\
name: shared
common: &common {temperature: 0.2, max_tokens: 300}
models:
  - {name: scripted/careful, label: a, params: {<<: *common, top_p: 0.9}}
  - {name: scripted/naive, label: b, params: *common}
prompts: [{name: p, text: &text You book rooms.}, {name: q, text: "Be careful."}]
upstreams: [{name: booking, builtin: booking}]
conversations: [{name: c, user: *text}]
"""
    # `common` is no spec key: the alias works, the unknown key is still an error.
    with pytest.raises(SpecError, match="common: unknown key"):
        load_spec(write(tmp_path, text))
    path = write(tmp_path, text.replace("common: &common", "description: &common", 1)
                 .replace("{temperature: 0.2, max_tokens: 300}", "x", 1))  # fmt: skip
    with pytest.raises(SpecError):
        load_spec(path)  # an alias to a string where params must be a mapping: a plain error
    ok = """\
name: shared
models:
  - {name: scripted/careful, label: a, params: &common {temperature: 0.2, max_tokens: 300}}
  - {name: scripted/naive, label: b, params: {<<: *common, top_p: 0.9}}
prompts: [{name: p, text: &text You book rooms.}]
upstreams: [{name: booking, builtin: booking}]
conversations: [{name: c, user: *text}]
"""
    spec = load_spec(write(tmp_path, ok))
    assert [m.params.as_kwargs() for m in spec.models] == [
        {"temperature": 0.2, "max_tokens": 300},
        {"temperature": 0.2, "max_tokens": 300, "top_p": 0.9},
    ]
    assert spec.conversations[0].user == "You book rooms."


def test_v13_the_alias_budget_counts_what_the_aliases_stand_for(tmp_path: Path):
    def spec_with(items: int, uses: int) -> str:
        values = ", ".join(str(i) for i in range(items))
        refs = "\n".join(f"        k{u}: *big" for u in range(uses))
        return ("name: budget\nmodels:\n  - name: scripted/careful\n    params:\n"
                f"      extra_body:\n        big: &big [{values}]\n{refs}\n" + TAIL)  # fmt: skip

    # Each alias of a 999-item list stands for 1,000 values: 10 of them fit, 11 do not.
    assert load_spec(write(tmp_path, spec_with(999, MAX_ALIAS_NODES // 1000)))
    with pytest.raises(SpecError, match="aliases expand to more than"):
        load_spec(write(tmp_path, spec_with(999, MAX_ALIAS_NODES // 1000 + 1)))


def test_v13_a_matrix_of_100_million_runs_is_refused_before_a_run_is_built(tmp_path: Path):
    path = write(tmp_path, huge_spec())
    raised, peak, seconds = measured(lambda: expand(load_spec(path)))
    print(f"100 x 100 x 10,000 spec: refused in {seconds:.2f} s CPU, peak {peak:.1f} MB allocated")
    assert isinstance(raised, SpecError), raised
    line = huge_spec().splitlines().index("runs: 10000") + 1
    assert str(raised) == (
        f"{path}:{line}: runs: the matrix has 100,000,000 runs (100 models x 100 prompts x "
        "1 patch arm x 1 scenario x 1 upstream-conversation pair x 10,000 repetitions), more "
        f"than limits.max_matrix_runs allows ({DEFAULT_MAX_MATRIX_RUNS:,}); make the spec "
        "smaller, or raise limits.max_matrix_runs"
    )
    assert peak < CEILING_MB, f"{peak:.1f} MB"


def test_v13_limits_max_matrix_runs_sets_the_cap(tmp_path: Path):
    small = huge_spec(models=3, prompts=2, runs=5)  # 30 runs
    with pytest.raises(SpecError, match="the matrix has 30 runs"):
        load_spec(write(tmp_path, small + "limits: {max_matrix_runs: 29}\n"))
    spec = load_spec(write(tmp_path, small + "limits: {max_matrix_runs: 30}\n"))
    assert len(expand(spec)) == 30
    # Conversations limited to some upstreams count only the pairs they meet.
    paired = small.replace(
        "upstreams: [{name: booking, builtin: booking}]",
        "upstreams: [{name: booking, builtin: booking}, {name: pay, builtin: payment}]",
    ).replace(
        "conversations: [{name: c, user: Please book a room.}]",
        "conversations: [{name: c, user: Book., upstreams: [booking]}, {name: d, user: Pay.}]",
    )
    spec = load_spec(write(tmp_path, paired))
    assert spec.matrix_size() == len(expand(spec)) == 3 * 2 * 3 * 5


def test_v13_expand_refuses_an_oversized_spec_built_in_code():
    spec = load_spec(Path(__file__).resolve().parents[2] / "experiments" / "example.yaml")
    bigger = spec.model_copy(update={"runs": 10_000, "limits": spec.limits.model_copy(
        update={"max_matrix_runs": 10})})  # fmt: skip
    with pytest.raises(SpecError, match="more than limits.max_matrix_runs allows"):
        expand(bigger)


