"""The headless Chromium helper that the HTML report tests rely on, on tiny local pages."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from tests.support import browser

pytestmark = pytest.mark.slow

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _html(tmp_path: Path, name: str, body: str, head: str = "") -> Path:
    page = tmp_path / name
    page.write_text(
        f"<!doctype html><html><head><meta charset='utf-8'><title>{name}</title>{head}</head>"
        f"<body>{body}</body></html>",
        encoding="utf-8",
    )
    return page


def _png_size(data: bytes) -> tuple[int, int]:
    """Width and height from the IHDR chunk, which always comes first."""
    assert data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_console_error_on_page_is_reported(chromium, tmp_path):
    page_file = _html(tmp_path, "err.html", "<script>console.error('boom', 42)</script>")
    with chromium.new_page(page_file) as page:
        errors = page.console_errors()
    assert [(e.kind, e.text) for e in errors] == [("console", "boom 42")]
    assert errors[0].url == page_file.as_uri()


def test_console_log_and_warning_are_not_errors(chromium, tmp_path):
    page_file = _html(tmp_path, "warn.html", "<script>console.log('a'); console.warn('b')</script>")
    with chromium.new_page(page_file) as page:
        assert page.console_errors() == []


def test_uncaught_exception_after_load_is_reported(chromium, tmp_path):
    body = "<script>setTimeout(() => { throw new Error('late failure') }, 0)</script>"
    with chromium.new_page(_html(tmp_path, "throw.html", body)) as page:
        # The timer may fire after the load event: wait for it, bounded.
        page.evaluate("new Promise(resolve => setTimeout(resolve, 50))", timeout=10)
        errors = page.console_errors()
    assert [e.kind for e in errors] == ["exception"]
    assert "late failure" in errors[0].text


def test_failed_request_is_reported_with_its_url(chromium, tmp_path):
    page_file = _html(tmp_path, "img.html", "<img src='missing.png' alt='x'>")
    with chromium.new_page(page_file) as page:
        errors = page.console_errors()
        requested = page.requested_urls()
    missing = (tmp_path / "missing.png").as_uri()
    assert [(e.kind, e.url) for e in errors] == [("network", missing)]
    assert "ERR_FILE_NOT_FOUND" in errors[0].text
    assert requested == [page_file.as_uri(), missing]


def test_clean_page_reports_no_errors_and_requests_only_itself(chromium, tmp_path):
    page_file = _html(
        tmp_path,
        "clean.html",
        "<h1 id='t'>Runs</h1><svg width='10' height='10'><rect width='10' height='10'/></svg>",
        head="<style>h1 { color: #123456 }</style>",
    )
    with chromium.new_page(page_file) as page:
        assert page.console_errors() == []
        assert page.requested_urls() == [page_file.as_uri()]


def test_evaluate_returns_dom_and_json_values(chromium, tmp_path):
    body = "<table><tr><td>a</td></tr><tr><td id='n'>2 runs</td></tr></table>"
    with chromium.new_page(_html(tmp_path, "dom.html", body)) as page:
        assert page.evaluate("document.getElementById('n').textContent") == "2 runs"
        assert page.evaluate("document.querySelectorAll('tr').length") == 2
        assert page.evaluate("document.title") == "dom.html"
        assert page.evaluate("({a: [1, 'x'], b: null})") == {"a": [1, "x"], "b": None}
        assert page.evaluate("Promise.resolve(7)") == 7
        assert page.evaluate("undefined") is None


def test_evaluate_raises_when_the_script_throws(chromium, tmp_path):
    with chromium.new_page(_html(tmp_path, "e.html", "")) as page:
        with pytest.raises(browser.JavaScriptError, match="nope"):
            page.evaluate("(() => { throw new Error('nope') })()")
        # A failed evaluate is the test's own doing, not an error of the page.
        assert page.console_errors() == []


def test_screenshot_writes_a_png_of_the_viewport(chromium, tmp_path):
    body = "<div style='width:600px;height:300px;background:linear-gradient(red,blue)'></div>"
    with chromium.new_page(_html(tmp_path, "shot.html", body)) as page:
        out = page.screenshot(tmp_path / "out" / "shot.png")
    data = out.read_bytes()
    assert data.startswith(PNG_SIGNATURE)
    assert len(data) > 2000  # a gradient is not a blank page
    assert _png_size(data) == (1280, 800)


def test_full_page_screenshot_covers_content_below_the_fold(chromium, tmp_path):
    body = "<div style='height:2400px;background:#abc'></div>"
    with chromium.new_page(_html(tmp_path, "tall.html", body)) as page:
        data = page.screenshot(tmp_path / "tall.png", full_page=True).read_bytes()
    width, height = _png_size(data)
    assert width == 1280
    assert height >= 2400


def test_missing_local_file_raises_before_chromium_is_asked(chromium, tmp_path):
    with pytest.raises(FileNotFoundError):
        chromium.new_page(tmp_path / "nope.html")


def test_open_page_starts_and_ends_its_own_chromium(chromium_path, tmp_path):
    page_file = _html(tmp_path, "own.html", "<p id='p'>x</p>")
    with browser.open_page(page_file, executable=chromium_path) as page:
        temp_dir = page.browser.temp_dir
        assert page.browser.processes(), "chromium should be running while the page is open"
        assert page.evaluate("document.getElementById('p').textContent") == "x"
    assert browser.processes_mentioning(str(temp_dir)) == []
    assert not temp_dir.exists()
    page.close()  # closing twice is harmless


def test_close_ends_every_chromium_process_even_without_browser_close(chromium_path):
    chrome = browser.Browser(executable=chromium_path)
    temp_dir = chrome.temp_dir
    assert chrome.pid in chrome.processes()
    chrome._exits.close()  # the CDP route to a clean shutdown is gone: close() must still kill
    chrome.close()
    assert browser.processes_mentioning(str(temp_dir)) == []
    assert not temp_dir.exists()


def test_browser_that_exits_at_start_raises_with_its_output(tmp_path):
    fake = tmp_path / "fake-chromium"
    fake.write_text("#!/bin/sh\necho 'cannot open display' >&2\nexit 3\n")
    fake.chmod(0o755)
    with pytest.raises(browser.BrowserError, match="exited with 3: cannot open display"):
        browser.Browser(executable=str(fake), timeout=10)


def test_a_desktop_window_leaves_the_page_its_width_less_a_classic_scrollbar(chromium, tmp_path):
    with chromium.new_page(_html(tmp_path, "window.html", "<p>x</p>")) as page:
        page.set_window(1280, 900)
        width = page.evaluate("document.documentElement.clientWidth")
    assert width == 1280 - browser.CLASSIC_SCROLLBAR_PX
