"""An HTML page parsed the way the report tests read it: tags, text, unbalanced closing tags;
and the hostile text they put into a report to see it shown as text."""

from __future__ import annotations

from html.parser import HTMLParser

HOSTILE = (
    '</pre></div></details><script>alert("x")</script>'
    '<img src="https://evil.example/p.png" onerror="alert(1)">'
    '<a href="javascript:alert(2)">x</a>{{ 7*7 }}'
)


VOID = {
    "area",
    "base",
    "br",
    "col",
    "embed",
    "hr",
    "img",
    "input",
    "link",
    "meta",
    "source",
    "track",
    "wbr",
}
# SVG elements written self-closing (<rect\/>): the parser reports them as start-end tags.


class Page(HTMLParser):
    """Collects tags, attributes, text and unbalanced closing tags of a page."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.stack: list[str] = []
        self.errors: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_endtag(self, tag):
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"unexpected </{tag}> with open {self.stack[-3:]}")
            return
        self.stack.pop()

    def handle_data(self, data):
        self.text.append(data)

    def find(self, tag: str, **attrs: str) -> list[dict[str, str | None]]:
        return [
            a for t, a in self.tags if t == tag and all(a.get(k) == v for k, v in attrs.items())
        ]
