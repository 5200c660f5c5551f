"""Experiment specs for tests: a small valid spec as text with blocks replaced, a booking spec
written as YAML from fields, and the one-line error a bad spec gets."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from runner.experiment import SpecError, load_spec

REQUEST = "Please book a room. guest: Alice Example, date: 2026-12-01, nights: 2"
TRY_AGAIN = "That did not work. Please try again."
HOTEL = "You are the booking assistant of a hotel."

BLOCKS = {
    "models": "[scripted/careful]",
    "prompts": "[{name: p, text: Be careful.}]",
    "upstreams": "[{name: b, builtin: booking}]",
    "conversations": '[{name: c, user: "Book a room. guest: Al, date: 2026-12-01, nights: 1"}]',
}

MODELS_SPEC = """\
name: t
models:
{models}
prompts: [{{name: p, text: Be careful.}}]
upstreams: [{{name: b, builtin: booking}}]
conversations: [{{name: c, user: "Book a room. guest: Al, date: 2026-12-01, nights: 1"}}]
"""


def spec_text(**blocks: str | None) -> str:
    """A valid spec with some top-level blocks replaced (None drops one, new keys are added)."""
    merged = {**BLOCKS, **blocks}
    lines = []
    for key, value in merged.items():
        if value is not None:
            lines.append(f"{key}:{value}" if value.startswith("\n") else f"{key}: {value}")
    return "\n".join(lines) + "\n"


def write(tmp_path: Path, text: str, name: str = "exp.yaml") -> Path:
    """`text` as the file `name` in `tmp_path`."""
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def write_models(tmp_path: Path, models: str) -> Path:
    """A valid spec named t whose `models:` block is the given YAML lines (line 3 onwards)."""
    return write(tmp_path, MODELS_SPEC.format(models=models))


def load_error(path: Path) -> str:
    """The SpecError that loading `path` raises, as text."""
    with pytest.raises(SpecError) as info:
        load_spec(path)
    return str(info.value)


def write_spec(folder: Path, name: str, *, file: str | None = None, **fields: Any) -> Path:
    """A spec against the built-in booking service under F1 as YAML (`fields` replace the
    defaults: one careful model, one conversation, a 60 s run timeout); its path."""
    data: dict[str, Any] = {
        "name": name,
        "models": ["scripted/careful"],
        "prompts": [{"name": "p", "text": HOTEL}],
        "upstreams": [{"name": "booking", "builtin": "booking"}],
        "scenarios": ["F1"],
        "conversations": [{"name": "single", "user": REQUEST}],
        "limits": {"run_timeout_s": 60},
        **fields,
    }
    path = folder / (file or f"{name}.yaml")
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def handed_config(spec, tmp_path: Path, label: str = ""):
    """X1: the ProxyConfig a proxy process reads for the run of scenario `label` (the first
    cell without one): the runner's config, written to the file it hands the proxy
    (`proxy_command`) and read back by the proxy's own parser (`--config FILE`)."""
    from harness.proxy import parse, proxy_command
    from runner.execute.run import proxy_target
    from runner.experiment.matrix import expand

    cell = next(c for c in expand(spec) if not label or c.labels["scenario"] == label)
    argv = proxy_command(proxy_target(cell, spec, tmp_path).proxy_config(None, None), tmp_path)
    parsed = parse(argv[argv.index("proxy") + 1 :])
    assert parsed.config is not None
    return parsed.config, cell.seed


def plan_as_flags(spec, tmp_path: Path, label: str, flags: tuple[str, ...]):
    """X1: (the fault plan the proxy of the run of `label` reads, the plan `flags` give the
    proxy on its command line); RUN_SEED in `flags` stands for the seed the run chose."""
    from harness.proxy import parse

    config, seed = handed_config(spec, tmp_path, label)
    flags = tuple(str(seed) if flag == "RUN_SEED" else flag for flag in flags)
    # --listen: an HTTP-only fault needs the agent on HTTP; it changes nothing in the plan.
    flagged = parse(["--upstream-command", "x", "--listen", "127.0.0.1:0", *flags]).config
    assert flagged is not None
    return config.plan, flagged.plan


# -- bounded specs (V13): an alias bomb and a huge matrix ---------------------------------

SHORT_TAIL = """\
prompts: [{name: p, text: hi}]
upstreams: [{name: b, builtin: booking}]
conversations: [{name: c, user: hi}]
"""


# The billion laughs in a model's `params`: nine levels of nine aliases, 9**9 strings.
BOMB_HEAD = """\
name: bomb
models:
  - name: scripted/careful
    params:
      extra_body:
        a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
        b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
        c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
        d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
        e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
        f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
        g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
        h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
        i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
"""


def bomb_text(size: int = 629) -> str:
    """The bomb, padded with a comment to the issue's 629 bytes."""
    text = BOMB_HEAD + SHORT_TAIL
    pad = size - len(text.encode()) - len("#\n")
    assert pad >= 0
    return text + "#" + "x" * pad + "\n"


def huge_spec(models: int = 100, prompts: int = 100, runs: int = 10_000, extra: str = "") -> str:
    lines = ["name: huge", "models:"]
    lines += [f"  - {{name: scripted/careful, label: m{i}, params: {{max_tokens: {i + 1}}}}}"
              for i in range(models)]  # fmt: skip
    lines += ["prompts:"] + [f"  - {{name: p{i}, text: prompt {i}}}" for i in range(prompts)]
    lines += ["upstreams: [{name: booking, builtin: booking}]",
              "conversations: [{name: c, user: Please book a room.}]", f"runs: {runs}", extra]  # fmt: skip
    return "\n".join(lines) + "\n"
