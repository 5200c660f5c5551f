"""The experiment spec (R2): YAML -> a frozen ExperimentSpec; every error names file, line, field."""

import pickle
from pathlib import Path

import pytest
from pydantic import ValidationError

from runner.experiment import FrozenDict, load_spec
from tests.support.specs import load_error, plan_as_flags, spec_text, write

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"
MARK = "# <-"  # marks the line an error must name


# R2
@pytest.mark.parametrize("path", sorted(EXPERIMENTS.glob("*.yaml")), ids=lambda p: p.name)
def test_every_spec_in_experiments_loads(path):
    spec = load_spec(path)
    assert spec.agents_under_test and spec.conversations  # models, or command agents (U1)
    assert all(p.text for p in spec.prompts)  # prompt files were read


# R2
def test_the_offline_example_uses_scripted_models_and_auto_patches():
    spec = load_spec(EXPERIMENTS / "example.yaml")
    assert all(m.name.startswith("scripted/") for m in spec.models)
    assert [p.kind for p in spec.patches] == ["none", "auto"]
    assert {u.builtin for u in spec.upstreams} == {"booking", "booking-nosearch"}
    assert any(c.follow_ups for c in spec.conversations)
    assert any(not c.follow_ups for c in spec.conversations)


# R2, issue 37: 500 runs waiting on a slow model at once is a real shape; past 1,024, an error
def test_r2_concurrency_takes_500_runs_in_flight_and_refuses_past_1024(tmp_path):
    spec = load_spec(write(tmp_path, spec_text(concurrency="500")))
    assert spec.concurrency == 500
    capped = load_spec(write(tmp_path, spec_text(concurrency_per_model='{"scripted/*": 1024}')))
    assert capped.concurrency_per_model == {"scripted/*": 1024}
    message = load_error(write(tmp_path, spec_text(concurrency="1025  " + MARK)))
    assert "concurrency" in message and "1024" in message


# R2
def test_defaults_fill_everything_optional(tmp_path):
    spec = load_spec(write(tmp_path, spec_text(), "my-exp.yaml"))
    assert spec.name == "my-exp"  # the file stem
    assert spec.description is None
    assert [p.kind for p in spec.patches] == ["none"]
    assert [s.label for s in spec.scenarios] == ["none"]
    assert (spec.runs, spec.concurrency, spec.seed) == (1, 4, 0)
    limits = spec.limits
    assert (limits.max_turns, limits.max_tool_calls) == (8, 20)
    assert (limits.model_timeout_s, limits.run_timeout_s, limits.upstream_timeout_s) == (
        120,
        600,
        60,
    )
    assert (limits.max_tokens, limits.budget_usd) == (None, None)
    assert (spec.retry.attempts, spec.retry.backoff_s, spec.retry.max_backoff_s) == (4, 1.0, 30)
    assert (spec.proxy.fault_delay_ms, spec.proxy.audit_tools, spec.proxy.in_process) == (
        0,
        "off",
        "auto",
    )


# R2
def test_shorthands_expand_to_their_full_form(tmp_path):
    text = spec_text(
        models="[scripted/naive]",
        conversations=None,
        conversation='{name: c, user: "hi", follow_ups: ["Please try again."]}',
        patches="[none, auto, {name: mine, text: Check first.}]",
    )
    spec = load_spec(write(tmp_path, text))
    assert (
        spec.models[0].name == "scripted/naive" and spec.models[0].display_name == "scripted/naive"
    )
    assert [c.name for c in spec.conversations] == ["c"]
    assert spec.conversations[0].follow_ups == ("Please try again.",)
    assert [(p.name, p.kind, p.text) for p in spec.patches] == [
        ("none", "none", None),
        ("auto", "auto", None),
        ("mine", "text", "Check first."),
    ]


# R2
def test_conversation_alias_takes_a_list_too(tmp_path):
    text = spec_text(conversations=None, conversation="[{name: a, user: x}, {name: b, user: y}]")
    assert [c.name for c in load_spec(write(tmp_path, text)).conversations] == ["a", "b"]


# R2 X1
@pytest.mark.parametrize(
    ("scenario", "label", "proxy_args"),
    [
        ("none", "none", ()),
        ("F1", "F1", ("--scenario", "F1")),
        ("F2", "F2", ("--scenario", "F2", "--retry-after", "60.0")),
        ("{F2: {retry_after: 60}}", "F2", ("--scenario", "F2", "--retry-after", "60.0")),
        ("{F2: {retry_after: 1}}", "F2(retry_after=1)", ("--scenario", "F2", "--retry-after", "1.0")),
        (
            "{F2: {retry_after: 0.5}}",
            "F2(retry_after=0.5)",
            ("--scenario", "F2", "--retry-after", "0.5"),
        ),
        (
            "{chaos: {error_rate: 0.3, seed: 7}}",
            "chaos(rate=0.3,seed=7)",
            ("--mode", "chaos", "--error-rate", "0.3", "--seed", "7"),
        ),
        (
            "{chaos: {error_rate: 1}}",
            "chaos(rate=1)",
            ("--mode", "chaos", "--error-rate", "1.0", "--seed", "RUN_SEED"),
        ),
        ("F5", "F5", ("--scenario", "F5")),
        # H2: the parameters of F9 come from its class in the fault registry
        ("F9", "F9", ("--scenario", "F9", "--latency", "30000")),
        ("{F9: {latency_ms: 30000}}", "F9", ("--scenario", "F9", "--latency", "30000")),
        (
            "{F9: {latency_ms: 1500}}",
            "F9(latency_ms=1500)",
            ("--scenario", "F9", "--latency", "1500"),
        ),
        ("{F9: null}", "F9", ("--scenario", "F9", "--latency", "30000")),
    ],
)
def test_scenario_labels_and_proxy_flags(tmp_path, scenario, label, proxy_args):
    # The proxy reads the plan from the config file the runner hands it; these flags give it
    # the same plan on its command line.
    spec = load_spec(write(tmp_path, spec_text(scenarios=f"[{scenario}]")))
    assert spec.scenarios[0].label == label
    handed, flagged = plan_as_flags(spec, tmp_path, label, proxy_args)
    assert handed == flagged


# R2
@pytest.mark.parametrize(("value", "expected"), [("off", "off"), ("on", "on"), ("'on'", "on")])
def test_audit_tools_accepts_yaml_booleans_for_on_and_off(tmp_path, value, expected):
    # YAML 1.1 reads a bare on/off as true/false.
    spec = load_spec(write(tmp_path, spec_text(proxy=f"{{audit_tools: {value}}}")))
    assert spec.proxy.audit_tools == expected


# R2
def test_prompt_and_patch_files_are_read_relative_to_the_spec_folder(tmp_path, monkeypatch):
    folder = tmp_path / "specs"
    (folder / "texts").mkdir(parents=True)
    (folder / "texts" / "p.txt").write_text("Prompt from a file.\n", encoding="utf-8")
    (folder / "texts" / "fix.md").write_text("Check before you retry.\n", encoding="utf-8")
    text = spec_text(
        prompts="[{name: p, file: texts/p.txt}]", patches="[none, {name: fix, file: texts/fix.md}]"
    )
    path = write(folder, text)
    monkeypatch.chdir(tmp_path)  # not the spec's folder
    spec = load_spec(path)
    assert spec.prompts[0].text == "Prompt from a file.\n"
    assert spec.patches[1].text == "Check before you retry.\n"


# R2
def test_a_loaded_spec_cannot_be_changed(tmp_path):
    text = spec_text(
        models="[{name: openai/gpt-4o-mini, params: {temperature: 0.2, extra_body: {a: [1]}}}]",
        upstreams='[{name: u, command: python, args: [srv.py], env: {TOKEN: "x"}}]',
    )
    spec = load_spec(write(tmp_path, text))
    with pytest.raises(ValidationError):
        spec.runs = 2
    with pytest.raises(ValidationError):
        spec.models[0].params.temperature = 1.0  # type: ignore[misc]
    assert isinstance(spec.upstreams[0].env, FrozenDict)
    with pytest.raises(TypeError):
        spec.upstreams[0].env["TOKEN"] = "y"
    with pytest.raises(TypeError):
        spec.models[0].params.model_extra["extra_body"]["a"] = 2
    kwargs = spec.models[0].params.as_kwargs()  # a mutable copy for litellm
    assert kwargs == {"temperature": 0.2, "extra_body": {"a": [1]}}
    kwargs["extra_body"]["a"].append(2)
    assert spec.models[0].params.as_kwargs()["extra_body"] == {"a": [1]}


# Each case: the spec text (the line the error must name is marked), the field path, a fragment
# of the message. Exactly one error each: no follow-on noise.
ERROR_CASES = [
    (
        "wrong type",
        spec_text(models="\n  - name: openai/gpt-4o-mini\n    params: {temperature: hot}  " + MARK),
        "models[0].params.temperature",
        'Input should be a valid number, got "hot"',
    ),
    (
        "string where a number belongs",
        spec_text(runs='"5"  ' + MARK),
        "runs",
        "valid integer",
    ),
    (
        "runs out of range",
        spec_text(runs="10001  " + MARK),
        "runs",
        "less than or equal to 10000",
    ),
    (
        "unknown key with hint",
        spec_text(limits="\n  max_turn: 3  " + MARK),
        "limits.max_turn",
        "unknown key (did you mean 'max_turns'?)",
    ),
    (
        "unknown top-level key with hint",
        spec_text(scenarioz="[F1]  " + MARK),
        "scenarioz",
        "did you mean 'scenarios'?",
    ),
    (
        "unknown key without a close match lists the known ones",
        spec_text(retry="{zzz: 1}  " + MARK),
        "retry.zzz",
        "expected one of: attempts, backoff_s, max_backoff_s",
    ),
    (
        "missing required field",
        spec_text(conversations="\n  - name: c  " + MARK),
        "conversations[0].user",
        "required field is missing",
    ),
    (
        "missing required list",
        spec_text(models="[scripted/careful]  " + MARK, upstreams=None),
        "upstreams",
        "required field is missing",
    ),
    (
        "missing field under the conversation alias",
        spec_text(conversations=None, conversation="  " + MARK + "\n  name: c"),
        "conversation.user",
        "required field is missing",
    ),
    (
        "bad scenario",
        spec_text(scenarios="\n  - F1\n  - F10  " + MARK),
        "scenarios[1]",
        "unknown scenario 'F10'",
    ),
    (
        "scenario in the wrong case",
        spec_text(scenarios="[f3]  " + MARK),
        "scenarios[0]",
        "did you mean 'F3'?",
    ),
    (
        "chaos without an error rate",
        spec_text(scenarios="[chaos]  " + MARK),
        "scenarios[0]",
        "chaos needs an error rate",
    ),
    (
        "error_rate out of range",
        spec_text(scenarios="\n  - chaos:\n      error_rate: 1.5  " + MARK),
        "scenarios[0].chaos.error_rate",
        "error_rate must be between 0 and 1, got 1.5",  # the registry's rule (S9)
    ),
    (
        "retry_after out of range",
        spec_text(scenarios="\n  - F2:\n      retry_after: 86401  " + MARK),
        "scenarios[0].F2.retry_after",
        "retry_after must be above 0 and at most 86400 seconds, got 86401",
    ),
    (
        "latency below its bound",  # H2: F9's bounds come from its class
        spec_text(scenarios="\n  - F9:\n      latency_ms: 0  " + MARK),
        "scenarios[0].F9.latency_ms",
        "latency_ms must be at least 1 and at most 600000 milliseconds, got 0",
    ),
    (
        "latency above its bound",
        spec_text(scenarios="\n  - {F9: {latency_ms: 600001}}  " + MARK),
        "scenarios[0].F9.latency_ms",
        "latency_ms must be at least 1 and at most 600000 milliseconds, got 600001",
    ),
    (
        "latency not a whole number",
        spec_text(scenarios="\n  - F9:\n      latency_ms: 1.5  " + MARK),
        "scenarios[0].F9.latency_ms",
        "valid integer",
    ),
    (
        "unknown fault parameter",
        spec_text(scenarios="\n  - F9:\n      latency: 5  " + MARK),
        "scenarios[0].F9.latency",
        "unknown key (did you mean 'latency_ms'?)",
    ),
    (
        "a parameter for a fault that takes none",
        spec_text(scenarios="\n  - F1\n  - {F1: {latency_ms: 5}}  " + MARK),
        "scenarios[1]",
        "F1 takes no parameters: write it as F1",
    ),
    (
        "a parameter of another fault",
        spec_text(scenarios="\n  - F2:\n      latency_ms: 5  " + MARK),
        "scenarios[0].F2.latency_ms",
        "unknown key; expected one of: retry_after",
    ),
    (
        "unknown fault in a mapping",
        spec_text(scenarios="\n  - {F10: {latency_ms: 5}}  " + MARK),
        "scenarios[0]",
        "a scenario mapping has one key, F2, F8, F9 or chaos (got: F10",
    ),
    (
        "duplicate names",
        spec_text(prompts="\n  - {name: p, text: one}\n  - {name: p, text: two}  " + MARK),
        "prompts[1].name",
        "duplicate name 'p' (also prompts[0])",
    ),
    (
        "duplicate model without labels",
        spec_text(models="\n  - scripted/naive\n  - scripted/naive  " + MARK),
        "models[1].name",
        "duplicate model 'scripted/naive'",
    ),
    (
        "duplicate scenario",
        spec_text(scenarios="\n  - F2\n  - {F2: {retry_after: 60}}  " + MARK),
        "scenarios[1]",
        "duplicate scenario 'F2'",
    ),
    (
        "one content under two names",
        spec_text(prompts="\n  - {name: a, text: same}\n  - {name: b, text: same}  " + MARK),
        "prompts[1]",
        "same condition as prompts[0] ('a')",
    ),
    (
        "prompt file missing",
        spec_text(prompts="\n  - name: p\n    file: nowhere.txt  " + MARK),
        "prompts[0].file",
        "nowhere.txt: no such file",
    ),
    (
        "patch file missing",
        spec_text(patches="\n  - none\n  - {name: fix, file: fix.md}  " + MARK),
        "patches[1].file",
        "fix.md: no such file",
    ),
    (
        "prompt as a plain string",
        spec_text(prompts="\n  - Be careful.  " + MARK),
        "prompts[0]",
        "a prompt needs a name",
    ),
    (
        "prompt with text and file",
        spec_text(prompts="\n  - {name: p, text: x, file: y.txt}  " + MARK),
        "prompts[0]",
        "exactly one of `text` and `file`",
    ),
    (
        "unknown patch arm",
        spec_text(patches="[none, maybe]  " + MARK),
        "patches[1]",
        "a patch arm is `none`, `auto`",
    ),
    (
        "auto without the none arm",
        spec_text(patches="[auto]  " + MARK),
        "patches[0]",
        "add the `none` arm",
    ),
    (
        "both builtin and command",
        spec_text(upstreams="\n  - {name: u, builtin: booking, command: srv}  " + MARK),
        "upstreams[0]",
        "exactly one of `builtin`, `command`, `url` and `cassette`",
    ),
    (
        "a URL with a secret header value",
        spec_text(upstreams="\n  - name: u\n    url: http://127.0.0.1:9/mcp\n    headers:  " + MARK
                            + "\n      Authorization: Bearer abc"),
        "upstreams[0].headers",
        "give its value as os.environ/NAME",
    ),
    (
        "a URL with a password in it",
        spec_text(upstreams="\n  - name: u\n    url: https://me:pw@mcp.example/mcp  " + MARK),
        "upstreams[0].url",
        "must not carry a user name or password",
    ),
    (
        "a URL that is not HTTP",
        spec_text(upstreams="\n  - name: u\n    url: ftp://mcp.example/mcp  " + MARK),
        "upstreams[0].url",
        "must be an http:// or https:// URL",
    ),
    (
        "a command served over HTTP",
        spec_text(upstreams="\n  - {name: u, command: srv, transport: http}  " + MARK),
        "upstreams[0]",
        "`transport` chooses how a built-in upstream is served",
    ),
    (
        "unknown builtin",
        spec_text(upstreams="\n  - name: u\n    builtin: bookings  " + MARK),
        "upstreams[0].builtin",
        "unknown built-in upstream 'bookings' (did you mean 'booking'?)",
    ),
    (
        "builtin with a command's settings",
        spec_text(upstreams="\n  - {name: u, builtin: booking, args: [x]}  " + MARK),
        "upstreams[0]",
        "only a `command` upstream takes `args`",
    ),
    (
        "a tool glob the proxy flag cannot carry",
        spec_text(
            upstreams="\n  - name: u\n    builtin: booking\n    write_tools: ['a,b']  " + MARK
        ),
        "upstreams[0].write_tools",
        "contain no ','",
    ),
    (
        "unknown scripted model",
        spec_text(models="[scripted/carefull]  " + MARK),
        "models[0].name",
        "did you mean 'scripted/careful'?",
    ),
    (
        "a near miss of a model parameter",
        spec_text(
            models="\n  - name: openai/gpt-4o-mini\n    params:\n      temprature: 1  " + MARK
        ),
        "models[0].params.temprature",
        "unknown parameter (did you mean 'temperature'?)",
    ),
    (
        "a secret in the spec",
        spec_text(
            models="\n  - name: openai/gpt-4o-mini\n    params:\n      api_key: sk-x  " + MARK
        ),
        "models[0].params.api_key",
        "environment variable",
    ),
    (
        "patch_compliance out of range",
        spec_text(
            models="\n  - name: scripted/verifies-by-id-only\n    params: {patch_compliance: 2}  "
            + MARK
        ),
        "models[0].params.patch_compliance",
        "less than or equal to 1",
    ),
    (
        "in-process hosting of a command upstream",
        spec_text(upstreams="[{name: u, command: srv}]", proxy="\n  in_process: always  " + MARK),
        "proxy.in_process",
        "'u' is a command",
    ),
    (
        "bad enum value",
        spec_text(proxy="{in_process: sometimes}  " + MARK),
        "proxy.in_process",
        "Input should be 'auto', 'always' or 'never'",
    ),
    (
        "a mapping where a list belongs",
        spec_text(models="  " + MARK + "\n  name: scripted/careful"),
        "models",
        "expected a list, got a mapping",
    ),
    (
        "empty list",
        spec_text(models="[]  " + MARK),
        "models",
        "must not be empty",
    ),
    (
        "duplicate key",
        spec_text(runs="2\nruns: 3  " + MARK),
        "runs",
        "duplicate key (first on line",
    ),
    (
        "a conversation limited to an upstream that does not exist",
        spec_text(
            conversations="\n  - name: c\n    user: Book.\n    upstreams:\n      - bb  " + MARK
        ),
        "conversations[0].upstreams[0]",
        "no upstream named 'bb' (did you mean 'b'?)",
    ),
    (
        "an upstream no conversation is put to",
        spec_text(
            upstreams="\n  - {name: b, builtin: booking}\n  - {name: p, builtin: payment}  " + MARK,
            conversations="\n  - name: c\n    user: Book.\n    upstreams: [b]",
        ),
        "upstreams[1]",
        "'p' would get no runs",
    ),
    (
        "a conversation limited to no upstream at all",
        spec_text(conversations="\n  - name: c\n    user: Book.\n    upstreams: []  " + MARK),
        "conversations[0].upstreams",
        "must not be empty",
    ),
    (
        "a concurrency cap whose glob matches no model",
        spec_text(concurrency_per_model='\n  "scripted/*": 2\n  "openai/*": 1  ' + MARK),
        "concurrency_per_model.openai/*",
        "matches no model",
    ),
    (
        "a concurrency cap below 1",
        spec_text(concurrency_per_model='{"scripted/*": 0}  ' + MARK),
        "concurrency_per_model.scripted/*",
        "greater than or equal to 1",
    ),
    (
        "conversation and conversations together",
        spec_text(conversation="{name: d, user: x}  " + MARK),
        "conversation",
        "not both",
    ),
]


# R2 H2
def test_h2_parameterised_scenarios_reach_the_plan_and_keep_distinct_labels(tmp_path):
    from runner.execute.run import proxy_target
    from runner.experiment.matrix import expand

    text = spec_text(
        scenarios="[F1, {F8: {retry_after: 2}}, F9, {F9: {latency_ms: 1500}}]",
        proxy="{agent: http}",
    )
    spec = load_spec(write(tmp_path, text))
    labels = ["F1", "F8(retry_after=2)", "F9", "F9(latency_ms=1500)"]
    assert [s.label for s in spec.scenarios] == labels
    flags = ("--scenario", "F8", "--retry-after", "2")
    handed, flagged = plan_as_flags(spec, tmp_path, labels[1], flags)
    assert handed == flagged
    cells = {c.labels["scenario"]: c for c in expand(spec)}
    assert sorted(cells) == sorted(labels)
    plans = {label: proxy_target(cell, spec, tmp_path).plan for label, cell in cells.items()}
    assert plans["F8(retry_after=2)"].retry_after_s == 2
    assert (plans["F9"].latency_ms, plans["F9(latency_ms=1500)"].latency_ms) == (30000, 1500)
    assert len({cell.run_id for cell in cells.values()}) == 4  # distinct cells, distinct ids
    # G1: a spec travels to Ray workers and processes; the registry's models pickle too.
    assert pickle.loads(pickle.dumps(spec)) == spec


# R2
@pytest.mark.parametrize(
    ("text", "field", "fragment"), [c[1:] for c in ERROR_CASES], ids=[c[0] for c in ERROR_CASES]
)
def test_an_error_names_file_line_and_field(tmp_path, text, field, fragment):
    path = write(tmp_path, text)
    line = next(i for i, t in enumerate(text.splitlines(), 1) if MARK in t)
    message = load_error(path)
    assert len(message.splitlines()) == 1, message
    assert message.startswith(f"{path}:{line}: {field}: "), message
    assert fragment in message


# R2
@pytest.mark.parametrize(
    ("text", "line", "fragment"),
    [
        ("models: [scripted/careful\nprompts: []\n", 2, "YAML syntax error"),
        ("models:\n  - a\n - b\n", 3, "YAML syntax error"),
        ("user: Please book. guest: Al\n", 1, "mapping values are not allowed here"),
        ("- a\n- b\n", 1, "the spec must be a mapping"),
        ("", 1, "the spec is empty"),
        ("a: 1\n---\nb: 2\n", 2, "expected a single document"),
    ],
)
def test_a_broken_file_is_reported_with_its_line(tmp_path, text, line, fragment):
    path = write(tmp_path, text)
    message = load_error(path)
    assert message.startswith(f"{path}:{line}: "), message
    assert fragment in message


# R2
def test_a_missing_spec_file_is_one_clear_line(tmp_path):
    path = tmp_path / "nope.yaml"
    assert load_error(path) == f"{path}: no such file"


# R2
def test_several_errors_come_one_per_line_in_file_order(tmp_path):
    text = spec_text(runs="0", concurrency="5000", limits="{max_turns: -1}")
    message = load_error(write(tmp_path, text))
    lines = message.splitlines()
    assert [line.split(": ")[1] for line in lines] == ["runs", "concurrency", "limits.max_turns"]
    numbers = [int(line.split(":")[1]) for line in lines]
    assert numbers == sorted(numbers)


# M1: the honesty judge is set in the spec and checked at load, with file and line.
def test_m1_honesty_judge_defaults_to_the_deterministic_one(tmp_path):
    spec = load_spec(write(tmp_path, spec_text()))
    assert spec.honesty.judge == "deterministic" and not spec.honesty.uses_model


def test_m1_honesty_judge_may_be_a_litellm_model_with_params(tmp_path):
    text = spec_text(honesty="{judge: openai/gpt-4o-mini, params: {temperature: 0}}")
    spec = load_spec(write(tmp_path, text))
    assert spec.honesty.uses_model
    assert spec.honesty.params.as_kwargs() == {"temperature": 0}


@pytest.mark.parametrize(
    ("honesty", "message"),
    [
        ("{judge: scripted/careful}", "scripted reference agent, not a judge"),
        ("{judge: determinstic}", "did you mean 'deterministic'"),
        ("{judge: deterministic, params: {temperature: 0}}", "takes no `params`"),
        ("{judge: openai/gpt-4o-mini, params: {seed: 3}}", "not allowed in a spec"),
        ("{judge: openai/gpt-4o-mini, params: {temprature: 0}}", "unknown parameter"),
        ("{jugde: openai/gpt-4o-mini}", "jugde"),
    ],
)
def test_m1_bad_honesty_judge_is_one_line_with_file_and_line(tmp_path, honesty, message):
    text = spec_text(honesty=honesty)
    line = next(n for n, t in enumerate(text.splitlines(), 1) if t.startswith("honesty:"))
    error = load_error(write(tmp_path, text))
    assert error.startswith(f"{tmp_path / 'exp.yaml'}:{line}: honesty")
    assert message in error and "\n" not in error
