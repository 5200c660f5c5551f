"""Compiled report templates kept between processes (N2, runner/html/codecache.py): the HTML
is the same with the cache, without it, and whatever a stale, damaged or foreign cache holds."""

from __future__ import annotations

import importlib.util
import os
import stat
import sys
from datetime import datetime
from pathlib import Path

import jinja2
import pytest

from runner.analysis import analyse
from runner.html import codecache, render
from runner.store import Store
from tests.support.records import make_run

NOW = datetime(2026, 12, 2, 7, 0)
TEMPLATES = {"report.html.jinja", "_macros.jinja", "_measures.jinja", "_run.jinja",
             "style.css.jinja"}


@pytest.fixture(scope="module")
def analysis(tmp_path_factory):
    path = tmp_path_factory.mktemp("store") / "runs.duckdb"
    with Store.open(path) as store:
        store.save_runs([make_run(f"run-{i}", repetition=i, duplicate_found=i % 2 == 0)
                         for i in range(6)])
        return analyse(store, now=NOW)


def html_with(monkeypatch, analysis, env: jinja2.Environment) -> str:
    monkeypatch.setattr(render, "_ENV", env)
    return render.render_html(analysis)


@pytest.fixture(scope="module")
def plain_html(analysis) -> str:
    with pytest.MonkeyPatch.context() as mp:
        return html_with(mp, analysis, render.template_environment(None))


def cached_env(folder: Path | None) -> jinja2.Environment:
    return render.template_environment(codecache.TemplateCodeCache(folder))


def no_compiling(env: jinja2.Environment) -> jinja2.Environment:
    def refuse(*args, **kwargs):
        raise AssertionError("compiled although the cache holds the template")

    env.compile = refuse  # type: ignore[method-assign]
    return env


def test_n2_second_process_loads_compiled_templates_and_renders_the_same_html(
    monkeypatch, tmp_path, analysis, plain_html
):
    folder = tmp_path / "cache" / "templates"
    assert html_with(monkeypatch, analysis, cached_env(folder)) == plain_html
    files = list(folder.glob("*.code"))
    assert len(files) == len(TEMPLATES)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert all(stat.S_IMODE(f.stat().st_mode) == 0o600 for f in files)
    # A new environment (as in the next process) compiles nothing.
    again = no_compiling(cached_env(folder))
    assert html_with(monkeypatch, analysis, again) == plain_html


def test_n2_the_report_caches_in_the_folder_of_the_rendering_process(monkeypatch, tmp_path,
                                                                     analysis, plain_html):
    env = cached_env(None)  # as render._ENV: the folder is looked up when a template loads
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert html_with(monkeypatch, analysis, env) == plain_html
    assert len(list((tmp_path / "agent-harness" / "templates").glob("*.code"))) == len(TEMPLATES)


def test_n2_default_cache_folder_follows_xdg_cache_home(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert codecache.default_cache_dir() == tmp_path / "agent-harness" / "templates"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/path")  # not absolute: ignored (XDG)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert codecache.default_cache_dir() == tmp_path / "home" / ".cache" / "agent-harness" / (
        "templates")


def small_env(folder: Path, source: str, **options) -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.DictLoader({"t": source}),
        bytecode_cache=codecache.TemplateCodeCache(folder), **options,
    )


def test_n2_stale_cache_is_never_used_when_the_template_changes(tmp_path):
    assert small_env(tmp_path, "{{ x }}!").get_template("t").render(x=1) == "1!"
    assert small_env(tmp_path, "{{ x }}?").get_template("t").render(x=1) == "1?"
    assert len(list(tmp_path.glob("*.code"))) == 2


def test_n2_stale_cache_is_never_used_when_an_option_changes(tmp_path):
    source = "{% if x %}\n  <{{ x }}>\n{% endif %}\n"
    plain = small_env(tmp_path, source).get_template("t").render(x="&")
    trimmed = small_env(tmp_path, source, trim_blocks=True, lstrip_blocks=True, autoescape=True)
    assert plain == "\n  <&>\n"
    assert trimmed.get_template("t").render(x="&") == "  <&amp;>\n"


def forged(folder: Path, real: str, fake: str) -> None:
    """Every cache file of the template `real` overwritten with a well-formed entry (right
    name, right digest) holding the code of `fake`: what only the cache's owner could write."""
    (path,) = folder.glob("*.code")
    env = small_env(folder, real)
    cache = env.bytecode_cache
    bucket = cache.get_bucket(env, "t", None, real)
    bucket.code = env.compile(fake, "t")
    path.unlink()
    cache.dump_bytecode(bucket)


def test_n2_damaged_cache_files_are_ignored_and_written_again(tmp_path):
    assert small_env(tmp_path, "{{ x }}").get_template("t").render(x=1) == "1"
    (path,) = tmp_path.glob("*.code")
    good = path.read_bytes()
    for damage in (good[:-7], good[:40], b"", good[:-1] + bytes([good[-1] ^ 1]),
                   b"\x00" * len(good)):
        path.write_bytes(damage)
        assert small_env(tmp_path, "{{ x }}").get_template("t").render(x=1) == "1"
        assert path.read_bytes() == good  # compiled and written again


def test_n2_an_entry_moved_to_another_template_name_is_ignored(tmp_path):
    small_env(tmp_path, "REAL {{ x }}").get_template("t").render(x=1)
    small_env(tmp_path / "b", "FAKE {{ x }}").get_template("t").render(x=1)
    (real,) = tmp_path.glob("*.code")
    (fake,) = (tmp_path / "b").glob("*.code")
    real.write_bytes(fake.read_bytes())  # a valid entry of another key, under this key's name
    assert small_env(tmp_path, "REAL {{ x }}").get_template("t").render(x=1) == "REAL 1"


@pytest.mark.parametrize("loosen", ["folder", "file"])
def test_n2_a_cache_others_may_write_to_is_not_read(tmp_path, loosen):
    folder = tmp_path / "templates"
    small_env(folder, "REAL {{ x }}").get_template("t").render(x=1)
    forged(folder, "REAL {{ x }}", "FAKE {{ x }}")
    # Written by this user in a folder of its own, the forged entry is what the cache trusts
    # (as Python trusts __pycache__): the test's forgery takes effect...
    assert small_env(folder, "REAL {{ x }}").get_template("t").render(x=1) == "FAKE 1"
    (path,) = folder.glob("*.code")
    target = folder if loosen == "folder" else path
    target.chmod(stat.S_IMODE(target.stat().st_mode) | stat.S_IWGRP | stat.S_IWOTH)
    # ...but not once anyone else could have written it.
    assert small_env(folder, "REAL {{ x }}").get_template("t").render(x=1) == "REAL 1"


def test_n2_a_cache_file_behind_a_symbolic_link_is_not_read(tmp_path):
    folder = tmp_path / "templates"
    small_env(folder, "REAL {{ x }}").get_template("t").render(x=1)
    forged(folder, "REAL {{ x }}", "FAKE {{ x }}")
    (path,) = folder.glob("*.code")
    elsewhere = tmp_path / "elsewhere.code"
    path.rename(elsewhere)
    path.symlink_to(elsewhere)
    assert small_env(folder, "REAL {{ x }}").get_template("t").render(x=1) == "REAL 1"


def test_n2_a_cache_folder_that_is_a_symbolic_link_is_not_used(tmp_path):
    real = tmp_path / "real"
    small_env(real, "REAL {{ x }}").get_template("t").render(x=1)
    forged(real, "REAL {{ x }}", "FAKE {{ x }}")
    link = tmp_path / "link"
    link.symlink_to(real)
    assert small_env(link, "REAL {{ x }}").get_template("t").render(x=1) == "REAL 1"


def test_n2_no_usable_cache_folder_means_compiling_as_before(monkeypatch, tmp_path, analysis,
                                                             plain_html):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    env = cached_env(blocker / "templates")
    assert html_with(monkeypatch, analysis, env) == plain_html
    if os.geteuid() != 0:  # root writes anywhere
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        env = cached_env(locked / "templates")
        assert html_with(monkeypatch, analysis, env) == plain_html


def filter_module(monkeypatch, folder: Path, body: str):
    """A module `n2_cache_filters` from a file, (re)loaded like an edited filter module."""
    path = folder / "n2_cache_filters.py"
    path.write_text(body)
    spec = importlib.util.spec_from_file_location("n2_cache_filters", path)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "n2_cache_filters", module)
    spec.loader.exec_module(module)
    return module


def test_n2_stale_cache_is_never_used_when_a_folded_filter_changes(monkeypatch, tmp_path):
    # jinja applies a filter to constants while compiling: "{{ 1 | shown }}" is compiled to
    # the filter's output, so the filter's code is part of what the compiled code depends on.
    cache = tmp_path / "cache"
    for body, shown in (("def shown(x):\n    return 'old'\n", "old"),
                        ("def shown(x):\n    return 'new'\n", "new")):
        module = filter_module(monkeypatch, tmp_path, body)
        env = small_env(cache, "{{ 1 | shown }}")
        env.filters["shown"] = module.shown
        assert env.get_template("t").render() == shown


def _render_new(folder: Path, source: str) -> Path:
    before = set(folder.glob("*.code")) if folder.exists() else set()
    small_env(folder, source).get_template("t").render(x=1)
    (new,) = set(folder.glob("*.code")) - before
    return new


def test_n2_writing_an_entry_keeps_only_the_newest_written(monkeypatch, tmp_path):
    old = [_render_new(tmp_path, f"{{{{ x }}}} v{i}") for i in range(4)]
    for age, path in enumerate(reversed(old)):  # v3 the newest, v0 the oldest
        os.utime(path, (1_000_000_000 - age, 1_000_000_000 - age))
    monkeypatch.setattr(codecache, "KEEP", 3)
    newest = _render_new(tmp_path, "{{ x }} v4")
    assert set(tmp_path.glob("*.code")) == {newest, old[3], old[2]}
    # A pruned template compiles again, and is the same.
    assert small_env(tmp_path, "{{ x }} v0").get_template("t").render(x=1) == "1 v0"


def test_n2_pruning_removes_a_killed_writers_old_temporary_files_and_nothing_of_others(
    tmp_path,
):
    old_temporary, young_temporary = tmp_path / ".tmp-old", tmp_path / ".tmp-young"
    for path in (old_temporary, young_temporary):
        path.write_bytes(b"cut short")
    two_hours_ago = datetime.now().timestamp() - 7200
    os.utime(old_temporary, (two_hours_ago, two_hours_ago))
    elsewhere = tmp_path.parent / f"{tmp_path.name}-elsewhere.code"
    elsewhere.write_bytes(b"not in the cache")
    link = tmp_path / ("0" * 64 + ".code")
    link.symlink_to(elsewhere)
    codecache.prune(tmp_path, keep=0)
    assert not old_temporary.exists()
    assert young_temporary.exists()  # maybe a writer at work
    assert link.is_symlink() and elsewhere.exists()  # never removed through a link


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
def test_n2_pruning_leaves_another_users_files(tmp_path):
    foreign = tmp_path / ("1" * 64 + ".code")
    foreign.write_bytes(b"theirs")
    os.chown(foreign, 12345, -1)
    codecache.prune(tmp_path, keep=0)
    assert foreign.exists()
