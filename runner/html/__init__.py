"""Static reports (R7): one self-contained HTML file, and Markdown for a PR comment."""

from runner.html.markdown import render_markdown
from runner.html.render import render_html
from runner.html.report import write_report

__all__ = ["render_html", "render_markdown", "write_report"]
