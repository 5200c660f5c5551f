"""V3: the one redaction step (runner.store.redact), shape by shape, and where the store applies it."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
import yaml

from runner.experiment.records import RunRecord, TranscriptEntry
from runner.store import Store
from runner.store.redact import REDACTED, Redactor, secret_name

SPEC = """\
name: x  # the key is sk-live-commentcopy01 (pasted by mistake)
models:
  - name: openai/gpt-4o
    params:
      api_key: os.environ/OPENAI_KEY
      api_base: https://alice:hunter2-secret@llm.example.com/v1
      extra_headers: {Authorization: Bearer sk-live-commentcopy01, X-Title: shown}
      aws_secret_access_key: &shared awssecret-0123456789
      max_tokens: 100
upstreams:
  - name: u
    command: node
    args: [server.js, --token, argtoken-000111, "--api-key=argtoken-000222", "pg://u:pw@db/x"]
    env:
      DB_PASSWORD: envpass
      PRIVATE: |
        multi-line
        secret-block
      DEBUG: "1"
      AGAIN: *shared
"""


@pytest.mark.parametrize(
    ("name", "secret"),
    [("api_key", True), ("Authorization", True), ("X-Api-Key", True), ("xApiKey", True),
     ("aws_secret_access_key", True), ("Proxy-Authorization", True), ("HF_TOKEN", True),
     ("max_tokens", False), ("keep_alive", False), ("top_k", False), ("api_base", False),
     ("TOKENIZERS_PARALLELISM", False), ("PWD", False)],
)
def test_v3_secret_names(name, secret):
    assert secret_name(name) is secret


def test_v3_spec_text_keeps_its_layout_and_loses_its_secrets():
    redactor = Redactor.for_spec_text(SPEC)
    text = redactor.spec_text(SPEC)
    for secret in ("hunter2-secret", "sk-live-commentcopy01", "awssecret-0123456789",
                   "argtoken-000111", "argtoken-000222", "envpass", "secret-block", "u:pw"):
        assert secret not in text, secret
    data = yaml.safe_load(text)  # still a spec
    params = data["models"][0]["params"]
    assert params["api_key"] == "os.environ/OPENAI_KEY"  # a reference stays a reference
    assert params["api_base"] == f"https://{REDACTED}@llm.example.com/v1"
    assert params["extra_headers"] == {"Authorization": REDACTED, "X-Title": "shown"}
    assert (params["aws_secret_access_key"], params["max_tokens"]) == (REDACTED, 100)
    upstream = data["upstreams"][0]
    assert upstream["args"] == ["server.js", "--token", REDACTED, f"--api-key={REDACTED}",
                                f"pg://{REDACTED}@db/x"]
    assert upstream["env"] == {"DB_PASSWORD": REDACTED, "PRIVATE": REDACTED, "DEBUG": REDACTED,
                               "AGAIN": REDACTED}
    assert text.startswith("name: x  # the key is [REDACTED] (pasted by mistake)\n")


def test_v3_free_text_loses_known_secrets_url_credentials_and_bearer_tokens(monkeypatch):
    monkeypatch.setenv("OPENAI_KEY", "sk-from-the-environment-42")
    monkeypatch.setenv("SOME_SERVICE_TOKEN", "token-of-the-ci-runner-7")
    redactor = Redactor.for_spec_text(SPEC)
    text = redactor.text(
        "401 from https://bob:other-pass@api.example.com: key sk-from-the-environment-42, "
        "header Authorization: Basic dXNlcjpwYXNz, Bearer abcdefghijklmnopqrstu, "
        "CI token-of-the-ci-runner-7, copied hunter2-secret"
    )
    assert text == (
        f"401 from https://{REDACTED}@api.example.com: key {REDACTED}, header "
        f"Authorization: {REDACTED}, Bearer {REDACTED}, CI {REDACTED}, copied {REDACTED}"
    )
    assert redactor.text("basic information about a bearer") == "basic information about a bearer"


def test_v3_params_keep_references_and_ordinary_values():
    params = {"api_key": "os.environ/KEY", "extra_body": {"client_secret": 42, "n": 1},
              "api_base": "http://u:p@h/", "temperature": 0.2}
    assert Redactor().params(params) == {
        "api_key": "os.environ/KEY", "extra_body": {"client_secret": REDACTED, "n": 1},
        "api_base": f"http://{REDACTED}@h/", "temperature": 0.2,
    }


def test_v3_the_store_redacts_every_run_and_the_spec_it_is_given(tmp_path):
    t0 = datetime(2026, 11, 1, tzinfo=UTC)
    record = RunRecord(
        run_id="r1", experiment="x", cell_id="c", repetition=0, model="m",
        model_params_json=json.dumps({"extra_headers": {"Authorization": "Bearer short"}}),
        prompt="p", patch_arm="none", upstream="u", scenario="F1", conversation="c",
        status="error", error="cannot reach https://alice:hunter2-secret@llm.example.com/v1",
        started_at=t0, finished_at=t0, harness_version="0",
        transcript=[TranscriptEntry(idx=0, role="assistant", content="the key awssecret-0123456789")],
    )
    with Store.open(tmp_path / "runs.duckdb", redactor=Redactor.for_spec_text(SPEC)) as store:
        store.save_experiment("x", "x.yaml", SPEC)
        store.save_runs([record])
        row = store.load_runs("x").row(0, named=True)
        spec_text = store.load_experiments("x")["spec_text"][0]
        transcript = store.load_children("transcripts", ["r1"])["content"][0]
    assert json.loads(row["model_params_json"]) == {"extra_headers": {"Authorization": REDACTED}}
    assert row["error"] == f"cannot reach https://{REDACTED}@llm.example.com/v1"
    assert transcript == f"the key {REDACTED}"
    assert "hunter2" not in spec_text and "awssecret" not in spec_text
    raw = (tmp_path / "runs.duckdb").read_bytes()
    assert b"hunter2-secret" not in raw and b"awssecret-0123456789" not in raw
