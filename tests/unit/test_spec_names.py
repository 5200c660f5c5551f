"""V2: names from a spec are never used as paths as they are; a bad one is a FILE:LINE error.

The experiment's name becomes `reports/NAME.html`; model labels, prompt, patch, upstream and
conversation names are printed and stored. None may hold a separator, be `.`/`..`, or carry
a control character.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.cli.report import default_report_path
from runner.experiment import SpecError, load_spec, name_problem

VALID = """\
name: fine
models:
  - name: scripted/careful
    label: careful
prompts: [{name: p, text: Be careful.}]
upstreams: [{name: b, builtin: booking}]
conversations: [{name: c, user: Book a room.}]
"""


def load_error(tmp_path: Path, text: str) -> str:
    path = tmp_path / "exp.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(SpecError) as info:
        load_spec(path)
    message = str(info.value)
    assert "\n" not in message
    return message.removeprefix(f"{path}:")


@pytest.mark.parametrize(
    ("old", "new", "where", "problem"),
    [
        ("name: fine", "name: ../../escape", "1: name", "the separator '/'"),
        ("name: fine", "name: /etc/cron.d/x", "1: name", "the separator '/'"),
        ("name: fine", "name: ..", "1: name", "'..' is not a name"),
        ("name: fine", 'name: "a\\\\b"', "1: name", "the separator '\\\\'"),
        ("name: fine", 'name: "x\\e[2J"', "1: name", "the control character '\\x1b'"),
        ("label: careful", "label: ../careful", "4: models[0].label", "the separator '/'"),
        ("{name: p,", "{name: /tmp/p,", "5: prompts[0].name", "the separator '/'"),
        ("{name: b,", "{name: up/b,", "6: upstreams[0].name", "the separator '/'"),
        ("{name: c,", "{name: ./c/..,", "7: conversations[0].name", "the separator '/'"),
    ],
    ids=["dotdot", "absolute", "parent", "backslash", "escape-seq", "label", "prompt",
         "upstream", "conversation"],
)
def test_v2_a_name_that_is_a_path_is_refused_at_load(tmp_path, old, new, where, problem):
    assert old in VALID
    message = load_error(tmp_path, VALID.replace(old, new))
    assert message.startswith(f"{where}: ") and problem in message, message


def test_v2_model_names_keep_their_provider_slash(tmp_path):
    # A litellm model name is no path and is never used as one: openai/gpt-4o stays valid.
    path = tmp_path / "exp.yaml"
    path.write_text(VALID.replace("    label: careful\n", ""), encoding="utf-8")
    assert load_spec(path).models[0].display_name == "scripted/careful"


def test_v2_the_file_stem_as_default_name_obeys_the_rule_too(tmp_path):
    path = tmp_path / "...yaml"  # stem ".."
    path.write_text(VALID.replace("name: fine\n", ""), encoding="utf-8")
    with pytest.raises(SpecError, match=r"name: '\.\.' is not a name"):
        load_spec(path)


@pytest.mark.parametrize("name", ["../x", "/abs/x", "..", "a\\b", "x\ny"])
def test_v2_a_report_file_name_is_never_made_of_a_path(name):
    assert name_problem(name)
    with pytest.raises(Exception, match="cannot name a report file"):
        default_report_path(name, "html")
    assert default_report_path("nightly", "md") == Path("reports/nightly.md")


