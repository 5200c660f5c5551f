"""Round 4's fuzzing of command agents' specs (U1, V15): a seeded generator writes agents whose
argv mixes ordinary words, placeholders (known, unknown, needing a model or HTTP) and secrets
in every place an argv holds one (`--api-key VALUE`, `--token=VALUE`, `API_TOKEN=VALUE`, a
URL's user info, credential shapes), and whose env mixes secrets, `os.environ/NAME`
references and placeholders.

Whatever comes: a spec loads or is refused in lines `FILE:LINE: ...` (never another error);
a loaded one is stored (its spec text and each run's parameters) with every secret gone, its
first 12 characters too, and nothing else taken out (ordinary words, `--max-tokens 100`,
`--idempotency-key` and placeholders stay). Some generated agents run for real
(`agent-harness run`): they print their argv and env, and no secret reaches the store or the
HTML report.

Seeds: 1 and 2 in `make test`; AGENT_SPEC_FUZZ_SEED=N replays seed N alone (docs/security.md).
"""

from __future__ import annotations

import json
import os
import random
import string
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from runner.experiment import AgentSpec, SpecError, load_spec
from runner.store.redact import REDACTED, Redactor
from tests.support.paths import ROOT
from tests.support.runkit import cli
from tests.support.specs import REQUEST

pytestmark = pytest.mark.slow
SEEDS = [int(os.environ["AGENT_SPEC_FUZZ_SEED"])] if "AGENT_SPEC_FUZZ_SEED" in os.environ else [1, 2]
SPECS_PER_SEED = 40
RUNS_PER_SEED = 2
HANDSHAKE = ROOT / "tests" / "support" / "agents" / "handshake.py"
SECRET_FLAGS = ["--api-key", "--token", "--password", "--client-secret", "--auth"]
SECRET_NAMES = ["API_TOKEN", "DB_PASSWORD", "OPENAI_API_KEY", "STRIPE_KEY", "SESSION_COOKIE"]
WORDS = ["run", "--verbose", "-v", "--max-tokens", "100", "--idempotency-key", "k-1", "--key",
         "5", "é", "日本", "", " ", "a b", "--", "-", "x" * 200]  # fmt: skip
PLACEHOLDERS = ["{mcp_config}", "{workdir}", "{model}", "{model_base_url}", "{mcp_url}",
                "{nope}", "--config={mcp_config}", "{workdir}/out"]  # fmt: skip


def _secret(rng: random.Random) -> str:
    """A secret that can only be found by where it stands (no credential shape)."""
    return "s3cr" + "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(20))


def _shape(rng: random.Random) -> str:
    """A secret that a credential's shape gives away, wherever it stands."""
    alnum = string.ascii_letters + string.digits
    return rng.choice([
        "sk-proj-" + "".join(rng.choice(alnum) for _ in range(32)),
        "ghp_" + "".join(rng.choice(alnum) for _ in range(36)),
        "AKIA" + "".join(rng.choice(string.ascii_uppercase + string.digits) for _ in range(16)),
    ])  # fmt: skip


def agent(rng: random.Random, secrets: list[str]) -> tuple[dict[str, Any], list[str | None]]:
    """A generated agent entry and, per argv position, the secret it holds there (or None)."""
    argv: list[str] = [sys.executable, "AGENT_SCRIPT"]
    held: list[str | None] = [None, None]
    for _ in range(rng.randrange(1, 8)):
        roll = rng.random()
        if roll < 0.35:
            word = rng.choice(WORDS)
            argv.append(word)
            # A word after a secret flag is that flag's value (a secret by place).
            held.append(None)
        elif roll < 0.5:
            argv.append(rng.choice(PLACEHOLDERS))
            held.append(None)
        else:
            value = _shape(rng) if rng.random() < 0.3 else _secret(rng)
            secrets.append(value)
            form = rng.randrange(4)
            if form == 0:
                argv += [rng.choice(SECRET_FLAGS), value]
                held += [None, value]
            elif form == 1:
                argv.append(f"{rng.choice(SECRET_FLAGS)}={value}")
                held.append(value)
            elif form == 2:
                argv.append(f"{rng.choice(SECRET_NAMES)}={value}")
                held.append(value)
            else:
                argv.append(f"https://user:{value}@example.com/x")
                held.append(value)
    env: dict[str, str] = {}
    for i in range(rng.randrange(4)):
        roll = rng.random()
        name = rng.choice([*SECRET_NAMES, "PLAIN", "MODE"]) + str(i)
        if roll < 0.5:
            env[name] = value = _secret(rng)
            secrets.append(value)
        elif roll < 0.75:
            env[name] = "os.environ/FUZZ_REFERENCED"
        else:
            env[name] = rng.choice(PLACEHOLDERS)
    entry: dict[str, Any] = {"name": f"a{rng.randrange(10**6)}", "command": argv,
                             "transport": rng.choice(["stdio", "http"])}  # fmt: skip
    if env:
        entry["env"] = env
    if rng.random() < 0.5:
        entry["model"] = "scripted/careful"
    return entry, held


def spec_file(folder: Path, entry: dict[str, Any], script: Path) -> Path:
    entry = {**entry, "command": [str(script) if a == "AGENT_SCRIPT" else a
                                  for a in entry["command"]]}  # fmt: skip
    data = {
        "name": "agentfuzz",
        "agents": [entry],
        "prompts": [{"name": "p", "text": "You book hotel rooms."}],
        "upstreams": [{"name": "booking", "builtin": "booking"}],
        "scenarios": ["none"],
        "conversation": {"name": "c", "user": REQUEST},
    }
    path = folder / "agentfuzz.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    return path


def _gone(secrets: list[str], text: str) -> list[str]:
    """The secrets (or their first 12 characters) still in `text`."""
    return [s for s in secrets if s[:12] in text]


@pytest.mark.parametrize("seed", SEEDS)
def test_v15_generated_agents_load_or_fail_in_lines_and_are_stored_without_secrets(
    tmp_path, seed, monkeypatch
):
    # U1, V15
    monkeypatch.setenv("FUZZ_REFERENCED", "referenced-value-0123456789")
    rng = random.Random(seed)
    script = tmp_path / "agent.py"
    script.write_text("print('hi')\n")
    loaded = 0
    for case in range(SPECS_PER_SEED):
        secrets: list[str] = []
        entry, held = agent(rng, secrets)
        path = spec_file(tmp_path, entry, script)
        where = f"seed {seed} case {case}: {entry['command'][2:]}"
        try:
            spec = load_spec(path)
        except SpecError as exc:
            lines = str(exc).splitlines()
            assert lines and all(line.startswith(f"{path}:") for line in lines), (where, lines)
            continue
        loaded += 1
        text = path.read_text()
        redactor = Redactor.for_spec_text(text)
        stored_text = redactor.spec_text(text)
        (agent_spec,) = spec.agents
        assert isinstance(agent_spec, AgentSpec)
        params = redactor.params_json(json.dumps(agent_spec.stored_config(), sort_keys=True))
        for what, stored in (("spec text", stored_text), ("run parameters", params)):
            assert not _gone(secrets, stored), f"{where}: {what} holds {_gone(secrets, stored)}"
        # Nothing else is taken out: every argument without a secret is stored as written.
        command = json.loads(params)["agent"]["command"]
        for arg, secret, kept in zip(entry["command"][2:], held[2:], command[2:], strict=True):
            if secret is None:
                assert kept == arg, f"{where}: {arg!r} stored as {kept!r}"
            else:
                assert REDACTED in kept, f"{where}: {arg!r} stored as {kept!r}"
        assert yaml.safe_load(stored_text)["agents"][0]["name"] == entry["name"]
    assert loaded >= SPECS_PER_SEED // 4  # the generator makes loadable specs, mostly


AGENT_PRINTS = (
    f"import runpy; runpy.run_path({str(HANDSHAKE)!r})\n"  # a session, so that the run counts
    "import json, os, sys\n"
    "print(json.dumps(sys.argv[1:]))\n"
    "print(json.dumps({k: v for k, v in os.environ.items() if k[:1] in 'AOSDPM'}))\n"
    "sys.stderr.write(' '.join(sys.argv[1:]) + '\\n')\n"
)


@pytest.mark.parametrize("seed", SEEDS)
def test_v15_generated_agents_that_print_their_secrets_leave_none_in_the_store(
    tmp_path, seed, monkeypatch
):
    # U1, V15 on real runs: the agent prints every argument and env value it was given.
    monkeypatch.setenv("FUZZ_REFERENCED", "referenced-value-0123456789")
    rng = random.Random(seed * 31)
    script = tmp_path / "agent.py"
    script.write_text(AGENT_PRINTS)
    ran = 0
    while ran < RUNS_PER_SEED:
        secrets: list[str] = []
        entry, _ = agent(rng, secrets)
        entry["transport"] = "http"  # the runner starts the proxy: the agent needs no client
        entry["command"] = [a for a in entry["command"] if "{nope}" not in a]
        entry.pop("model", None)
        entry["command"] = [a.replace("{model}", "m").replace("{model_base_url}", "u")
                            for a in entry["command"]]  # fmt: skip
        entry["env"] = {k: v for k, v in entry.get("env", {}).items()
                        if "{model" not in v and "{nope}" not in v}  # fmt: skip
        folder = tmp_path / f"run{ran}"
        folder.mkdir(exist_ok=True)
        path = spec_file(folder, entry, script)
        try:
            load_spec(path)
        except SpecError:
            continue  # the first test checks refusals; these runs are about what runs
        done = cli(folder, "run", str(path), "--db", "runs.duckdb")
        where = f"seed {seed} run {ran}: {entry['command'][2:]}"
        assert done.returncode == 0, (where, done.stdout[-2000:], done.stderr[-2000:])
        report = cli(folder, "report", "--db", "runs.duckdb", "-o", "report.html")
        assert report.returncode == 0, report.stderr
        for name in ("runs.duckdb", "report.html"):
            data = b"".join(p.read_bytes() for p in folder.iterdir() if p.name.startswith(name))
            leaked = [s for s in secrets if s[:12].encode() in data]
            assert not leaked, f"{where}: {name} holds {leaked}"
        ran += 1
