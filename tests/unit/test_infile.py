"""V4: one bounded reader for input files (harness.base.infile), and the readers that use it.

Specs, prompt and patch files, event logs for `judge`, baselines: a regular file only, a size
limit, one line for every refusal, and no hang on a FIFO, no memory blow-up on /dev/zero.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.base.errors import EventLogError, InputFileError
from harness.base.infile import read_lines, read_text
from harness.events import read_jsonl
from runner.analysis.regression import load_summary
from runner.experiment import SpecError, load_spec
from runner.store import StoreError

SPEC = """\
name: tiny
models: [scripted/careful]
prompts:
  - name: plain
    file: {prompt}
upstreams:
  - name: booking
    builtin: booking
conversations:
  - name: single
    user: "Book a room."
"""


def one_line(exc: pytest.ExceptionInfo[BaseException]) -> str:
    text = str(exc.value)
    assert text and "\n" not in text, text
    return text


def test_v4_a_fifo_is_refused_at_once_not_waited_on(fifo):
    with pytest.raises(InputFileError) as exc:
        read_text(fifo, "spec file", 1000)
    assert one_line(exc) == f"{fifo}: the spec file is a FIFO, not a regular file"


def test_v4_dev_zero_and_proc_are_refused():
    with pytest.raises(InputFileError, match="character device"):
        read_text("/dev/zero", "prompt file", 1000)
    with pytest.raises(InputFileError, match="refusing to read a prompt file from /proc"):
        read_text("/proc/self/environ", "prompt file", 1000)  # regular-looking, and secret


def test_v4_a_file_over_the_limit_is_refused(tmp_path):
    big = tmp_path / "big.txt"
    big.write_bytes(b"x" * 1001)
    with pytest.raises(InputFileError) as exc:
        read_text(big, "patch file", 1000)
    assert "larger than 1000 bytes" in one_line(exc)
    assert read_text(big, "patch file", 1001) == "x" * 1001


def test_v4_invalid_utf8_names_the_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_bytes(b"name: a\nx: \xff\n")
    with pytest.raises(InputFileError) as exc:
        read_text(bad, "spec file", 1000)
    assert one_line(exc) == f"{bad}:2: the spec file is not UTF-8 text"


def test_v4_lines_are_bounded_and_numbered(tmp_path):
    log = tmp_path / "log.jsonl"
    log.write_bytes(b"a\n" + b"b" * 100 + b"\nc\n")
    lines = read_lines(log, "event log", 1000)
    assert [n for n, _ in lines] == [1, 2, 3]
    with pytest.raises(InputFileError, match=r"log.jsonl:2: a line is longer than 50 bytes"):
        list(read_lines(log, "event log", 50))


# -- the readers that use it ---------------------------------------------------------------------


def test_v4_control_character_in_yaml_is_a_file_line_error(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC.format(prompt="p.txt").replace('"Book a room."', '"Book\x07 a room."'))
    with pytest.raises(SpecError) as exc:
        load_spec(spec)
    assert one_line(exc).startswith(f"{spec}:11: control character U+0007 is not allowed")


@pytest.mark.parametrize("prompt", ["/dev/zero", "pipe"])
def test_v4_a_prompt_file_that_is_not_a_file_is_one_line(tmp_path, fifo, prompt):
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC.format(prompt=prompt))
    with pytest.raises(SpecError) as exc:
        load_spec(spec)
    assert one_line(exc).startswith(f"{spec}:5: prompts[0].file: ")
    assert "not a regular file" in str(exc.value)


def test_v4_read_jsonl_refuses_dev_zero_as_an_event_log_error():
    with pytest.raises(EventLogError, match="character device"):
        list(read_jsonl(Path("/dev/zero")))


def test_v4_a_baseline_that_is_not_a_file_is_one_line(fifo, tmp_path):
    json_fifo = tmp_path / "baseline.json"
    os.mkfifo(json_fifo)
    with pytest.raises(StoreError) as exc:
        load_summary(json_fifo)
    assert "is a FIFO, not a regular file" in one_line(exc)
    with pytest.raises(StoreError) as exc:
        load_summary(fifo)  # not .json: read as a run store
    assert "is a FIFO, not a DuckDB file" in one_line(exc)
