"""One escaping step for foreign text: to a terminal, and into Markdown (SPEC V6).

Foreign text is anything the harness did not write itself: upstream tool names and error
messages, names and model labels from a spec, what a model said. Printed raw, a tool named
"\\x1b]52;c;...\\x07" rewrites the user's clipboard and "\\r" hides what came before; in a PR
comment, `![x](https://tracker)` loads an image and `[safe](https://evil)` hides a link.
Every such string passes through `terminal()` or `markdown()` before it is shown.
"""

from __future__ import annotations

import re

# C0 controls (but tab), DEL, C1 controls; bidirectional overrides and isolates (text shown
# in another order than it is stored); lone surrogates (they cannot even be encoded).
_UNSAFE = "\x00-\x08\x0a-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff"
_TERMINAL = re.compile(f"[{_UNSAFE}]")
_TERMINAL_LINES = re.compile(f"[{_UNSAFE.replace(chr(10) + '-', chr(11) + '-')}]")


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def terminal(text: object, *, lines: bool = False) -> str:
    """The text with every control character shown as an escape (`\\x1b`), so it cannot move
    the cursor, recolour, retitle or clear a terminal; `lines` keeps newlines."""
    value = str(text)
    pattern = _TERMINAL_LINES if lines else _TERMINAL
    return pattern.sub(_visible, value) if pattern.search(value) else value


# Inline Markdown that does something beyond showing text: links and images ([ ]), code (`),
# emphasis (* _ ~), raw HTML and <autolinks> (< > &), table cells (|).
_MD_SPECIAL = re.compile(r"([\\`*_~\[\]|])")
# GitHub's extended autolinks: a scheme's "://", "www." and e-mail addresses.
_MD_AUTOLINK = re.compile(r"(?i)(?<=[a-z0-9+.-])(:)(?=//)|(?<=\bwww)(\.)|(@)(?=[\w-])")
# What turns a line into a heading, list item, rule or setext underline when it leads.
_MD_LEADING = re.compile(r"^(\s*)([#+=-]|\d+(?=[.)]))")


def markdown(text: object, *, line_start: bool = False) -> str:
    """The text as inline Markdown that renders as exactly this text: one line, no link, no
    image, no HTML, no autolink, no table break. `line_start`: it begins a line, so it must
    not begin a heading or a list either."""
    value = terminal(" ".join(str(text).split()))
    value = _MD_SPECIAL.sub(r"\\\1", value)
    value = value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    value = _MD_AUTOLINK.sub(lambda m: "\\" + m.group(), value)
    return _MD_LEADING.sub(_lead, value, count=1) if line_start else value


def _lead(match: re.Match[str]) -> str:
    space, marker = match.groups()
    return f"{space}{marker}\\" if marker[0].isdigit() else f"{space}\\{marker}"
