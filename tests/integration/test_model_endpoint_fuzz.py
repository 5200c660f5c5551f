"""Round 4's fuzzing of the model endpoint a run serves to a command agent (U5, V15).

A seeded generator sends a few hundred requests over a real socket, byte by byte as written
(so framing can lie), to an endpoint served as a run serves it (`serve_model`, the scripted
model answered through litellm's real path): valid requests of each API it speaks (OpenAI chat
completions, Responses, Anthropic Messages, Gemini generateContent and
streamGenerateContent), plain and streamed, and the same mutated (wrong types, missing and
extra members, deep nesting, huge strings within and past the body bound, invalid JSON and
UTF-8, truncated bodies, content-length lies, chunked); the run's key in each form clients
send it, wrong keys, another run's key, none; Host headers that name the endpoint and others
(missing, userinfo, uppercase, other ports); unknown methods and paths, traversal-like paths,
query strings, `?key=`.

On every case: exactly one HTTP response, within BOUND_S; 200 only for an authenticated,
well-formed request to a known route, else the status the endpoint documents (403 foreign
Host, 401 no key, 404, 405, 413, 400; a malformed request the endpoint's own check lets
through may be read leniently (200) or fail in the model (502)); a refusal is one line of JSON
in its API's error shape, without a traceback, a path or a secret (the run's key, another
run's, a provider key in the runner's environment); a request without the key or from a
foreign Host never reaches the model (nothing served, nothing in `conversation()`). After all
of it, a valid request of each API still gets its right answer.

Seeds: 1 and 2 in `make test`; MODEL_ENDPOINT_FUZZ_SEED=N replays seed N alone
(docs/security.md).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
from dataclasses import dataclass, field
from typing import Any

import pytest

from runner.experiment import ModelSpec
from runner.models.endpoint import MAX_BODY_BYTES, ModelEndpoint, serve_model
from tests.support.booking import ASK, BOOK, SCHEMA

pytestmark = pytest.mark.anyio

SEEDS = (
    [int(os.environ["MODEL_ENDPOINT_FUZZ_SEED"])]
    if "MODEL_ENDPOINT_FUZZ_SEED" in os.environ
    else [1, 2]
)
CASES_PER_SEED = 300
BOUND_S = 30.0  # every exchange ends within this, a response read to its end
# provider keys in the runner's environment: no answer may carry them
ENV_SECRETS = {
    "OPENAI_API_KEY": "sk-fuzzprovider0123456789abcdefABCDEF",
    "ANTHROPIC_API_KEY": "sk-ant-fuzzprovider0123456789abcdef",
    "GEMINI_API_KEY": "AIzaFuzzProvider0123456789abcdefghij",
}
MARK = "intruder"  # the text of every request that must never reach the model

# (API, path, the member the endpoint requires, the types it takes there)
ROUTES = [
    ("chat", "/v1/chat/completions", "messages", (list,)),
    ("chat", "/chat/completions", "messages", (list,)),
    ("responses", "/v1/responses", "input", (str, list)),
    ("responses", "/responses", "input", (str, list)),
    ("messages", "/v1/messages", "messages", (list,)),
    ("messages", "/messages", "messages", (list,)),
    ("gemini", "/v1beta/models/{model}:generateContent", "contents", (list, dict)),
    ("gemini", "/v1beta/models/{model}:streamGenerateContent", "contents", (list, dict)),
    ("gemini", "/v1/models/{model}:generateContent", "contents", (list, dict)),
]
GEMINI_METHOD = re.compile(r"^/(?:v1beta|v1)/models/[^:]+:([^/?]+)$")
UNKNOWN_PATHS = [
    "/", "/v1", "/v1/", "/v2/chat/completions", "/v1/chat/completion", "/v1/chat/completions/x",
    "/v1/engines/gpt/completions", "/v1/completions", "/admin", "/../../etc/passwd",
    "/v1/chat/completions/../../../../etc/passwd", "/%2e%2e/%2e%2e/etc/passwd",
    "/v1/..%2f..%2fetc%2fpasswd", "//etc/passwd", "/v1/messages/../../../proc/self/environ",
    "/v1beta/models/m:deleteEverything", "/v1beta/models/m:", "/v1beta/models/m",
]  # fmt: skip
TEXT_TYPES: list[Any] = [None, 0, 1.5, True, "x", {}, {"a": [1]}, []]


def _valid(api: str, stream: bool, text: str) -> dict[str, Any]:
    """A well-formed request of `api` asking for the booking."""
    if api == "chat":
        tool = {"type": "function", "function": {"name": "create_booking", "parameters": SCHEMA}}
        body: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": text}],
                                "tools": [tool]}  # fmt: skip
    elif api == "responses":
        tool = {"type": "function", "name": "create_booking", "parameters": SCHEMA}
        body = {"model": "m", "input": text, "tools": [tool]}
    elif api == "messages":
        tool = {"name": "create_booking", "input_schema": SCHEMA}
        body = {"model": "m", "max_tokens": 100, "messages": [{"role": "user", "content": text}],
                "tools": [tool]}  # fmt: skip
    else:
        return {"contents": [{"role": "user", "parts": [{"text": text}]}],
                "tools": [{"functionDeclarations": [{"name": "create_booking",
                                                     "parameters": SCHEMA}]}]}  # fmt: skip
    if stream:
        body["stream"] = True
    return body


@dataclass
class Case:
    """One request as bytes, and what the endpoint may answer it."""

    number: int
    method: str
    target: str
    headers: list[tuple[str, str]]
    body: bytes = b""
    framing: str = "length"  # length, chunked, short (a smaller length), long (a larger one)
    expect: set[int] = field(default_factory=set)
    authorised: bool = True  # the right Host and the run's key
    answer: str = ""  # for a well-formed request: the API whose answer is checked
    stream: bool = False
    note: str = ""
    unparsed: bool = False  # HTTP the parser refuses: no Host, bytes after `Connection: close`

    def raw(self) -> bytes:
        """The request on the wire."""
        lines = [f"{self.method} {self.target} HTTP/1.1", *(f"{k}: {v}" for k, v in self.headers)]
        body = self.body
        if self.framing == "chunked":
            lines.append("Transfer-Encoding: chunked")
            cut, pieces = 0, []
            while cut < len(body):
                size = min(len(body) - cut, 1 + (hash((self.number, cut)) % 4096))
                pieces.append(b"%x\r\n" % size + body[cut : cut + size] + b"\r\n")
                cut += size
            body = b"".join(pieces) + b"0\r\n\r\n"
        elif self.method in ("POST", "PUT", "PATCH") or body:
            length = len(body)
            if self.framing == "short":
                length = max(0, len(body) - 1 - self.number % max(1, len(body) - 1))
            elif self.framing == "long":
                length = len(body) + 1 + self.number % 100
            lines.append(f"Content-Length: {length}")
        lines.append("Connection: close")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


class Fuzz:
    """The seeded generator of cases against endpoint A (B: another run's endpoint)."""

    def __init__(self, rng: random.Random, a: ModelEndpoint, b: ModelEndpoint) -> None:
        self.rng, self.a, self.b = rng, a, b
        self.port = int(a.server_url.rsplit(":", 1)[1])

    # -- Host and key ------------------------------------------------------------------------

    def host(self) -> tuple[str | None, bool]:
        """(Host header or None for none, whether it names the endpoint)."""
        port, rng = self.port, self.rng
        if rng.random() < 0.8:
            return rng.choice([f"127.0.0.1:{port}", f"localhost:{port}"]), True
        return rng.choice([
            None, "127.0.0.1", "localhost", f"127.0.0.1:{port + 1}", "evil.example",
            f"evil.example:{port}", f"user:pw@127.0.0.1:{port}", f"LOCALHOST:{port}",
            f"Localhost:{port}", f"127.0.0.1:{port}.", f"[::1]:{port}", f"0.0.0.0:{port}",
            f"127.0.0.1.nip.io:{port}", f"localhost.:{port}", f"127.0.0.1:{port}@evil.example",
            f"evil.example#127.0.0.1:{port}", "",
        ]), False  # fmt: skip

    def key(self) -> tuple[list[tuple[str, str]], str, bool]:
        """(headers, query string, whether they carry the run's key)."""
        token, rng = self.a.token, self.rng
        if rng.random() < 0.75:
            form = rng.choice(["bearer", "bearer-lower", "x-api-key", "goog", "query"])
            headers = {
                "bearer": [("Authorization", f"Bearer {token}")],
                "bearer-lower": [("authorization", f"bearer {token}")],
                "x-api-key": [("x-api-key", token)],
                "goog": [("X-Goog-Api-Key", token)],
            }.get(form, [])
            query = f"key={token}" if form == "query" else ""
            if rng.random() < 0.2:  # a wrong key beside the right one is still the run's key
                headers.append(("x-api-key" if form != "x-api-key" else "x-goog-api-key", "nope"))
            return headers, query, True
        wrong = rng.choice([
            token[:-1] + ("x" if token[-1] != "x" else "y"), token[:-1], token + "x",
            token.upper() if token.upper() != token else token.lower(), self.b.token, "", "sk-",
            ENV_SECRETS["OPENAI_API_KEY"],
        ])  # fmt: skip
        headers, query = rng.choice([
            ([], ""), ([("Authorization", f"Bearer {wrong}")], ""),
            ([("Authorization", token)], ""), ([("Authorization", f"Basic {token}")], ""),
            ([("api-key", token)], ""), ([("x-api-key", wrong)], ""),
            ([("x-goog-api-key", wrong)], ""), ([], f"key={wrong}"), ([], f"KEY={token}"),
            ([], f"apikey={token}"), ([("Cookie", f"key={token}")], ""),
        ])  # fmt: skip
        return list(headers), query, False

    # -- bodies ------------------------------------------------------------------------------

    def nested(self, depth: int) -> str:
        kind = self.rng.choice(["[]", "{}"])
        if kind == "[]":
            return "[" * depth + "1" + "]" * depth
        return '{"a":' * depth + "1" + "}" * depth

    def body(self, api: str, required: str, kinds: tuple[type, ...], text: str,
             stream: bool) -> tuple[bytes, set[int], bool]:  # fmt: skip
        """(body, statuses it may get when authorised, whether it is well-formed)."""
        rng = self.rng
        valid = _valid(api, stream, text)
        roll = rng.random()
        lenient = {200, 400, 502}  # past the endpoint's own check, read by litellm's adapters
        if roll < 0.30:
            return json.dumps(valid).encode(), {200}, True
        if roll < 0.38:  # members no API knows, at the top
            extra = {f"x_fuzz_{i}": rng.choice(TEXT_TYPES) for i in range(rng.randint(1, 5))}
            return json.dumps({**valid, **extra}).encode(), {200}, True
        if roll < 0.44:
            del valid[required]
            return json.dumps(valid).encode(), {400}, False
        if roll < 0.52:
            wrong = rng.choice([t for t in TEXT_TYPES if not isinstance(t, kinds)])
            return json.dumps({**valid, required: wrong}).encode(), {400}, False
        if roll < 0.57:
            top = rng.choice(["[]", "[1, 2]", '"x"', "7", "null", "true", "NaN"])
            return top.encode(), {400}, False
        if roll < 0.63:  # broken text: not JSON, not UTF-8, cut short, empty
            raw = json.dumps(valid).encode()
            broken = rng.choice([
                raw[: rng.randint(0, len(raw) - 1)], raw + b"}", b"{not json", b"",
                raw.replace(b'"', b"\xff", 1), b"\xff\xfe\x00" + raw, raw[:-1] + b",}",
                raw.replace(text.encode(), b"\xc3\x28"),
            ])  # fmt: skip
            return broken, {400}, False
        if roll < 0.67:  # nested past what a parser descends: refused as any other bad JSON
            depth = rng.choice([5_000, 100_000, 1_000_000])
            where = rng.random() < 0.5
            raw = self.nested(depth) if where else json.dumps({**valid, "x": "@"}).replace(
                '"@"', self.nested(depth))  # fmt: skip
            return raw.encode(), {400}, False
        if roll < 0.72:  # nested a little: parsed, then read leniently
            inner = json.loads(self.nested(rng.randint(20, 200)))
            return json.dumps({**valid, "x": inner}).encode(), {200}, True
        if roll < 0.85:  # wrong types and shapes inside the required member
            return json.dumps(self.inner_mutation(api, valid, required)).encode(), lenient, False
        if roll < 0.93:  # a huge string within the bound
            # streamed, litellm's Responses translator cuts the scripted model's arguments
            # (which carry the text) into 10-character events: 1 MB is 100,000 of them
            big = "y" * rng.choice([100_000, 1_000_000] if stream else [1_000_000, 3_000_000])
            body = _valid(api, stream, text + " " + big)
            return json.dumps(body).encode(), {200}, True
        # past the bound, by a little or more
        over = MAX_BODY_BYTES + rng.choice([1, 10, 4096])
        raw = json.dumps(valid).encode()
        pad = b'{"x_pad": "' + b"z" * (over - len(raw)) + b'", ' + raw[1:]
        return pad, {413}, False

    def inner_mutation(self, api: str, valid: dict[str, Any], required: str) -> dict[str, Any]:
        rng = self.rng
        member = valid[required]
        if isinstance(member, str):
            member = [{"role": "user", "content": member}]
        choice = rng.randrange(7)
        if choice == 0:
            member = [rng.choice(TEXT_TYPES) for _ in range(rng.randint(1, 3))]
        elif choice == 1:
            member = [{"role": rng.choice(["nobody", "", 7, None, "system", "tool"]),
                       "content": rng.choice(TEXT_TYPES)}]  # fmt: skip
        elif choice == 2:
            member = [{"parts": [{rng.choice(["inlineData", "text", "functionCall"]):
                                  rng.choice(TEXT_TYPES)}]}]  # fmt: skip
        elif choice == 3:
            member = [{"type": rng.choice(["bogus", "function_call", "tool_result", "image"]),
                       "content": rng.choice(TEXT_TYPES)}]  # fmt: skip
        elif choice == 4:
            member = []
        elif choice == 5:
            valid = {**valid, "tools": rng.choice(TEXT_TYPES + [[{"type": "function"}]])}
        else:
            valid = {**valid, rng.choice(["stream", "max_tokens", "tool_choice", "system",
                                          "instructions", "generationConfig"]):
                     rng.choice(TEXT_TYPES)}  # fmt: skip
        return {**valid, required: member}

    # -- one case ----------------------------------------------------------------------------

    def case(self, number: int) -> Case:
        rng = self.rng
        host, host_ok = self.host()
        key_headers, query, key_ok = self.key()
        headers = [("Host", host)] if host is not None else []
        headers += key_headers
        if rng.random() < 0.9:
            headers.append(("Content-Type", rng.choice(["application/json", "text/plain"])))
        authorised = host_ok and key_ok
        text = ASK if authorised else f"{MARK} {number}: {ASK}"
        roll = rng.random()
        case = Case(number, "POST", "", headers, authorised=authorised)
        if roll < 0.75:
            api, path, required, kinds = rng.choice(ROUTES)
            model = rng.choice(["m", "scripted/careful", "gemini-2.5-pro", "a%2Fb", "x.y-z"])
            path = path.format(model=model)
            # Gemini streams by its method, the others by the body's `stream`
            stream = "stream" in path if api == "gemini" else rng.random() < 0.3
            body, expect, wellformed = self.body(api, required, kinds, text, stream)
            case.body, case.expect = body, expect
            if wellformed:
                case.answer, case.stream = api, stream
            if rng.random() < 0.3:
                case.framing = "chunked"
            elif rng.random() < 0.08 and body:
                case.framing = rng.choice(["short", "long"])
                case.expect, case.answer = {400}, ""  # the body read is cut: never valid JSON
                if case.framing == "short" and len(body) > MAX_BODY_BYTES:
                    case.expect = {400, 413}
                case.body = body if case.framing == "short" else body[: len(body) // 2]
            if rng.random() < 0.05:
                case.method = rng.choice(["GET", "PUT", "DELETE", "PATCH", "OPTIONS"])
                case.expect, case.answer = {405}, ""
        elif roll < 0.85:
            case.method = rng.choice(["GET", "HEAD"])
            path = rng.choice(["/v1/models", "/models"])
            case.expect, case.answer = {200}, "models"
            if rng.random() < 0.2:
                case.method = rng.choice(["POST", "PUT", "DELETE"])
                case.body = json.dumps(_valid("chat", False, text)).encode()
                case.expect, case.answer = {405}, ""
        else:
            case.method = rng.choice(["GET", "POST", "PUT", "DELETE", "OPTIONS", "PATCH"])
            path = rng.choice(UNKNOWN_PATHS)
            case.body = (
                json.dumps(_valid("chat", False, text)).encode() if rng.random() < 0.5 else b""
            )
            case.expect, case.answer = {404}, ""
            if GEMINI_METHOD.match(path) and case.method != "POST":
                case.expect = {405}  # Gemini's route takes POST only, whatever the method
        queries = [q for q in (query, rng.choice(["", "", "alt=sse", "x=1&y=", "key=",
                                                  "a=%00%ff", "key=nope"])) if q]  # fmt: skip
        if query:  # the first `key` is the one read: keep it the run's
            queries = [q for q in queries if q == query or not q.startswith("key=")]
        rng.shuffle(queries)
        case.target = path + ("?" + "&".join(queries) if queries else "")
        case.unparsed = host is None or case.framing == "short"
        if host is None:  # HTTP/1.1 needs a Host: the parser refuses before the endpoint
            case.expect, case.answer = {400, 403}, ""
        elif not host_ok:
            case.expect, case.answer = {403}, ""
        elif not key_ok:
            case.expect, case.answer = {401}, ""
        if case.framing == "short":
            # bytes after the length, after `Connection: close`: the parser refuses them
            # (400), or the request before them is answered as it would be
            case.expect = {400} | (case.expect - {200})
        case.note = f"host={host!r} key_ok={key_ok} framing={case.framing}"
        return case


@dataclass
class Response:
    status: int
    headers: dict[str, str]
    body: bytes


def _responses(data: bytes, head_only: bool = False) -> list[Response]:
    """Every HTTP response in the bytes a connection carried, in order (a tail that is no
    response is a problem of its own, raised)."""
    out = []
    while data:
        head, sep, rest = data.partition(b"\r\n\r\n")
        assert sep, f"a response without the end of its head: {data[:200]!r}"
        status_line, *lines = head.decode("latin-1").split("\r\n")
        assert re.match(r"^HTTP/1\.[01] \d{3} ", status_line + " "), status_line
        headers = {}
        for line in lines:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        if head_only:  # the answer to HEAD: its length is the GET's, its body none
            body = b""
        elif headers.get("transfer-encoding", "").lower() == "chunked":
            body = b""
            while True:
                size_line, _, rest = rest.partition(b"\r\n")
                size = int(size_line.split(b";")[0], 16)
                body, rest = body + rest[:size], rest[size + 2 :]
                if size == 0:
                    break
        elif "content-length" in headers:
            size = int(headers["content-length"])
            body, rest = rest[:size], rest[size:]
            assert len(body) == size, "a response shorter than its Content-Length"
        else:
            body, rest = rest, b""
        out.append(Response(int(status_line.split()[1]), headers, body))
        data = rest
    return out


async def _exchange(port: int, case: Case) -> bytes:
    """Send the case and read until the endpoint closes; the sender half-closes only for a
    body shorter than its length (else the endpoint would wait for the rest, as HTTP says)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)

    async def send() -> None:
        try:
            writer.write(case.raw())
            await writer.drain()
            if case.framing == "long":
                writer.write_eof()
        except (ConnectionError, OSError):
            pass  # refused before the whole body was read: the answer is what counts

    sender = asyncio.create_task(send())
    try:
        return await reader.read()
    finally:
        await sender
        writer.close()
        try:
            await writer.wait_closed()
        except (ConnectionError, OSError):
            pass


ERROR_SHAPES = {
    "messages": lambda b: b["type"] == "error" and isinstance(b["error"]["type"], str)
    and isinstance(b["error"]["message"], str),
    "gemini": lambda b: isinstance(b["error"]["code"], int)
    and isinstance(b["error"]["message"], str) and isinstance(b["error"]["status"], str),
    "openai": lambda b: isinstance(b["error"]["message"], str)
    and isinstance(b["error"]["type"], str) and isinstance(b["error"]["code"], int),
}  # fmt: skip
PATH_IN_TEXT = re.compile(r"(?:/[\w.@+-]+){2,}\.py|site-packages|Traceback|File \"")


def _api_by_path(target: str) -> str:
    """The API whose error shape a client at this path reads (docs/runner.md)."""
    path = target.split("?", 1)[0]
    if path.endswith("/messages"):
        return "messages"
    if ":" in path.rsplit("/", 1)[-1]:
        return "gemini"
    return "openai"


def _check_answer(case: Case, response: Response) -> list[str]:
    """What is wrong with a well-formed request's 200 answer."""
    if case.method == "HEAD":
        return [] if not response.body else ["a HEAD answered with a body"]
    if case.answer == "models":
        data = json.loads(response.body)
        return [] if data["data"][0]["id"] == "scripted/careful" else [f"models: {data}"]
    if case.stream:
        events = [line for line in response.body.decode().splitlines() if line.startswith("data:")]
        ok = response.headers.get("content-type", "").startswith("text/event-stream") and events
        return [] if ok else ["a stream without events"]
    data = json.loads(response.body)
    return [] if isinstance(data, dict) and data else [f"an empty answer: {data!r}"]


def _problems(case: Case, data: bytes, secrets: list[str]) -> list[str]:
    """Every broken promise in one case's exchange."""
    where = f"case {case.number} {case.method} {case.target[:80]} ({case.note})"
    try:
        responses = _responses(data, head_only=case.method == "HEAD")
    except (AssertionError, ValueError) as exc:
        return [f"{where}: not HTTP: {exc}"]
    if case.framing == "long" and not responses:
        pass  # its sender ended before the body did: nobody to answer (the case ends, see below)
    elif len(responses) != 1:
        return [f"{where}: {len(responses)} responses: {data[:300]!r}"]
    if not responses:
        return []
    (response,) = responses
    out = []
    if response.status not in case.expect:
        out.append(f"{where}: status {response.status}, expected {sorted(case.expect)}: "
                   f"{response.body[:300]!r}")  # fmt: skip
    text = response.body.decode("utf-8", "replace")
    for secret in secrets:
        if secret in text:
            out.append(f"{where}: a secret in the answer: {text[:300]}")
    if response.status >= 400 and case.method != "HEAD":
        line = text.strip()
        if "\n" in line:
            out.append(f"{where}: a refusal of several lines: {line[:300]!r}")
        if PATH_IN_TEXT.search(line):
            out.append(f"{where}: a trace or a path in the refusal: {line[:300]}")
        # what the HTTP parser refuses reaches no route: its path is unknown, its shape OpenAI's
        apis = {_api_by_path(case.target), *(("openai",) if case.unparsed else ())}
        shaped = False
        for api in apis:
            try:
                shaped = shaped or ERROR_SHAPES[api](json.loads(line))
            except (ValueError, KeyError, TypeError):
                pass
        if not shaped:
            out.append(f"{where}: not {_api_by_path(case.target)}'s error shape: {line[:300]!r}")
    elif response.status == 200 and case.answer:
        out += [f"{where}: {p}" for p in _check_answer(case, response)]
    return out


async def _right_answers(endpoint: ModelEndpoint) -> dict[str, Any]:
    """A valid request of each API, its tool call (the endpoint still answers correctly)."""
    import httpx

    got: dict[str, Any] = {}
    headers = {"x-api-key": endpoint.token, "Authorization": f"Bearer {endpoint.token}"}
    async with httpx.AsyncClient(base_url=endpoint.server_url, timeout=BOUND_S) as client:
        for api, path in [("chat", "/v1/chat/completions"), ("responses", "/v1/responses"),
                          ("messages", "/v1/messages"),
                          ("gemini", "/v1beta/models/m:generateContent")]:  # fmt: skip
            answer = await client.post(path, json=_valid(api, False, ASK), headers=headers)
            assert answer.status_code == 200, (api, answer.text)
            data = answer.json()
            if api == "chat":
                call = data["choices"][0]["message"]["tool_calls"][0]["function"]
                got[api] = (call["name"], json.loads(call["arguments"]))
            elif api == "responses":
                call = next(o for o in data["output"] if o["type"] == "function_call")
                got[api] = (call["name"], json.loads(call["arguments"]))
            elif api == "messages":
                call = next(c for c in data["content"] if c["type"] == "tool_use")
                got[api] = (call["name"], call["input"])
            else:
                part = next(p for p in data["candidates"][0]["content"]["parts"]
                            if "functionCall" in p)  # fmt: skip
                got[api] = (part["functionCall"]["name"], part["functionCall"]["args"])
    return got


@pytest.mark.parametrize("seed", SEEDS)
async def test_u5_endpoint_under_generated_requests_refuses_in_one_line_and_serves_only_the_run(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # U5: key, Host, bounds, one line without trace or path; V15: no secret in any answer
    for name, value in ENV_SECRETS.items():
        monkeypatch.setenv(name, value)
    rng = random.Random(seed)
    model = ModelSpec(name="scripted/careful")
    async with serve_model(model, 1, BOUND_S) as a, serve_model(model, 1, BOUND_S) as b:
        fuzz = Fuzz(rng, a, b)
        secrets = [a.token, b.token, *ENV_SECRETS.values()]
        problems: list[str] = []
        for number in range(CASES_PER_SEED):
            case = fuzz.case(number)
            before = len(a.served)
            try:
                data = await asyncio.wait_for(_exchange(fuzz.port, case), BOUND_S)
            except TimeoutError:
                problems.append(f"case {number} {case.method} {case.target[:80]}: no answer "
                                f"within {BOUND_S}s ({case.note})")  # fmt: skip
                continue
            problems += _problems(case, data, secrets)
            grown = len(a.served) - before
            if not case.authorised and grown:
                problems.append(f"case {number}: an unauthorised request reached the model")
            if case.answer in ("chat", "responses", "messages", "gemini") and 200 in case.expect:
                if grown != 1:
                    problems.append(f"case {number}: a well-formed request served {grown} times")
            if len(problems) > 20:
                break
        assert not problems, "\n".join(problems)
        kept = json.dumps([s.messages for s in a.served]) + json.dumps(a.conversation())
        assert MARK not in kept, "an unauthorised request's text entered the conversation"
        assert not b.served, "another run's endpoint was reached with nobody holding its key"
        # the endpoint is not wedged: each API still gets the scripted model's booking
        answers = await _right_answers(a)
        assert answers == {api: ("create_booking", BOOK) for api in answers} and len(answers) == 4
