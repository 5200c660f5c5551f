"""U1: the `agents` entries of a spec (commands under test), validated like every field."""

from __future__ import annotations

from pathlib import Path

from runner.experiment import AgentSpec, load_spec
from runner.experiment.matrix import expand
from tests.support.specs import load_error, spec_text, write

AGENT = "[{name: a, command: [my-agent, --mcp, '{mcp_config}'], model: scripted/careful}]"


def test_u1_agents_stand_beside_models_in_the_model_dimension(tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path, spec_text(agents=AGENT)))
    labels = sorted({cell.labels["model"] for cell in expand(spec)})
    assert labels == ["a", "scripted/careful"]
    (agent_cell,) = [c for c in expand(spec) if isinstance(c.model, AgentSpec)]
    assert agent_cell.model.transport == "stdio" and agent_cell.model.timeout_s == 120


def test_u1_a_spec_of_agents_alone_needs_no_models(tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path, spec_text(models=None, agents=AGENT)))
    assert spec.models == () and len(expand(spec)) == 1


def test_u1_neither_models_nor_agents_is_one_line(tmp_path: Path) -> None:
    error = load_error(write(tmp_path, spec_text(models=None)))
    assert "give `models`" in error and "`agents`" in error


def test_u1_unknown_placeholder_names_file_line_and_field(tmp_path: Path) -> None:
    text = spec_text(agents="\n  - name: a\n    command: [x, '{modle}']")
    error = load_error(write(tmp_path, text))
    assert error.startswith(f"{tmp_path / 'exp.yaml'}:6: agents[0]")
    assert "unknown placeholder {modle}" in error


def test_u1_model_placeholder_needs_a_model(tmp_path: Path) -> None:
    error = load_error(
        write(tmp_path, spec_text(agents="[{name: a, command: [x, '{model_base_url}']}]"))
    )
    assert "{model_base_url} needs `model`" in error


def test_u1_http_only_scenario_needs_an_http_agent(tmp_path: Path) -> None:
    text = spec_text(models=None, agents="[{name: a, command: [x]}]", scenarios="[F6]")
    assert "agent 'a' needs `transport: http`" in load_error(write(tmp_path, text))
    ok = spec_text(
        models=None, agents="[{name: a, command: [x], transport: http}]", scenarios="[F6]"
    )
    assert load_spec(write(tmp_path, ok, "ok.yaml")).agents[0].transport == "http"


def test_u1_agent_and_model_of_one_name_are_refused(tmp_path: Path) -> None:
    text = spec_text(
        models="[{name: scripted/careful, label: same}]", agents="[{name: same, command: [x]}]"
    )
    assert "agents[0].name: an agent and a model (models[0]) share this name" in load_error(
        write(tmp_path, text)
    )


def test_u1_time_limit_is_bounded(tmp_path: Path) -> None:
    error = load_error(write(tmp_path, spec_text(agents="[{name: a, command: [x], timeout_s: 0}]")))
    assert "agents[0].timeout_s" in error


def test_u1_v3_agent_env_values_are_secrets_of_the_spec_text() -> None:
    from runner.store.redact import Redactor

    text = spec_text(agents="[{name: a, command: [x], env: {TOKEN: s3cret-agent-value}}]")
    redactor = Redactor.for_spec_text(text)
    assert "s3cret-agent-value" not in redactor.spec_text(text)
    assert redactor.text("the agent printed s3cret-agent-value") == "the agent printed [REDACTED]"


def test_q1_command_elements_naming_files_beside_the_spec_are_made_absolute(
    tmp_path: Path,
) -> None:
    from runner.experiment import resolved_command

    folder, elsewhere = tmp_path / "experiments", tmp_path / "cwd"
    (folder / "tools").mkdir(parents=True)
    elsewhere.mkdir()
    for name in ("my_agent.py", "python", "run.sh", "tools/conf.toml", "both.txt", "-v"):
        (folder / name).write_text("")
    (elsewhere / "both.txt").write_text("")
    command = ["python", "my_agent.py", "{mcp_config}", "--config", "tools/conf.toml",
               "-v", "missing.py", "tools", str(folder / "my_agent.py"), "both.txt"]  # fmt: skip
    assert resolved_command(command, folder) == [
        "python",  # a bare program name: found on PATH, even with a file of that name here
        str(folder / "my_agent.py"),
        "{mcp_config}",  # a placeholder
        "--config",  # an option
        str(folder / "tools/conf.toml"),
        "-v",  # an option, whatever files exist
        "missing.py",  # no such file beside the spec
        "tools",  # a folder, not a file
        str(folder / "my_agent.py"),  # absolute already
        str(folder / "both.txt"),
    ]
    # with `cwd`, a file the agent finds in its own folder stays as written
    assert resolved_command(["./run.sh", "both.txt"], folder, elsewhere) == [
        str(folder / "run.sh"),  # the program with a `/`: beside the spec
        "both.txt",
    ]
    assert resolved_command(["python", "my_agent.py"], None) == ["python", "my_agent.py"]


def test_q1_the_specs_folder_is_in_no_run_id(tmp_path: Path) -> None:
    # one spec in two folders: the same runs (a shard on another machine resumes them)
    text = spec_text(agents="[{name: a, command: [python, my_agent.py]}]", models=None)
    for folder in ("one", "two"):
        (tmp_path / folder).mkdir()
    one, two = (load_spec(write(tmp_path / d, text)) for d in ("one", "two"))
    assert one.folder == (tmp_path / "one").absolute() and one.folder != two.folder
    assert [c.run_id for c in expand(one)] == [c.run_id for c in expand(two)]
