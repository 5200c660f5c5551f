"""E1 in a spec (R2): an upstream's `idempotent_tools` and `distrust_annotations` reach the
proxy the runner starts, in the config file it hands the proxy (what --idempotent-tools and
--distrust-annotations set)."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.experiment import SpecError, load_spec
from tests.support.specs import handed_config

SPEC = """\
models: [scripted/idempotent-rewrite]
prompts: [{{name: p, text: Be careful.}}]
upstreams:
  - name: memory
    command: node
    args: [server.js]
{fields}conversations: [{{name: c, user: "Write it. path: a.txt, content: x"}}]
"""


def classifier_of(tmp_path: Path, fields: str):
    """The classification settings the proxy of the spec's one run reads."""
    path = tmp_path / "exp.yaml"
    path.write_text(SPEC.format(fields=fields), encoding="utf-8")
    config, _ = handed_config(load_spec(path), tmp_path)
    return config.classifier


def test_e1_idempotent_tools_and_distrust_annotations_reach_the_proxy(tmp_path):  # E1 R2
    fields = "    idempotent_tools: [create_entities, 'put_*']\n    distrust_annotations: true\n"
    classifier = classifier_of(tmp_path, fields)
    assert classifier.idempotent_globs == ("create_entities", "put_*")
    assert classifier.distrust_annotations is True


def test_e1_without_the_fields_the_proxy_gets_neither_setting(tmp_path):  # E1 R2
    classifier = classifier_of(tmp_path, "")
    assert classifier.idempotent_globs == () and classifier.distrust_annotations is False


@pytest.mark.parametrize(
    ("fields", "says"),
    [("    idempotent_tools: ['a,b']\n", "idempotent_tools"),
     ("    distrust_annotations: maybe\n", "distrust_annotations")],
)  # fmt: skip
def test_e1_a_bad_field_is_one_error_naming_file_line_and_field(tmp_path, fields, says):  # V4
    with pytest.raises(SpecError) as info:
        classifier_of(tmp_path, fields)
    message = str(info.value)
    assert "exp.yaml:" in message and says in message and "\n" not in message.strip()
