"""A local stand-in for the Messages API (POST /v1/messages) on 127.0.0.1, for tests and demos.

It speaks enough of the protocol for the official SDK: message objects with text content blocks
and usage (including cache_creation_input_tokens / cache_read_input_tokens, simulated from the
request's cache_control prefix at ~4 characters a token), and error bodies for overload (529) and
rate limits (429). Replies follow a script; once the script is spent, the last entry repeats.
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


def overloaded() -> Reply:
    return Reply(status=529)


def rate_limited(retry_after: float = 0.0) -> Reply:
    return Reply(status=429, retry_after=retry_after)


_ERROR_TYPES = {529: "overloaded_error", 429: "rate_limit_error", 500: "api_error", 400: "invalid_request_error",
                401: "authentication_error"}


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

    def next_reply(self, body: dict[str, Any]) -> Reply:
        with self.lock:
            if not self.script:
                return Reply(text="(no script)")
            item = self.script[min(self.served, len(self.script) - 1)]
            self.served += 1
        return item(body) if callable(item) else item


def _usage(state: StubState, body: dict[str, Any], reply: Reply) -> dict[str, int]:
    """Split the prompt into a cached prefix (through the last cache_control block) and the rest."""
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
    last = max((i for i, (_, c) in enumerate(parts) if c), default=-1)
    prefix = "".join(t for t, _ in parts[: last + 1])
    rest = "".join(t for t, _ in parts[last + 1 :])
    usage = {"input_tokens": _tokens(rest), "output_tokens": reply.output_tokens or _tokens(reply.text),
             "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
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

        def do_POST(self) -> None:  # noqa: N802 - http.server's naming
            if self.path.split("?")[0].rstrip("/") != "/v1/messages":
                self._send(404, {"type": "error", "error": {"type": "not_found_error", "message": self.path}})
                return
            body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
            with state.lock:
                state.requests.append(body)
                state.headers.append({k.lower(): v for k, v in self.headers.items()})
            reply = state.next_reply(body)
            if reply.status != 200:
                extra = {"retry-after": str(reply.retry_after)} if reply.retry_after is not None else {}
                err = {"type": _ERROR_TYPES.get(reply.status, "api_error"), "message": f"stub error {reply.status}"}
                self._send(reply.status, {"type": "error", "error": err}, extra)
                return
            self._send(200, {
                "id": f"msg_{uuid.uuid4().hex[:20]}",
                "type": "message",
                "role": "assistant",
                "model": body.get("model", "stub"),
                "content": [{"type": "text", "text": reply.text}],
                "stop_reason": "end_turn",
                "stop_sequence": None,
                "usage": _usage(state, body, reply),
            })

    return Handler


class StubServer:
    """`with StubServer([Reply(...), ...]) as stub: ... stub.base_url ...` — a thread on 127.0.0.1."""

    def __init__(self, script: list[Reply | Callable[[dict[str, Any]], Reply]] | None = None) -> None:
        self.state = StubState(script=list(script or []))
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self.state))
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
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
