"""A local stand-in for the Messages API on 127.0.0.1, for tests and demos (no key, no network).

It speaks enough of the protocol for the official SDK: POST /v1/messages, as one JSON message or,
when the request asks `stream: true`, as the server-sent events the SDK's stream helper reads;
usage including cache_creation_input_tokens / cache_read_input_tokens, simulated from the
request's cache_control prefix at ~4 characters a token; POST /v1/messages/count_tokens. Like the
API it answers 404 for a model it does not serve (by default: the installed SDK's model list) and
400 "prompt is too long" past `context_tokens`. Scripted failures: error statuses (529, 429, 401,
400...), a 200 whose body is not JSON (a proxy's HTML page), a connection that stalls. Replies
follow a script; once the script is spent, the last entry repeats.
"""

from __future__ import annotations

import hashlib
import json
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    """One scripted answer: `status` 200 with `text`, or an error status (529, 429, 500...)."""

    text: str = ""
    status: int = 200
    retry_after: float | None = None
    output_tokens: int | None = None
    message: str = ""  # an error's message (default: "stub error <status>")
    raw: str | None = None  # a 200 with this body as text/html instead of a message
    stall_s: float = 0.0  # wait this long before answering anything (a stalled connection)


def overloaded() -> Reply:
    return Reply(status=529)


def rate_limited(retry_after: float = 0.0) -> Reply:
    return Reply(status=429, retry_after=retry_after)


def not_json() -> Reply:
    """A 200 whose body is an HTML page, as a misconfigured proxy sends."""
    return Reply(raw="<html><body><h1>Gateway says hello</h1></body></html>")


def stalled(seconds: float = 30.0) -> Reply:
    """A connection that accepts the request and then says nothing for `seconds`."""
    return Reply(stall_s=seconds)


_ERROR_TYPES = {
    529: "overloaded_error",
    429: "rate_limit_error",
    500: "api_error",
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
}


def _sdk_models() -> set[str]:
    from klineage.llm.models import sdk_models

    return set(sdk_models())


def _tokens(text: str) -> int:
    return max(1, len(text) // 4)


@dataclass
class StubState:
    script: list[Reply | Callable[[dict[str, Any]], Reply]] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    cached_prefixes: set[str] = field(default_factory=set)
    served: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    models: set[str] | None = None  # served model names; None: any
    context_tokens: int | None = None  # a longer prompt is refused with 400 "prompt is too long"
    count_tokens: bool = True  # answer /v1/messages/count_tokens (False: 404, as an old proxy)
    counted: int = 0  # count_tokens requests answered
    closing: threading.Event = field(default_factory=threading.Event)

    def next_reply(self, body: dict[str, Any]) -> Reply:
        with self.lock:
            if not self.script:
                return Reply(text="(no script)")
            item = self.script[min(self.served, len(self.script) - 1)]
            self.served += 1
        return item(body) if callable(item) else item


def _parts(body: dict[str, Any]) -> list[tuple[str, bool]]:
    """The prompt's texts in order, each with whether its block carries cache_control."""
    parts: list[tuple[str, bool]] = []
    system = body.get("system") or []
    if isinstance(system, str):
        parts.append((system, False))
    else:
        parts += [(b.get("text", ""), "cache_control" in b) for b in system]
    for m in body.get("messages", []):
        content = m.get("content")
        if isinstance(content, str):
            parts.append((content, False))
        else:
            parts += [(b.get("text", ""), "cache_control" in b) for b in content]
    return parts


def prompt_tokens(body: dict[str, Any]) -> int:
    """The stub's token count of a whole prompt (what count_tokens answers)."""
    return _tokens("".join(t for t, _ in _parts(body)))


def _usage(state: StubState, body: dict[str, Any], reply: Reply) -> dict[str, int]:
    """Split the prompt into a cached prefix (through the last cache_control block) and the rest."""
    parts = _parts(body)
    last = max((i for i, (_, c) in enumerate(parts) if c), default=-1)
    prefix = "".join(t for t, _ in parts[: last + 1])
    rest = "".join(t for t, _ in parts[last + 1 :])
    usage = {
        "input_tokens": _tokens(rest),
        "output_tokens": reply.output_tokens or _tokens(reply.text),
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }
    if prefix:
        h = hashlib.sha256(prefix.encode()).hexdigest()
        with state.lock:
            hit = h in state.cached_prefixes
            state.cached_prefixes.add(h)
        usage["cache_read_input_tokens" if hit else "cache_creation_input_tokens"] = _tokens(prefix)
    return usage


def _handler(state: StubState) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:  # keep test output quiet
            return

        def _send(self, status: int, doc: dict[str, Any], extra: dict[str, str] | None = None) -> None:
            data = json.dumps(doc).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            for k, v in (extra or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

        def _error(self, status: int, message: str, extra: dict[str, str] | None = None) -> None:
            err = {"type": _ERROR_TYPES.get(status, "api_error"), "message": message}
            self._send(status, {"type": "error", "error": err}, extra)

        def _events(self, events: list[tuple[str, dict[str, Any]]]) -> None:
            data = "".join(f"event: {name}\ndata: {json.dumps(doc)}\n\n" for name, doc in events).encode()
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:  # noqa: N802 - http.server's naming
            path = self.path.split("?")[0].rstrip("/")
            if path not in ("/v1/messages", "/v1/messages/count_tokens"):
                self._error(404, self.path)
                return
            body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
            model = body.get("model", "stub")
            if state.models is not None and model not in state.models:
                self._error(404, f"model: {model}")
                return
            if path.endswith("/count_tokens"):
                if not state.count_tokens:
                    self._error(404, self.path)
                    return
                with state.lock:
                    state.counted += 1
                self._send(200, {"input_tokens": prompt_tokens(body)})
                return
            with state.lock:
                state.requests.append(body)
                state.headers.append({k.lower(): v for k, v in self.headers.items()})
            if state.context_tokens is not None and (n := prompt_tokens(body)) > state.context_tokens:
                self._error(400, f"prompt is too long: {n} tokens > {state.context_tokens} maximum")
                return
            reply = state.next_reply(body)
            if reply.stall_s:  # hold the connection open and silent (ends early when the server closes)
                state.closing.wait(reply.stall_s)
                return
            if reply.status != 200:
                extra = {"retry-after": str(reply.retry_after)} if reply.retry_after is not None else {}
                self._error(reply.status, reply.message or f"stub error {reply.status}", extra)
                return
            if reply.raw is not None:
                data = reply.raw.encode()
                self.send_response(200)
                self.send_header("content-type", "text/html")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                return
            usage = _usage(state, body, reply)
            message = {
                "id": f"msg_{uuid.uuid4().hex[:20]}",
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": [{"type": "text", "text": reply.text}],
                "stop_reason": "end_turn",
                "stop_sequence": None,
                "usage": usage,
            }
            if not body.get("stream"):
                self._send(200, message)
                return
            start = {**message, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}
            self._events(
                [
                    ("message_start", {"type": "message_start", "message": start}),
                    (
                        "content_block_start",
                        {
                            "type": "content_block_start",
                            "index": 0,
                            "content_block": {"type": "text", "text": ""},
                        },
                    ),
                    ("ping", {"type": "ping"}),
                    (
                        "content_block_delta",
                        {
                            "type": "content_block_delta",
                            "index": 0,
                            "delta": {"type": "text_delta", "text": reply.text},
                        },
                    ),
                    ("content_block_stop", {"type": "content_block_stop", "index": 0}),
                    (
                        "message_delta",
                        {
                            "type": "message_delta",
                            "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                            "usage": {"output_tokens": usage["output_tokens"]},
                        },
                    ),
                    ("message_stop", {"type": "message_stop"}),
                ]
            )

    return Handler


class StubServer:
    """`with StubServer([Reply(...), ...]) as stub: ... stub.base_url ...` — a thread on 127.0.0.1."""

    def __init__(
        self,
        script: list[Reply | Callable[[dict[str, Any]], Reply]] | None = None,
        *,
        models: set[str] | None = None,
        any_model: bool = False,
        context_tokens: int | None = None,
        count_tokens: bool = True,
    ) -> None:
        served = None if any_model else (models if models is not None else _sdk_models())
        self.state = StubState(
            script=list(script or []), models=served, context_tokens=context_tokens, count_tokens=count_tokens
        )
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self.state))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def requests(self) -> list[dict[str, Any]]:
        return self.state.requests

    def __enter__(self) -> StubServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.state.closing.set()  # stalled handlers return now
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
