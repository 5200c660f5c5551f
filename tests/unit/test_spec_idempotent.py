"""E1 in a spec (R2): an upstream's `idempotent_tools` and `distrust_annotations` reach the
proxy the runner starts as --idempotent-tools and --distrust-annotations."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.proxy import proxy_argv
from runner.execute.run import proxy_target
from runner.experiment import SpecError, load_spec
from runner.experiment.matrix import expand

SPEC = """\
models: [scripted/idempotent-rewrite]
prompts: [{{name: p, text: Be careful.}}]
upstreams:
  - name: memory
    command: node
    args: [server.js]
{fields}conversations: [{{name: c, user: "Write it. path: a.txt, content: x"}}]
"""


def argv_of(tmp_path: Path, fields: str) -> list[str]:
    path = tmp_path / "exp.yaml"
    path.write_text(SPEC.format(fields=fields), encoding="utf-8")
    spec = load_spec(path)
    (cell,) = expand(spec)
    return proxy_argv(proxy_target(cell, spec, tmp_path).proxy_config(None, None))


def test_e1_idempotent_tools_and_distrust_annotations_reach_the_proxy(tmp_path):  # E1 R2
    fields = "    idempotent_tools: [create_entities, 'put_*']\n    distrust_annotations: true\n"
    argv = argv_of(tmp_path, fields)
    assert "--idempotent-tools=create_entities,put_*" in argv
    assert "--distrust-annotations" in argv


def test_e1_without_the_fields_the_proxy_gets_neither_flag(tmp_path):  # E1 R2
    argv = argv_of(tmp_path, "")
    assert not any(a.startswith(("--idempotent-tools", "--distrust-annotations")) for a in argv)


@pytest.mark.parametrize(
    ("fields", "says"),
    [("    idempotent_tools: ['a,b']\n", "idempotent_tools"),
     ("    distrust_annotations: maybe\n", "distrust_annotations")],
)  # fmt: skip
def test_e1_a_bad_field_is_one_error_naming_file_line_and_field(tmp_path, fields, says):  # V4
    with pytest.raises(SpecError) as info:
        argv_of(tmp_path, fields)
    message = str(info.value)
    assert "exp.yaml:" in message and says in message and "\n" not in message.strip()
