"""V6: one escaping step for foreign text, to a terminal and into Markdown (harness.base.textsafe).

Markdown is checked by rendering it with a real CommonMark parser (markdown-it-py): what a
PR comment would show must hold no link, image or HTML the foreign text asked for.
"""

from __future__ import annotations

import pytest
from markdown_it import MarkdownIt

from harness.base.textsafe import markdown, terminal
from harness.operations.classify import ClassifierConfig, classify_tools, startup_lines
from harness.report.judgement import judge_events
from harness.report.markdown import judgement_markdown
from harness.session import EventList, Session

HOSTILE_NAMES = [
    "create_\x1b]0;pwned\x07booking",  # retitles the terminal
    "create_\x1b[2J\x1b[Hbooking",  # clears the screen
    "create_booking\rnothing to see",  # hides what came before
    "create_\u202ekoob",  # shows text reversed
    "create_\x9b31mred",  # the 8-bit CSI
    "create_\ud800lone",  # cannot even be encoded for stderr
]
MD = MarkdownIt("commonmark")


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_v6_terminal_text_has_no_control_characters_left(name):
    shown = terminal(name)
    assert shown.isprintable(), repr(shown)
    shown.encode("utf-8")  # printable to any UTF-8 stderr
    assert "create_" in shown


def test_v6_terminal_keeps_plain_text_and_optionally_newlines():
    assert terminal("booking / F1 / try-again") == "booking / F1 / try-again"
    assert terminal("a\nb") == "a\\x0ab"
    assert terminal("a\nb\x1b", lines=True) == "a\nb\\x1b"


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_v6_c7_startup_lines_escape_upstream_tool_names(name):  # C7
    classification = classify_tools([{"name": name}], ClassifierConfig())
    for line in startup_lines(classification, ["idempotency_key"]):
        assert "\x1b" not in line and "\r" not in line and "\x9b" not in line


@pytest.mark.parametrize(
    "text",
    [
        "![x](https://tracker.example/pixel.png)",
        "[click here](https://evil.example)",
        "<img src=x onerror=alert(1)>",
        "<https://evil.example>",
        "[ref]\n\n[ref]: https://evil.example",
        "&#x3C;img src=x&#x3E;",
    ],
)
def test_v6_markdown_text_renders_no_link_image_or_html(text):
    html = MD.render(markdown(text))
    assert "<a " not in html and "<img" not in html, html
    assert html.startswith("<p>") and html.count("<p>") == 1  # one paragraph, one line


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("https://evil.example/x", "https\\://evil.example/x"),  # GitHub's extended autolink
        ("www.evil.example", "www\\.evil.example"),
        ("mail bob@evil.example", "mail bob\\@evil.example"),
        ("gemma|4", "gemma\\|4"),
        ("qwen3:14b", "qwen3:14b"),
    ],
)
def test_v6_markdown_breaks_autolinks_and_table_pipes(text, expected):
    assert markdown(text) == expected


@pytest.mark.parametrize("lead", ["# Heading", "- item", "1. item", "+ item", "=== rule"])
def test_v6_markdown_at_a_line_start_is_no_block(lead):
    html = MD.render(markdown(lead, line_start=True))
    assert html.startswith("<p>") and "<h1" not in html and "<li" not in html


def test_v6_judge_markdown_escapes_a_hostile_tool_name():
    # A tool named like an image: `judge --format md` must not pass it into a PR comment.
    tool = "![x](https://tracker.example/p.png)"
    log = EventList()
    s = Session(ClassifierConfig(write_globs=(tool,)), sinks=[log])
    s.tools_listed([{"name": tool}])
    for _ in range(2):
        ticket = s.begin_call(tool, {"a": 1})
        s.upstream_result(ticket, {"content": []})
        s.answered(ticket, is_error=False)
    s.end("done")
    text = judgement_markdown(judge_events(log.events))
    assert "![x](" not in text and tool.replace("(", "\\(") not in text
    html = MD.enable("table").render(text)
    assert "<img" not in html and "<a " not in html
    assert "tracker.example" in html  # shown as text, not dropped


