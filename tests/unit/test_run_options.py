"""`agent-harness run` options for many machines (G1, G2): bad combinations are one clear line."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from runner.execute.experiment import run_experiment

SPEC = """\
name: opts
models: [scripted/careful]
prompts: [{name: p, text: You are a hotel booking assistant.}]
upstreams: [{name: booking, builtin: booking}]
conversations: [{name: c, user: "Please book a room."}]
"""


def run(tmp_path: Path, **options: object) -> int:
    spec = tmp_path / "opts.yaml"
    spec.write_text(SPEC)
    base = dict(
        db=tmp_path / "x.duckdb", concurrency=None, resume=True, retry_errors=False, only=[],
        dry_run=False, in_process=None,
    )  # fmt: skip
    return run_experiment(spec, **{**base, **options})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("options", "fragment"),
    [
        ({"executor": "dask"}, "--executor must be local or ray"),
        ({"address": "auto"}, "--address works only with --executor ray"),
        ({"cpus_per_run": 0.5}, "--cpus-per-run works only with --executor ray"),
        ({"shard": "3/2"}, "--shard '3/2': expected I/N"),
    ],
)
def test_g1_g2_bad_options_are_one_line_and_store_nothing(tmp_path, capsys, options, fragment):
    assert run(tmp_path, **options) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and fragment in err, err
    assert not (tmp_path / "x.duckdb").exists()


def test_g1_executor_ray_without_ray_installed_says_how_to_install_it(
    tmp_path, capsys, monkeypatch
):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now fails as if not installed
    assert run(tmp_path, executor="ray") == 1
    err = capsys.readouterr().err
    assert "pip install 'agent-harness[ray]'" in err and err.count("\n") == 1, err
    assert not (tmp_path / "x.duckdb").exists()


def test_g2_dry_run_lists_only_the_shard(tmp_path, capsys):
    spec = tmp_path / "opts.yaml"
    spec.write_text(
        SPEC.replace("models: [scripted/careful]", "models: [scripted/careful]\nruns: 10")
    )
    base = dict(db=tmp_path / "x.duckdb", concurrency=None, resume=True, retry_errors=False,
                only=[], dry_run=True, in_process=None)  # fmt: skip
    sizes = []
    for part in ("1/2", "2/2"):
        assert run_experiment(spec, **base, shard=part) == 0  # type: ignore[arg-type]
        out = capsys.readouterr().out
        sizes.append(int(out.split(" runs each = ")[1].split()[0]))
    assert sum(sizes) == 10 and all(sizes)
