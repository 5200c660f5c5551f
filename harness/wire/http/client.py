"""One HTTP client policy for every request the proxy makes upstream (V9).

aiohttp follows redirects on its own: to any origin, with every header the caller gave (an API
key from `--upstream-header-env` included), and it turns a POST into a GET on 301, 302 and 303.
A redirect could so send the agent's writes and the user's credentials somewhere nobody
chose. Here no request follows a redirect by itself:

- 307 and 308 to the same origin (scheme, host and port) are followed, with method, body and
  headers kept, at most `MAX_REDIRECTS` times in a row;
- every other redirect is refused: to another origin (nothing is sent there, no header crosses),
  and 301, 302 and 303 (they would turn a POST into a GET, or lose its body). The request then
  fails with `RedirectRefused`, whose text names the target; the caller says so in one line.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any
from urllib.parse import urljoin, urlsplit, urlunsplit

import aiohttp

REDIRECTS = frozenset({301, 302, 303, 307, 308})
FOLLOWED = frozenset({307, 308})  # method and body kept (RFC 9110 15.4.8, 15.4.9)
MAX_REDIRECTS = 5
_WARNED_MAX = 100  # distinct refused targets said once each


def redact_url(url: str) -> str:
    """The URL without user name and password (V3)."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, "***@" + netloc, parts.path, parts.query, parts.fragment))


def origin(url: str) -> tuple[str, str, int | None]:
    """(scheme, host, port) with the scheme's default port filled in."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port
    except ValueError:
        port = None
    if port is None:
        port = {"http": 80, "https": 443}.get(scheme)
    return scheme, (parts.hostname or "").lower(), port


class RedirectRefused(aiohttp.ClientError):
    """The upstream answered with a redirect this policy does not follow (V9)."""

    def __init__(self, method: str, url: str, status: int, target: str | None, why: str) -> None:
        self.target = target
        shown = redact_url(target) if target else "nowhere (no Location header)"
        super().__init__(
            f"the upstream at {redact_url(url)} redirected a {method} to {shown} "
            f"(HTTP {status}): not followed, {why}; nothing was sent there"
        )


class PolicyClient:
    """An aiohttp session whose every request keeps to the redirect policy above."""

    def __init__(self, session: aiohttp.ClientSession, log: Callable[[str], None]) -> None:
        self.session = session
        self._log = log
        self._warned: set[tuple[str, str | None, int]] = set()

    @contextlib.asynccontextmanager
    async def request(
        self,
        method: str,
        url: str,
        *,
        headers: Mapping[str, str],
        data: bytes | None = None,
        timeout: aiohttp.ClientTimeout | None = None,
    ) -> AsyncIterator[aiohttp.ClientResponse]:
        """The response to `method url`, after same-origin 307/308 hops; RedirectRefused else."""
        extra: dict[str, Any] = {} if timeout is None else {"timeout": timeout}
        start = origin(url)
        for _ in range(MAX_REDIRECTS + 1):
            resp = await self.session.request(
                method, url, headers=dict(headers), data=data, allow_redirects=False, **extra
            )
            if resp.status not in REDIRECTS:
                try:
                    yield resp
                finally:
                    resp.release()
                return
            location = resp.headers.get("Location")
            resp.release()
            target = urljoin(url, location) if location else None
            if target is None:
                self._refuse(method, url, resp.status, None, "it names no target")
            elif origin(target) != start:
                self._refuse(method, url, resp.status, target, "another origin")
            elif resp.status not in FOLLOWED:
                why = (
                    f"HTTP {resp.status} would turn the POST into a GET"
                    if method == "POST"
                    else "only 307 and 308 are followed"
                )
                self._refuse(method, url, resp.status, target, why)
            url = target  # type: ignore[assignment]  # same origin, 307/308: method and body kept
        exc = RedirectRefused(
            method, url, 307, url, f"more than {MAX_REDIRECTS} redirects in a row"
        )
        self._log(f"WARNING: {exc}")
        raise exc

    def _refuse(self, method: str, url: str, status: int, target: str | None, why: str) -> None:
        exc = RedirectRefused(method, url, status, target, why)
        said = (method, target, status)
        if said not in self._warned and len(self._warned) < _WARNED_MAX:
            self._warned.add(said)
            self._log(f"WARNING: {exc}")
        raise exc

    async def close(self) -> None:
        await self.session.close()
