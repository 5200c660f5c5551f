"""Headless Chromium over the Chrome DevTools Protocol, for tests of the HTML reports.

    with open_page("reports/run.html") as page:
        assert page.console_errors() == []
        assert page.evaluate("document.title") == "Runs"
        page.screenshot(tmp_path / "run.png")

One Chromium process per `Browser`, started with a fresh profile in a temp dir and its own
process group, so `close()` (or the end of a `with` block) leaves no process behind. All
CDP traffic goes over one websocket to the browser endpoint, with one flattened session per
page. Every wait has a deadline; nothing sleeps to synchronise.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import itertools
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

# Debian's /usr/bin/chromium is a shell wrapper that adds extension and GPU flags of its
# own; the real binary behind it takes our flags as given.
_CANDIDATES = (
    "/usr/lib/chromium/chromium",
    "chromium",
    "chromium-browser",
    "google-chrome",
    "google-chrome-stable",
)

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
    "--mute-audio",
    "--window-size=1280,800",
    "--remote-debugging-port=0",
)

VIEWPORT = (1280, 800)
# A desktop window's classic vertical scrollbar takes this much of its width (Windows: 17 px;
# GTK and macOS with a mouse attached: 15-16 px). The test browser hides its scrollbars
# (--hide-scrollbars), so a page laid out at a window's full width would get room that a real
# window of that width does not give it.
CLASSIC_SCROLLBAR_PX = 17
START_TIMEOUT = 90.0  # a bound: Chromium took over 30 s to start at load 12-38
COMMAND_TIMEOUT = 30.0


class BrowserError(RuntimeError):
    """Chromium did not start, a CDP command failed, or a page could not be loaded."""


class JavaScriptError(BrowserError):
    """`Page.evaluate` threw in the page."""


def find_chromium() -> str | None:
    """Path of a Chromium binary (env CHROMIUM_BIN first), or None."""
    override = os.environ.get("CHROMIUM_BIN")
    for candidate in (override, *_CANDIDATES) if override else _CANDIDATES:
        path = candidate if os.path.isabs(candidate) else shutil.which(candidate)
        if path and os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def to_url(path_or_url: str | os.PathLike[str]) -> str:
    """A URL for a local file path (which must exist) or an URL as given."""
    text = os.fspath(path_or_url)
    if "://" in text or text.startswith(("about:", "data:")):
        return text
    path = Path(text).resolve()
    if not path.is_file():
        raise FileNotFoundError(path)
    return path.as_uri()


@dataclass(frozen=True)
class ConsoleError:
    """One problem a page reported: kind is console, exception, log or network."""

    kind: str
    text: str
    url: str = ""


def _deadline(timeout: float) -> float:
    return time.monotonic() + timeout


def _remaining(deadline: float) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError("deadline passed")
    return left


class Browser:
    """One headless Chromium process and its CDP connection."""

    def __init__(self, executable: str | None = None, *, timeout: float = START_TIMEOUT):
        exe = executable or find_chromium()
        if exe is None:
            raise BrowserError("chromium not found (apt-get install -y chromium)")
        self._ids = itertools.count(1)
        self._events: dict[str, list[dict[str, Any]]] = {}
        self._pages: list[Page] = []
        # Everything chromium writes goes below this unique dir, which its helpers' command
        # lines then name: that is how close() finds the crash handlers, which leave the
        # process group.
        self._root = Path(tempfile.mkdtemp(prefix="agent-harness-chromium-"))
        self._profile = self._root / "profile"
        self._log = open(self._root / "chromium.log", "w+b")
        env = {
            **os.environ,
            "XDG_CONFIG_HOME": str(self._root / "config"),  # crashpad's database
            "XDG_CACHE_HOME": str(self._root / "cache"),
        }
        self._proc: subprocess.Popen[bytes] | None = None
        self._ws: ClientConnection | None = None
        self._exits = contextlib.ExitStack()
        atexit.register(self.close)
        try:
            self._proc = subprocess.Popen(
                [exe, *CHROMIUM_FLAGS, f"--user-data-dir={self._profile}", "about:blank"],
                stdin=subprocess.DEVNULL,
                stdout=self._log,
                stderr=self._log,
                env=env,
                # Own process group: close() can end the renderers and helpers too.
                start_new_session=True,
            )
            # Entered as a context (websockets >= 17 warns otherwise), left in close().
            self._ws = self._exits.enter_context(
                connect(
                    self._wait_for_endpoint(_deadline(timeout)),
                    proxy=None,
                    max_size=256 * 1024 * 1024,  # full-page screenshots are big base64 strings
                    open_timeout=timeout,
                    ping_interval=None,
                )
            )
        except BaseException:
            self.close()
            raise

    @property
    def temp_dir(self) -> Path:
        """The throwaway dir holding profile, caches and log (deleted by close)."""
        return self._root

    def processes(self) -> list[int]:
        """Live (not zombie) processes of this browser, helpers included."""
        return processes_mentioning(str(self._root))

    @property
    def pid(self) -> int | None:
        """Process id (= process group id) of the browser, None once closed."""
        return self._proc.pid if self._proc else None

    def _wait_for_endpoint(self, deadline: float) -> str:
        """Poll DevToolsActivePort (port, then browser target path) until Chromium wrote it."""
        port_file = self._profile / "DevToolsActivePort"
        while True:
            assert self._proc is not None
            if self._proc.poll() is not None:
                raise BrowserError(
                    f"chromium exited with {self._proc.returncode}: {self._log_tail()}"
                )
            try:
                lines = [line.strip() for line in port_file.read_text().split("\n")]
            except FileNotFoundError:
                lines = []
            if len(lines) >= 2 and lines[0].isdigit() and lines[1].startswith("/devtools/"):
                return f"ws://127.0.0.1:{lines[0]}{lines[1]}"
            if time.monotonic() > deadline:
                raise BrowserError(f"chromium wrote no DevToolsActivePort: {self._log_tail()}")
            time.sleep(0.02)  # polling a file chromium writes, bounded by the deadline

    def _log_tail(self) -> str:
        self._log.flush()
        self._log.seek(0)
        return self._log.read().decode(errors="replace")[-2000:]

    def send(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        session_id: str | None = None,
        timeout: float = COMMAND_TIMEOUT,
    ) -> dict[str, Any]:
        """Send one CDP command and return its result; events seen meanwhile are kept."""
        if self._ws is None:
            raise BrowserError("browser is closed")
        message: dict[str, Any] = {"id": next(self._ids), "method": method, "params": params or {}}
        if session_id:
            message["sessionId"] = session_id
        self._ws.send(json.dumps(message))
        deadline = _deadline(timeout)
        while True:
            reply = self._receive(deadline, method)
            if reply.get("id") == message["id"]:
                if "error" in reply:
                    raise BrowserError(f"{method}: {reply['error'].get('message', reply)}")
                return reply.get("result", {})

    def wait_for_event(
        self,
        session_id: str,
        predicate: Callable[[dict[str, Any]], bool],
        timeout: float = COMMAND_TIMEOUT,
        what: str = "event",
    ) -> dict[str, Any]:
        """Return (and consume) the first event of a session matching `predicate`."""
        deadline = _deadline(timeout)
        while True:
            events = self._events.setdefault(session_id, [])
            for index, event in enumerate(events):
                if predicate(event):
                    return events.pop(index)
            self._receive(deadline, what)

    def _receive(self, deadline: float, what: str) -> dict[str, Any]:
        assert self._ws is not None
        try:
            raw = self._ws.recv(timeout=_remaining(deadline))
        except TimeoutError:
            raise BrowserError(f"timed out waiting for {what}") from None
        except ConnectionClosed as exc:
            raise BrowserError(f"chromium closed the connection: {exc}") from None
        message = json.loads(raw)
        if "method" in message:
            self._events.setdefault(message.get("sessionId", ""), []).append(message)
            page = self._page_for(message.get("sessionId"))
            if page is not None:
                page._observe(message)
        return message

    def _page_for(self, session_id: str | None) -> Page | None:
        for page in self._pages:
            if page.session_id == session_id:
                return page
        return None

    def new_page(
        self, path_or_url: str | os.PathLike[str], timeout: float = COMMAND_TIMEOUT
    ) -> Page:
        """Open a new tab, start recording problems, load the page and wait for its load event."""
        url = to_url(path_or_url)
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})
        page = Page(self, target, session["sessionId"])
        self._pages.append(page)
        # Domains on before navigating, so problems during the load are recorded too.
        for domain in ("Page", "Runtime", "Log", "Network"):
            page.send(f"{domain}.enable")
        page.send("Page.setLifecycleEventsEnabled", {"enabled": True})
        # Headless window size minus its (invisible) frame varies: pin the viewport.
        page.set_viewport(*VIEWPORT)
        page.goto(url, timeout=timeout)
        return page

    def _forget(self, page: Page) -> None:
        if page in self._pages:
            self._pages.remove(page)
        self._events.pop(page.session_id, None)

    def close(self) -> None:
        """Close the browser, end its whole process group, delete the profile. Idempotent."""
        atexit.unregister(self.close)
        ws, self._ws = self._ws, None
        proc, self._proc = self._proc, None
        asked = False
        if ws is not None:
            try:
                ws.send(json.dumps({"id": next(self._ids), "method": "Browser.close"}))
                asked = True
            except (ConnectionClosed, OSError):
                pass
        try:
            self._exits.close()
        except (ConnectionClosed, OSError):
            pass
        if proc is not None:
            if not asked:
                _signal_group(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
            # Helpers (zygote, renderers) can outlive the browser: end the group regardless.
            _signal_group(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
            self._end_stragglers(_deadline(10))
        self._pages.clear()
        self._log.close()
        shutil.rmtree(self._root, ignore_errors=True)

    def _end_stragglers(self, deadline: float) -> None:
        """Kill the crash handlers (own session, outside the group) and wait until all are gone."""
        while pids := self.processes():
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            if time.monotonic() > deadline:
                raise BrowserError(f"chromium processes survived close(): {pids}")
            time.sleep(0.02)  # they are SIGKILLed; wait for the kernel, bounded

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class Page:
    """One tab: evaluate JavaScript, take screenshots, read the problems it reported."""

    def __init__(self, browser: Browser, target_id: str, session_id: str):
        self.browser = browser
        self.target_id = target_id
        self.session_id = session_id
        self.url = "about:blank"
        self._errors: list[ConsoleError] = []
        self._requested: list[str] = []
        self._request_urls: dict[str, str] = {}
        self._owns_browser = False
        self._closed = False

    def send(self, method: str, params: dict[str, Any] | None = None, **kw: Any) -> dict[str, Any]:
        """A CDP command in this page's session."""
        return self.browser.send(method, params, session_id=self.session_id, **kw)

    def set_viewport(self, width: int, height: int, *, mobile: bool = False) -> None:
        """Lay the page out for a screen of this size (`mobile`: a phone's meta viewport)."""
        self.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": mobile},
        )

    def set_window(self, width: int, height: int) -> None:
        """Lay the page out as a desktop browser window this wide shows it: less its scrollbar."""
        self.set_viewport(width - CLASSIC_SCROLLBAR_PX, height)

    def goto(self, path_or_url: str | os.PathLike[str], timeout: float = COMMAND_TIMEOUT) -> None:
        """Navigate and wait for the load event (bounded by `timeout`)."""
        url = to_url(path_or_url)
        reply = self.send("Page.navigate", {"url": url}, timeout=timeout)
        if reply.get("errorText"):
            raise BrowserError(f"cannot load {url}: {reply['errorText']}")
        self.url = url
        loader = reply.get("loaderId")
        if loader:  # same-document navigations (#fragment) load nothing
            # Matched by loader id: a late "load" of the previous document cannot pass for it.
            self.browser.wait_for_event(
                self.session_id,
                lambda e: (
                    e["method"] == "Page.lifecycleEvent"
                    and e["params"].get("name") == "load"
                    and e["params"].get("loaderId") == loader
                ),
                timeout=timeout,
                what=f"load event of {url}",
            )

    def _observe(self, event: dict[str, Any]) -> None:
        method, params = event["method"], event.get("params", {})
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            text = " ".join(_remote_object_text(arg) for arg in params.get("args", []))
            self._errors.append(ConsoleError("console", text, _top_frame_url(params)))
        elif method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            text = _remote_object_text(details.get("exception", {})) or details.get("text", "")
            self._errors.append(ConsoleError("exception", text, details.get("url", "")))
        elif method == "Log.entryAdded":
            entry = params.get("entry", {})
            # Network problems are taken from the Network domain below, with their URL.
            if entry.get("level") == "error" and entry.get("source") != "network":
                self._errors.append(
                    ConsoleError("log", entry.get("text", ""), entry.get("url", ""))
                )
        elif method == "Network.requestWillBeSent":
            url = params.get("request", {}).get("url", "")
            self._requested.append(url)
            self._request_urls[params.get("requestId", "")] = url
        elif method == "Network.loadingFailed" and not params.get("canceled"):
            url = self._request_urls.get(params.get("requestId", ""), "")
            self._errors.append(ConsoleError("network", params.get("errorText", ""), url))
        elif method == "Network.responseReceived":
            response = params.get("response", {})
            if int(response.get("status") or 0) >= 400:
                text = f"HTTP {response.get('status')} {response.get('statusText', '')}".strip()
                self._errors.append(ConsoleError("network", text, response.get("url", "")))

    def _flush(self) -> None:
        # CDP delivers events in order: once a round trip returns, every event the page
        # emitted before it has been observed.
        self.send("Runtime.evaluate", {"expression": "0"})
        # Observed events are not needed again (waits look only for later ones).
        self.browser._events.pop(self.session_id, None)

    def console_errors(self) -> list[ConsoleError]:
        """Console errors, uncaught exceptions and failed requests so far, in order."""
        self._flush()
        return list(self._errors)

    def requested_urls(self) -> list[str]:
        """Every URL the page requested so far (the page itself first)."""
        self._flush()
        return list(self._requested)

    def evaluate(self, expression: str, timeout: float = COMMAND_TIMEOUT) -> Any:
        """Value of a JavaScript expression (promises awaited); raises JavaScriptError."""
        reply = self.send(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
            timeout=timeout,
        )
        if "exceptionDetails" in reply:
            details = reply["exceptionDetails"]
            text = _remote_object_text(details.get("exception", {})) or details.get("text", "")
            raise JavaScriptError(text)
        return reply.get("result", {}).get("value")

    def screenshot(self, path: str | os.PathLike[str], *, full_page: bool = False) -> Path:
        """Write a PNG of the viewport (or of the whole page) and return its path."""
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            size = self.send("Page.getLayoutMetrics")["cssContentSize"]
            params["captureBeyondViewport"] = True
            params["clip"] = {
                "x": 0,
                "y": 0,
                "width": size["width"],
                "height": size["height"],
                "scale": 1,
            }
        data = self.send("Page.captureScreenshot", params)["data"]
        out = Path(path)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(base64.b64decode(data))
        return out

    def close(self) -> None:
        """Close the tab (and the browser, if `open_page` started it for this page)."""
        if self._closed:
            return
        self._closed = True
        try:
            if self.browser._ws is not None:
                self.browser.send("Target.closeTarget", {"targetId": self.target_id})
        finally:
            self.browser._forget(self)
            if self._owns_browser:
                self.browser.close()

    def __enter__(self) -> Page:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def open_page(
    path_or_url: str | os.PathLike[str],
    *,
    executable: str | None = None,
    timeout: float = COMMAND_TIMEOUT,
) -> Page:
    """Start a Chromium of its own and load one page; closing the page ends the browser."""
    chrome = Browser(executable, timeout=START_TIMEOUT)
    try:
        page = chrome.new_page(path_or_url, timeout=timeout)
    except BaseException:
        chrome.close()
        raise
    page._owns_browser = True
    return page


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def processes_mentioning(text: str) -> list[int]:
    """Pids of live (not zombie) processes whose command line contains `text`."""
    pids = []
    needle = text.encode()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry.name}/cmdline", "rb") as f:
                cmdline = f.read()
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError, PermissionError, IndexError):
            continue
        if needle in cmdline and state not in (b"Z", b"X"):
            pids.append(int(entry.name))
    return pids


def _remote_object_text(obj: dict[str, Any]) -> str:
    if "value" in obj:
        value = obj["value"]
        return value if isinstance(value, str) else json.dumps(value)
    return str(obj.get("description") or obj.get("unserializableValue") or obj.get("type", ""))


def _top_frame_url(params: dict[str, Any]) -> str:
    frames = params.get("stackTrace", {}).get("callFrames", [])
    return frames[0].get("url", "") if frames else ""
