"""A fake model server that answers like llama.cpp's ``llama-server`` on the wire (DESIGN section 7).

Its shapes follow the recordings in ``../shared/data/llama-server/`` (README.md there): ``/props``,
``/slots``, ``/health``, ``/tokenize`` and ``/v1/chat/completions`` with ``timings``, a per-slot prompt
cache, tool calls, ``reasoning_content`` and the ``exceed_context_size_error``;
``POST /slots/<id>?action=erase`` empties a slot's cache (``{"id_slot", "n_erased"}``; like
llama-server it waits for a busy slot). With ``degraded=True`` it
is an OpenAI-compatible server without slots instead (like llama-cpp-python's): no ``/props``, ``/slots``
or ``/tokenize``, no ``timings``, only ``usage``, and the OpenAI-style context error.

It refuses what the real servers refuse, so a regression in loopd's requests fails a plain test: an
assistant message whose ``content`` is null (llama-cpp-python answers HTTP 500; the fake does so in
every mode, as strict as the strictest server), a ``tool_choice`` that is not ``"auto"``, ``"none"``,
``"required"`` or a named function (HTTP 400), a missing or unknown ``model`` when ``model_required`` (as
Ollama, vLLM and LM Studio do) and a missing bearer token when ``api_key`` is set (HTTP 401). Like
llama-cpp-python's ``chatml-function-calling``, the degraded server reads a missing ``tool_choice`` as
``"none"`` (the tools never reach the model); llama-server reads it as ``"auto"``.

``"stream": true`` is answered with server-sent events as llama-server sends them (the degraded server,
like llama-cpp-python's ``chatml-function-calling``, ends a stream with tools at once, empty)
(``stream_sample.txt``): a role chunk, content (and ``reasoning_content``) deltas a few tokens each, tool
calls as an id-and-name delta followed by argument pieces, a chunk with ``finish_reason``, and a last chunk
with empty ``choices``, ``usage`` and ``timings``; the degraded server sends that usage chunk only when
``stream_options.include_usage`` is true, and never ``timings``.

Use it as a real HTTP server on 127.0.0.1 (``with FakeLlamaServer() as server: server.url``), or without
a socket through ``server.transport()`` (an ``httpx.MockTransport`` on the same logic), or as a script::

    python tests/fakes/llama_server.py --port 8080 [--n-ctx 4096] [--slots 2] [--degraded] [--tools]

The tokenizer is a regex (``\\w+|[^\\w\\s]``) over a canonical rendering of the tools and the messages, in
that order, so a request that strictly extends the previous prompt and reply shares their token prefix.
"""

from __future__ import annotations

import argparse
import json
import re
import signal
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

import httpx

from boxmaker.proto.settings import packaged_starter

TOKEN = re.compile(r"\w+|[^\w\s]")
MODEL = "fake-model-q4_k_m.gguf"


@dataclass
class FakeReply:
    """A scripted assistant reply: text, tool calls as (name, arguments), reasoning."""

    content: str | None = None
    tool_calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    reasoning: str | None = None


Script = FakeReply | Callable[[dict[str, Any]], FakeReply]


# The tokenizer and the canonical prompt ------------------------------------------------------------


def tokens(text: str) -> list[str]:
    """The fake tokenizer: words and single punctuation marks."""
    return TOKEN.findall(text)


def token_id(token: str) -> int:
    """A stable id for a token, as /tokenize returns them."""
    return zlib.crc32(token.encode("utf-8")) % 32000


def cut(text: str, count: int) -> str:
    """The start of ``text`` that holds its first ``count`` tokens."""
    if count <= 0:
        return ""
    ends = [match.end() for match in TOKEN.finditer(text)]
    return text if count >= len(ends) else text[: ends[count - 1]]


def text_of(content: Any) -> str:
    """A message's content as text (a string, or a list of ``{"type": "text", "text"}`` parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def render_reply(content: str | None, calls: list[dict[str, Any]], reasoning: str | None) -> str:
    """An assistant message's body, the same for a generated reply and the history that replays it."""
    text = f"<think>{reasoning}</think>" if reasoning else ""
    text += content or ""
    for call in calls:
        function = call.get("function", {})
        text += f"<tool_call>{function.get('name')} {function.get('arguments')}</tool_call>"
    return text


def render_prompt(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> str:
    """The canonical prompt: tools, then each message, then the generation prompt."""
    parts = []
    if tools:
        parts.append(f"<|im_start|>tools\n{json.dumps(tools, sort_keys=True)}<|im_end|>\n")
    for message in messages:
        role = str(message.get("role"))
        if role == "assistant":
            body = render_reply(
                text_of(message.get("content")),
                message.get("tool_calls") or [],
                message.get("reasoning_content") or message.get("reasoning"),
            )
        elif role == "tool":
            body = f"[{message.get('tool_call_id')}] {text_of(message.get('content'))}"
        else:
            body = text_of(message.get("content"))
        parts.append(f"<|im_start|>{role}\n{body}<|im_end|>\n")
    parts.append("<|im_start|>assistant\n")
    return "".join(parts)


def common_prefix(a: list[str], b: list[str]) -> int:
    """How many leading tokens ``a`` and ``b`` share."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def default_reply(body: dict[str, Any]) -> FakeReply:
    """``ok: `` and the last user message's text."""
    users = [m for m in body.get("messages", []) if isinstance(m, dict) and m.get("role") == "user"]
    return FakeReply(content="ok: " + (text_of(users[-1].get("content")) if users else ""))


_REMEMBER = re.compile(r"\bremember(?:\s+that)?[,:]?\s+(?P<fact>.+)", re.I | re.S)
_LATER = re.compile(r"\bnote for later[,:]?\s+(?P<fact>[^\n]+)", re.I)
_FETCH = re.compile(r"^(?:please\s+)?fetch\s+(?P<url>https?://\S+)", re.I)
_READ = re.compile(r"^(?:please\s+)?read\s+(?:the\s+file\s+)?(?P<path>/\S+)", re.I)


def _flush_text() -> str:
    """loopd's memory flush prompt (the packaged ``flush.md``)."""
    return packaged_starter("flush.md").read_text(encoding="utf-8").strip()


def tool_using_reply(body: dict[str, Any]) -> FakeReply:
    """A default that uses the memory tools the way a tool-capable model would, for demos and manual checks
    without one (``--tools``): "remember (that) X" adds X to user.md; "note for later: X" is saved to
    memory.md only by the memory flush before compaction (loopd's ``flush.md`` turn, which saves every
    such note of the conversation); "fetch URL" and "read /PATH" call `http_fetch` and `read_file` through
    `call_tool` (so the grants, approvals and untrusted sessions can be tried); a question is looked up
    with `recall`; after a tool result, the reply quotes it; anything else gets ``ok: <text>``."""
    messages = [m for m in body.get("messages", []) if isinstance(m, dict)]
    last = messages[-1] if messages else {}
    if last.get("role") == "tool":
        return FakeReply(content="From the tool: " + text_of(last.get("content"))[:400])
    text = text_of(last.get("content")).strip()
    if last.get("role") == "user" and text == _flush_text():
        said = [text_of(m.get("content")) for m in messages if m.get("role") == "user"]
        facts = [found.group("fact").strip().rstrip(".!") + "." for t in said if (found := _LATER.search(t))]
        if not facts:
            return FakeReply(content="Nothing to save.")
        calls = [("memory", {"action": "add", "file": "memory", "text": f[0].upper() + f[1:]}) for f in facts]
        return FakeReply(tool_calls=calls)
    remember = _REMEMBER.search(text)
    if remember:
        fact = remember.group("fact").strip().rstrip(".!") + "."
        return FakeReply(
            tool_calls=[("memory", {"action": "add", "file": "user", "text": fact[0].upper() + fact[1:]})]
        )
    fetch = _FETCH.search(text)
    if fetch:
        return FakeReply(
            tool_calls=[("call_tool", {"name": "http_fetch", "arguments": {"url": fetch.group("url")}})]
        )
    read = _READ.search(text)
    if read:
        return FakeReply(
            tool_calls=[("call_tool", {"name": "read_file", "arguments": {"path": read.group("path")}})]
        )
    if text.endswith("?"):
        return FakeReply(tool_calls=[("recall", {"query": text[:500], "k": 3})])
    return FakeReply(content="ok: " + text)


# The server's state --------------------------------------------------------------------------------


@dataclass
class Slot:
    """One slot: the tokens it holds (last prompt + reply) and whether it is working."""

    id: int
    held: list[str] = field(default_factory=list)
    processing: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)


class FakeLlamaServer:
    """The fake llama-server; see the module docstring.

    ``delay`` (seconds) is how long each chat completion takes, for tests of concurrency; ``old_status``
    sends the context error with HTTP 500 as older llama-server builds did; ``stream_delay`` (seconds)
    is the pause between two events of a stream over HTTP; ``model_required`` refuses a request without
    the fake's model name (Ollama, vLLM, LM Studio); ``api_key`` refuses one without that bearer token.

    Attributes:
        requests: (path, parsed JSON body or None) of every request, in order of arrival.
        spans: (slot, start, end) in ``time.monotonic()`` seconds of every completion served.
        queued: how many completions arrived while their slot was busy and had to wait.
    """

    def __init__(
        self,
        n_ctx: int = 4096,
        slots: int = 2,
        degraded: bool = False,
        supports_tools: bool = True,
        *,
        old_status: bool = False,
        delay: float = 0.0,
        stream_delay: float = 0.0,
        model_required: bool = False,
        api_key: str | None = None,
        default: Callable[[dict[str, Any]], FakeReply] = default_reply,
        port: int = 0,
    ) -> None:
        self.model_required = model_required
        self.api_key = api_key
        self.stream_delay = stream_delay
        self.n_ctx = n_ctx
        self.degraded = degraded
        self.supports_tools = supports_tools
        self.old_status = old_status
        self.delay = delay
        self.default = default
        self.port = port
        self.slots = [Slot(i) for i in range(max(slots, 1))]
        self.requests: list[tuple[str, Any]] = []
        self.erased: list[int] = []  # slots whose cache `POST /slots/<id>?action=erase` emptied, in order
        self.spans: list[tuple[int, float, float]] = []
        self.queued = 0
        self._state = threading.Lock()
        self._scripted: list[Script] = []
        self._tasks = 0
        self._http: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # Life ------------------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT`` once started."""
        if self._http is None:
            raise RuntimeError("the fake llama-server is not started")
        return f"http://127.0.0.1:{self._http.server_address[1]}"

    def start(self) -> FakeLlamaServer:
        """Listen on 127.0.0.1 (port 0 picks one) and serve in a thread."""
        self._http = ThreadingHTTPServer(("127.0.0.1", self.port), _handler_for(self))
        self._http.daemon_threads = True
        self._thread = threading.Thread(
            target=self._http.serve_forever, kwargs={"poll_interval": 0.05}, name="fake-llama", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket."""
        if self._http is not None:
            self._http.shutdown()
            self._http.server_close()
            self._http = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> FakeLlamaServer:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def transport(self) -> httpx.MockTransport:
        """An ``httpx.MockTransport`` that answers with this server's logic, without a socket."""

        def handle(request: httpx.Request) -> httpx.Response:
            status, reply = self.handle(
                request.method,
                request.url.path,
                request.content,
                request.url.query.decode("ascii"),
                dict(request.headers),
            )
            if isinstance(reply, Stream):
                data = b"".join(reply.events())
                return httpx.Response(status, content=data, headers={"content-type": "text/event-stream"})
            return httpx.Response(status, json=reply)

        return httpx.MockTransport(handle)

    def script(self, *replies: Script) -> None:
        """Queue replies for the next completions, in order (then the default ``ok: ...`` reply)."""
        with self._state:
            self._scripted.extend(replies)

    def paths(self) -> list[str]:
        """The paths of the requests received, in order."""
        with self._state:
            return [path for path, _ in self.requests]

    # The logic -------------------------------------------------------------------------------------

    def handle(
        self, method: str, path: str, raw: bytes, query: str = "", headers: dict[str, str] | None = None
    ) -> tuple[int, Any]:
        """Answer one request: (HTTP status, JSON reply, or a `Stream` of events); `query` is the URL's
        query string, `headers` the request's headers (lower-case names)."""
        body: Any = None
        if raw:
            try:
                body = json.loads(raw)
            except ValueError:
                return 400, self._error(
                    400, "failed to parse the request body as JSON", "invalid_request_error"
                )
        with self._state:
            self.requests.append((path, body))
        if self.degraded and path in ("/props", "/slots", "/tokenize", "/health"):
            return 404, {"detail": "Not Found"}
        if (method, path) == ("GET", "/health"):
            return 200, {"status": "ok"}
        if (method, path) == ("GET", "/props"):
            return 200, self._props()
        if (method, path) == ("GET", "/slots"):
            return 200, self._slots()
        if (method, path) == ("GET", "/v1/models"):
            return 200, {"object": "list", "data": [{"id": MODEL, "object": "model"}]}
        if (method, path) == ("POST", "/tokenize"):
            return self._tokenize(body)
        if (method, path) == ("POST", "/v1/chat/completions"):
            return self._chat(body, {k.lower(): v for k, v in (headers or {}).items()})
        slot_action = re.fullmatch(r"/slots/(\d+)", path)
        if method == "POST" and slot_action and not self.degraded:
            return self._slot_action(int(slot_action.group(1)), query)
        if self.degraded:
            return 404, {"detail": "Not Found"}
        return 404, self._error(404, "File Not Found", "not_found_error")

    def _error(self, code: int, message: str, kind: str) -> dict[str, Any]:
        return {"error": {"code": code, "message": message, "type": kind}}

    def _props(self) -> dict[str, Any]:
        return {
            "default_generation_settings": {
                "params": {"n_predict": -1, "temperature": 0.8},
                "n_ctx": self.n_ctx,
            },
            "total_slots": len(self.slots),
            "model_alias": MODEL,
            "model_path": MODEL,
            "endpoint_slots": True,
            "chat_template_caps": {
                "supports_system_role": True,
                "supports_tool_calls": self.supports_tools,
                "supports_tools": self.supports_tools,
            },
            "build_info": "fake",
        }

    def _slots(self) -> list[dict[str, Any]]:
        with self._state:
            return [
                {"id": s.id, "n_ctx": self.n_ctx, "speculative": False, "is_processing": s.processing}
                for s in self.slots
            ]

    def _slot_action(self, slot_id: int, query: str) -> tuple[int, Any]:
        """``POST /slots/<id>?action=erase``: empty the slot's cache (waiting while it is busy)."""
        if "action=erase" not in query.split("&"):
            return 400, self._error(400, "Invalid action", "invalid_request_error")
        if slot_id >= len(self.slots):
            return 400, self._error(400, "Invalid slot ID", "invalid_request_error")
        slot = self.slots[slot_id]
        with slot.lock:
            erased = len(slot.held)
            slot.held = []
        with self._state:
            self.erased.append(slot_id)
        return 200, {"id_slot": slot_id, "n_erased": erased}

    def _tokenize(self, body: Any) -> tuple[int, Any]:
        if not isinstance(body, dict) or not isinstance(body.get("content"), str):
            return 400, self._error(400, '"content" must be a string', "invalid_request_error")
        return 200, {"tokens": [token_id(t) for t in tokens(body["content"])]}

    def _refusal(self, body: dict[str, Any], headers: dict[str, str]) -> tuple[int, Any] | None:
        """What a real server refuses in a chat request (see the module docstring), else None."""
        if self.api_key is not None and headers.get("authorization") != f"Bearer {self.api_key}":
            return 401, self._error(401, "Invalid API Key", "authentication_error")
        model = body.get("model")
        if self.model_required and not model:
            return 400, self._error(400, "model is required", "invalid_request_error")
        if self.model_required and model != MODEL:
            return 404, self._error(
                404, f'model "{model}" not found, try pulling it first', "not_found_error"
            )
        for index, message in enumerate(body["messages"]):
            if (
                isinstance(message, dict)
                and message.get("role") == "assistant"
                and message.get("content", "") is None
            ):
                where = ("body", "messages", index, "ChatCompletionRequestAssistantMessage", "content")
                detail = {"type": "string_type", "loc": where, "msg": "Input should be a valid string"}
                return 500, self._error(500, f"1 validation error: {detail}", "internal_server_error")
        choice = body.get("tool_choice")
        named = isinstance(choice, dict) and isinstance(choice.get("function"), dict)
        if choice is not None and choice not in ("auto", "none", "required") and not named:
            return 400, self._error(400, f"Invalid tool_choice: {choice!r}", "invalid_request_error")
        if self.degraded and choice == "required" and body.get("tools"):
            return 500, self._error(500, "AssertionError", "internal_server_error")
        return None

    def _tools_seen(self, body: dict[str, Any]) -> list[dict[str, Any]] | None:
        """The tools that reach the prompt: none when the template cannot take them, for ``"none"``, and
        (llama-cpp-python) for a missing ``tool_choice``."""
        choice = body.get("tool_choice")
        if not self.supports_tools or choice == "none" or (self.degraded and choice is None):
            return None
        tools = body.get("tools")
        return tools if isinstance(tools, list) else None

    def _chat(self, body: Any, headers: dict[str, str]) -> tuple[int, Any]:
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return 400, self._error(400, "'messages' is required", "invalid_request_error")
        refused = self._refusal(body, headers)
        if refused is not None:
            return refused
        tools = self._tools_seen(body)
        if body.get("stream") is True and self.degraded and tools is not None:
            # llama-cpp-python: "Automatic streaming tool choice is not supported", an empty stream
            return 200, Stream([], done=False)
        prompt = tokens(render_prompt(body["messages"], tools))
        max_tokens = body.get("max_tokens")
        overflow = self._context_error(len(prompt), max_tokens if isinstance(max_tokens, int) else None)
        if overflow is not None:
            return overflow
        slot = self._take_slot(body, prompt)
        started = time.monotonic()
        try:
            if self.delay:
                time.sleep(self.delay)
            reply = self._generate(slot, body, prompt, tools is not None)
            if body.get("stream") is True:
                return 200, Stream(self._chunks(reply, body))
            return 200, reply
        finally:
            with self._state:
                slot.processing = False
                self.spans.append((slot.id, started, time.monotonic()))
            slot.lock.release()

    def _context_error(self, n_prompt: int, max_tokens: int | None) -> tuple[int, Any] | None:
        if self.degraded:
            completion = max_tokens or 0
            if n_prompt + completion <= self.n_ctx:
                return None
            message = (
                f"This model's maximum context length is {self.n_ctx} tokens. However, you requested "
                f"{n_prompt + completion} tokens ({n_prompt} in the messages, {completion} in the "
                "completion). Please reduce the length of the messages or completion."
            )
            kind = {"type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}
            return 400, {"error": {"message": message, **kind}}
        if n_prompt <= self.n_ctx:
            return None
        message = (
            f"request ({n_prompt} tokens) exceeds the available context size ({self.n_ctx} tokens), "
            "try increasing it"
        )
        error = {"code": 400, "message": message, "type": "exceed_context_size_error"}
        sizes = {"n_prompt_tokens": n_prompt, "n_ctx": self.n_ctx}
        return (500 if self.old_status else 400), {"error": {**error, **sizes}}

    def _take_slot(self, body: dict[str, Any], prompt: list[str]) -> Slot:
        """The slot for this request, locked: ``id_slot`` pins one (wrapping), else the idle slot whose
        cache shares most with the prompt. A busy slot queues."""
        wanted = body.get("id_slot")
        with self._state:
            if self.degraded:
                slot = self.slots[0]
            elif isinstance(wanted, int) and wanted >= 0:
                slot = self.slots[wanted % len(self.slots)]
            else:
                idle = [s for s in self.slots if not s.processing] or self.slots
                slot = max(idle, key=lambda s: (common_prefix(s.held, prompt), -s.id))
        if not slot.lock.acquire(blocking=False):
            with self._state:
                self.queued += 1
            slot.lock.acquire()
        with self._state:
            slot.processing = True
        return slot

    def _next_reply(self, body: dict[str, Any]) -> tuple[int, FakeReply]:
        """The task's number and its reply: the next scripted one, else the default."""
        with self._state:
            script = self._scripted.pop(0) if self._scripted else self.default
            self._tasks += 1
            task = self._tasks
        return task, (script if isinstance(script, FakeReply) else script(body))

    def _generate(self, slot: Slot, body: dict[str, Any], prompt: list[str], tooled: bool) -> dict[str, Any]:
        task, reply = self._next_reply(body)
        if not tooled and reply.tool_calls:  # a model that never saw the tools cannot call them
            reply = FakeReply(content="I have no tools to do that with.", reasoning=reply.reasoning)
        calls = [
            {
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)},
                "id": f"call__{i}_{name}_cmpl-fake{task}" if self.degraded else _call_id(task, i),
            }
            for i, (name, args) in enumerate(reply.tool_calls)
        ]
        generated = tokens(render_reply(reply.content, calls, reply.reasoning))
        limit = self.n_ctx - len(prompt)
        if isinstance(body.get("max_tokens"), int) and body["max_tokens"] >= 0:
            limit = min(limit, body["max_tokens"])
        finish = "tool_calls" if calls else "stop"
        if len(generated) > limit:  # cut: only the start of the text survives
            reply = FakeReply(content=cut(reply.content or "", limit))
            calls, finish = [], "length"
            generated = tokens(render_reply(reply.content, [], None))
        cache_n = 0
        if body.get("cache_prompt", True) and not self.degraded:
            # at least one prompt token is evaluated, and at most the held total - 1 are reused (observed)
            reusable = min(len(slot.held), len(prompt)) - 1
            cache_n = max(min(common_prefix(slot.held, prompt), reusable), 0)
        slot.held = prompt + generated
        message: dict[str, Any] = {"role": "assistant", "content": reply.content}
        if reply.reasoning is not None and finish != "length":
            message["reasoning" if self.degraded else "reasoning_content"] = reply.reasoning
        if calls:
            message["tool_calls"] = calls
        return self._envelope(message, finish, task, (len(prompt), cache_n, len(generated)))

    def _envelope(
        self, message: dict[str, Any], finish: str, task: int, counts: tuple[int, int, int]
    ) -> dict[str, Any]:
        """The reply around ``message``; ``counts`` is (prompt tokens, cache_n, predicted_n)."""
        n_prompt, cache_n, predicted_n = counts
        prompt_n = n_prompt - cache_n
        usage: dict[str, Any] = {
            "completion_tokens": predicted_n,
            "prompt_tokens": n_prompt,
            "total_tokens": n_prompt + predicted_n,
        }
        reply: dict[str, Any] = {
            "choices": [{"finish_reason": finish, "index": 0, "message": message}],
            "created": int(time.time()),
            "model": MODEL,
            "object": "chat.completion",
            "usage": usage,
            "id": f"chatcmpl-fake{task}",
        }
        if self.degraded:
            reply["choices"][0]["logprobs"] = None
            return reply
        usage["prompt_tokens_details"] = {"cached_tokens": cache_n}
        prompt_ms, predicted_ms = prompt_n * 2.5, predicted_n * 17.0
        reply["system_fingerprint"] = "b0-fake"
        reply["timings"] = {
            "cache_n": cache_n,
            "prompt_n": prompt_n,
            "prompt_ms": prompt_ms,
            "prompt_per_token_ms": 2.5,
            "prompt_per_second": 400.0 if prompt_n else 0.0,
            "predicted_n": predicted_n,
            "predicted_ms": predicted_ms,
            "predicted_per_token_ms": 17.0,
            "predicted_per_second": 1000 / 17.0 if predicted_n else 0.0,
        }
        return reply

    def _chunks(self, reply: dict[str, Any], body: dict[str, Any]) -> list[dict[str, Any]]:
        """A whole reply as the chunks of a stream (see the module docstring)."""
        choice = reply["choices"][0]
        message = choice["message"]
        head = {k: reply[k] for k in ("created", "id", "model")} | {"object": "chat.completion.chunk"}

        def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            return {"choices": [{"finish_reason": finish, "index": 0, "delta": delta}], **head}

        chunks = [chunk({"role": "assistant", "content": None})]
        for key in ("reasoning_content", "reasoning", "content"):
            text = message.get(key)
            pieces = [m.group(0) for m in re.finditer(r"\s*\S+(?:\s+\S+){0,2}\s*", text or "")]
            chunks += [chunk({key: piece}) for piece in pieces]
        for index, call in enumerate(message.get("tool_calls", [])):
            function = call["function"]
            opening = {"index": index, "id": call["id"], "type": "function"}
            chunks.append(
                chunk({"tool_calls": [{**opening, "function": {"name": function["name"], "arguments": ""}}]})
            )
            arguments = function["arguments"]
            for start in range(0, len(arguments), 8):
                piece = {"index": index, "function": {"arguments": arguments[start : start + 8]}}
                chunks.append(chunk({"tool_calls": [piece]}))
        chunks.append(chunk({}, choice["finish_reason"]))
        options = body.get("stream_options")
        wants_usage = isinstance(options, dict) and options.get("include_usage") is True
        if not self.degraded or wants_usage:
            last = {"choices": [], **head, "usage": reply["usage"]}
            if "timings" in reply:
                last["timings"] = reply["timings"]
            chunks.append(last)
        return chunks


@dataclass
class Stream:
    """A streamed reply: its chunks, sent as server-sent events ending with ``data: [DONE]``."""

    chunks: list[dict[str, Any]]
    done: bool = True  # False: the stream ends without ``data: [DONE]`` (a server that gave up)

    def events(self) -> list[bytes]:
        """The events' bytes, one per chunk, then the end."""
        end = [b"data: [DONE]\n\n"] if self.done else []
        return [f"data: {json.dumps(c)}\n\n".encode() for c in self.chunks] + end


def _call_id(task: int, index: int) -> str:
    """A 32-letter id like llama-server's."""
    return f"{zlib.crc32(f'{task}:{index}'.encode()):08x}".ljust(32, "x")


# HTTP ----------------------------------------------------------------------------------------------


def _handler_for(server: FakeLlamaServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            path, _, query = self.path.partition("?")
            headers = {k.lower(): v for k, v in self.headers.items()}
            status, reply = server.handle(self.command, path, raw, query, headers)
            if isinstance(reply, Stream):
                self._stream(status, reply)
                return
            data = json.dumps(reply).encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _stream(self, status: int, reply: Stream) -> None:
            """Send the events one by one (chunked), pausing `stream_delay` between them; stop quietly
            when the client hangs up (as llama-server stops generating)."""
            self.send_response(status)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            try:
                for event in reply.events():
                    self.wfile.write(f"{len(event):x}\r\n".encode() + event + b"\r\n")
                    self.wfile.flush()
                    if server.stream_delay:
                        time.sleep(server.stream_delay)
                self.wfile.write(b"0\r\n\r\n")
            except OSError:
                self.close_connection = True

        do_GET = _answer
        do_POST = _answer

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


def main(argv: list[str] | None = None) -> int:
    """Serve until Ctrl-C or SIGTERM."""
    parser = argparse.ArgumentParser(description="A fake llama-server for boxmaker's tests.")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--n-ctx", type=int, default=4096, help="per-slot context, in tokens")
    parser.add_argument("--slots", type=int, default=2)
    parser.add_argument("--degraded", action="store_true", help="an OpenAI-compatible server without slots")
    parser.add_argument("--old-status", action="store_true", help="send the context error with HTTP 500")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds each completion takes")
    parser.add_argument(
        "--model-required", action="store_true", help=f"refuse requests without model {MODEL!r} (like Ollama)"
    )
    parser.add_argument(
        "--tools",
        action="store_true",
        help="use the memory tools like a tool-capable model: 'remember that X' adds X to user.md, "
        "'note for later: X' is saved to memory.md by the memory flush before compaction, "
        "a question is looked up with recall",
    )
    args = parser.parse_args(argv)
    server = FakeLlamaServer(
        args.n_ctx,
        args.slots,
        args.degraded,
        old_status=args.old_status,
        delay=args.delay,
        model_required=args.model_required,
        port=args.port,
        default=tool_using_reply if args.tools else default_reply,
    ).start()
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    print(f"fake llama-server listening on {server.url}", flush=True)
    try:
        done.wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
