"""The model client: one OpenAI-compatible chat server, llama.cpp's ``llama-server`` first (DESIGN section 7).

What the server says on the wire is recorded in ``../shared/data/llama-server/README.md`` and the samples
beside it; this module reads exactly those shapes:

- ``GET /props`` → ``default_generation_settings.n_ctx`` (the PER-SLOT context), ``total_slots``,
  ``chat_template_caps.supports_tools``; ``GET /slots`` → ``[{"id", "n_ctx", "is_processing"}, ...]``.
  Servers without them (Ollama, vLLM, llama-cpp-python, LM Studio) answer 404 and are still fine.
- ``POST /v1/chat/completions``, plain or streamed (``boxmaker.loopd.stream``), with ``tool_choice:
  "auto"`` whenever tools are sent (llama-cpp-python reads a missing one as "none"), the ``model`` name
  when configured (Ollama, vLLM and LM Studio need it) and a bearer token when one is configured.
  ``id_slot`` pins a slot and ``cache_prompt`` keeps its prompt cache; both are sent only when a slot is
  given. The reply's ``timings`` (llama-server only) give
  ``cache_n``, ``prompt_n`` and ``predicted_n`` in tokens; other servers give only ``usage``.
- The context-size error is recognised by its type, never by its HTTP status: llama-server's
  ``error.type == "exceed_context_size_error"`` (HTTP 400, 500 on older builds) and the OpenAI-style
  ``context_length_exceeded`` that llama-cpp-python and vLLM send.
- ``POST /tokenize`` ``{"content": text}`` → ``{"tokens": [...]}`` (llama-server only).

The errors, and when each is raised::

    BoxmakerError
    └── ModelError            the server answered, but not with a usable reply (HTTP status and the
        │                     server's message, a reply that is not JSON, a field missing or mistyped)
        ├── ModelUnreachable  no connection: refused, reset, DNS failure, connect timeout (names the URL)
        ├── ContextFull       the prompt does not fit the slot's context (code "session_full")
        └── RequestCancelled  the caller cancelled the request (the owner's Ctrl-C); it was abandoned

A reply cut by the token limit (``finish_reason: "length"``) is not an error: it is returned as is.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx

from boxmaker.loopd.replies import (
    ContextFull,
    ModelError,
    ModelUnreachable,
    RequestCancelled,
    count,
    counts,
    failure,
    field,
    optional,
    read_json,
    reason,
)
from boxmaker.loopd.stream import StreamedReply
from boxmaker.proto.records import ToolCall

#: The chat endpoint.
CHAT = "/v1/chat/completions"
#: Said once when a server cannot stream a request.
NO_STREAM = (
    "the model server ended a streamed reply without sending anything (llama-cpp-python cannot stream "
    "tool calls); replies are asked whole from now on and shown when they are complete"
)

log = logging.getLogger("boxmaker.loopd")

#: Statuses that mean "this server has no such endpoint" (llama-server answers 501 for a disabled /slots).
ABSENT = frozenset({404, 405, 501})
#: How long to wait for a TCP connection, in seconds, whatever the overall timeout.
CONNECT_TIMEOUT = 10.0
#: How long `ModelClient.server_info` waits in all for ``/props`` and ``/slots``, in seconds: a server
#: that accepts connections and never answers must not hold loopd's start (or a status tick) for the
#: model timeout (``[model] timeout_s``, 600 s).
PROBE_TIMEOUT_S = 5.0


# Values --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ServerInfo:
    """What the server says about itself (``/props`` and ``/slots``).

    Attributes:
        n_ctx: the PER-SLOT context in tokens (``/props`` ``default_generation_settings.n_ctx``, else
            ``/slots[0].n_ctx``); None when not reported.
        slots: how many slots (the length of ``/slots``, else ``/props`` ``total_slots``); None without.
        supports_tools: ``/props`` ``chat_template_caps.supports_tools``; None when not reported.
        llama: True when the server answers llama-server's ``/props`` or ``/slots``.
    """

    n_ctx: int | None
    slots: int | None
    supports_tools: bool | None
    llama: bool


@dataclass(frozen=True, slots=True)
class Completion:
    """One chat reply, with its token counts.

    Attributes:
        content: the reply's text (None when the model only called tools).
        reasoning: ``message.reasoning_content`` (llama-server), or ``message.reasoning`` (Ollama, vLLM).
        tool_calls: the calls, their arguments kept as the model's JSON string; an id the server left out
            is generated as ``call_<n>``.
        finish_reason: "stop", "length", "tool_calls", ... as the server sent it.
        prompt_n: prompt tokens evaluated for this request: ``timings.prompt_n``; without timings,
            ``usage.prompt_tokens`` minus the cached tokens.
        cache_n: prompt tokens reused from the slot's cache: ``timings.cache_n``; without timings,
            ``usage.prompt_tokens_details.cached_tokens``, else 0.
        predicted_n: tokens generated: ``timings.predicted_n``; else ``usage.completion_tokens``.
        timings: whether the server sent ``timings``.
    """

    content: str | None
    reasoning: str | None
    tool_calls: list[ToolCall]
    finish_reason: str
    prompt_n: int
    cache_n: int
    predicted_n: int
    timings: bool


# The client ----------------------------------------------------------------------------------------


class ModelClient:
    """A client for one model server; thread-safe, with one request at a time per slot.

    ``url`` is the server's base address (``http://127.0.0.1:8080``; a trailing ``/v1`` is accepted).
    ``transport`` replaces the network (tests pass an ``httpx.MockTransport``).
    """

    def __init__(
        self,
        url: str,
        *,
        model: str | None = None,
        api_key: str | None = None,
        timeout: float = 600.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        base = url.rstrip("/")
        self.url = base.removesuffix("/v1")
        self.model = model
        self.timeout = timeout
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.Client(
            base_url=self.url,
            headers=headers,
            timeout=httpx.Timeout(timeout, connect=min(timeout, CONNECT_TIMEOUT)),
            transport=transport,
        )
        self._guard = threading.Lock()
        self._slot_locks: dict[int | None, threading.Lock] = {}
        self._call_numbers = itertools.count(1)
        #: False once the server ended a stream without an event: its replies are asked plainly.
        self.streams = True

    def server_info(self, timeout: float = PROBE_TIMEOUT_S) -> ServerInfo:
        """Ask ``GET /props``, then ``GET /slots``, both within `timeout` seconds in all.

        An OpenAI-compatible server without them gives ``ServerInfo(None, None, None, False)``.
        Raises ModelUnreachable when the server cannot be reached, ModelError when it does not answer
        within `timeout`.
        """
        deadline = time.monotonic() + timeout
        props = self._probe("/props", timeout)
        slots = self._probe("/slots", max(0.1, deadline - time.monotonic()))
        n_ctx: int | None = None
        total: int | None = None
        tools: bool | None = None
        llama = False
        if isinstance(props, dict) and ("default_generation_settings" in props or "total_slots" in props):
            llama = True
            settings = props.get("default_generation_settings")
            n_ctx = count(settings.get("n_ctx")) if isinstance(settings, dict) else None
            total = count(props.get("total_slots"))
            caps = props.get("chat_template_caps")
            supports = caps.get("supports_tools") if isinstance(caps, dict) else None
            tools = supports if isinstance(supports, bool) else None
        if isinstance(slots, list) and all(isinstance(s, dict) and "id" in s for s in slots):
            llama = True
            total = len(slots)
            if n_ctx is None and slots:
                n_ctx = count(slots[0].get("n_ctx"))
        return ServerInfo(n_ctx=n_ctx, slots=total, supports_tools=tools, llama=llama)

    def complete(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        slot: int | None,
        max_tokens: int | None = None,
        *,
        on_text: Callable[[str], None] | None = None,
        cancel: threading.Event | None = None,
    ) -> Completion:
        """Ask ``POST /v1/chat/completions`` for the next assistant message.

        With ``slot`` given the body carries ``"id_slot": slot`` and ``"cache_prompt": true``; with None
        neither is sent. Requests on the same slot (None counts as one slot) wait for each other. With
        `on_text` the reply is streamed and each piece of its text is handed to `on_text` as it comes;
        with `cancel`, setting it abandons the request (`RequestCancelled` at once; the exchange itself
        ends in the background at its next piece, keeping the slot's order).

        Raises ContextFull when the prompt does not fit, ModelUnreachable without a connection,
        RequestCancelled when cancelled, and ModelError for any other failure or an unusable reply.
        """
        body: dict[str, Any] = {"messages": messages, "stream": on_text is not None}
        if self.model is not None:
            body["model"] = self.model
        if tools:
            body["tools"] = tools
            body["tool_choice"] = "auto"  # llama-cpp-python reads a missing one as "none"
        if max_tokens is not None:
            body["max_tokens"] = max_tokens
        if slot is not None:
            body["id_slot"] = slot
            body["cache_prompt"] = True
        if on_text is not None:
            body["stream_options"] = {"include_usage": True}
        if cancel is None:
            return self._exchange(body, slot, on_text, None)
        return _abandonable(lambda: self._exchange(body, slot, on_text, cancel), cancel)

    def _exchange(
        self,
        body: dict[str, Any],
        slot: int | None,
        on_text: Callable[[str], None] | None,
        cancel: threading.Event | None,
    ) -> Completion:
        """One chat completion on its slot, streamed when asked and the server can (a server that
        ends a stream without a single event, as llama-cpp-python does for tools with
        ``chatml-function-calling``, is asked plainly from then on, and its text handed on whole)."""
        with self._slot_lock(slot):
            reply: Any = None
            if on_text is not None and self.streams:
                response, reply = self._stream(body, on_text, cancel)
                if reply is None:
                    self.streams = False
                    log.warning("%s: %s", self.url, NO_STREAM)
            if reply is None:
                plain = {k: v for k, v in body.items() if k != "stream_options"} | {"stream": False}
                response = self._send("POST", CHAT, plain)
                reply = read_json(response, "chat completion")
        if response.status_code >= 400 or (isinstance(reply, dict) and "choices" not in reply):
            raise failure(response.status_code, reply, CHAT)
        completion = self._completion(reply)
        if on_text is not None and not self.streams and completion.content:
            on_text(completion.content)
        return completion

    def _stream(
        self, body: dict[str, Any], on_text: Callable[[str], None], cancel: threading.Event | None
    ) -> tuple[httpx.Response, Any]:
        """Send a streamed request; return the response and the reply joined into the plain shape (or
        the error body: a server refuses a streamed request with plain JSON)."""
        where = f"{self.url}{CHAT}"
        with _transport_errors(where, self.timeout), self._http.stream("POST", CHAT, json=body) as response:
            if not response.headers.get("content-type", "").startswith("text/event-stream"):
                response.read()
                return response, read_json(response, "chat completion")
            pieces = StreamedReply(on_text)
            for line in response.iter_lines():
                if cancel is not None and cancel.is_set():
                    raise RequestCancelled()
                try:
                    pieces.line(line)
                except ValueError as exc:
                    raise ModelError(f"the model server's stream from {where} is not JSON: {exc}") from None
                if pieces.done or pieces.error is not None:
                    break
        if pieces.error is None and not pieces.seen:
            return response, None  # an empty stream: the server could not stream this request
        return response, pieces.error if pieces.error is not None else pieces.reply()

    def tokenize(self, text: str) -> int | None:
        """How many tokens ``text`` is (``POST /tokenize``); None when the server has no /tokenize."""
        response = self._send("POST", "/tokenize", {"content": text})
        if response.status_code in ABSENT:
            return None
        reply = read_json(response, "tokenize")
        if response.status_code >= 400:
            raise failure(response.status_code, reply, "/tokenize")
        tokens = reply.get("tokens") if isinstance(reply, dict) else None
        if not isinstance(tokens, list):
            raise ModelError("the model server's /tokenize reply has no list `tokens`")
        return len(tokens)

    def erase_slot(self, slot: int, wait: float = 30.0) -> str:
        """Erase one slot's prompt cache: ``POST /slots/<slot>?action=erase`` (llama-server; seed 003
        section 12.3's model-server holder). Waits up to `wait` seconds for a completion of this
        client on the slot to finish first.

        Returns:
            "" when the server answered 200, else why not (in words: busy, the HTTP status and the
            server's message).

        Raises:
            ModelUnreachable: no connection.
        """
        lock = self._slot_lock(slot)
        if not lock.acquire(timeout=wait):
            return f"slot {slot} stayed busy for {wait:g} s"
        try:
            path = f"/slots/{slot}?action=erase"
            try:
                response = self._http.request("POST", path, timeout=wait)
            except (httpx.ConnectError, httpx.ConnectTimeout, httpx.NetworkError) as exc:
                raise ModelUnreachable(f"{self.url}{path}", reason(exc)) from exc
            except httpx.HTTPError as exc:
                return f"slot {slot}: {reason(exc)}"
        finally:
            lock.release()
        if response.status_code == 200:
            return ""
        try:
            detail = response.json()
        except ValueError:
            detail = None
        message = detail.get("error", {}).get("message") if isinstance(detail, dict) else None
        said = f": {message}" if isinstance(message, str) else ""
        return f"slot {slot}: HTTP {response.status_code}{said}"

    def close(self) -> None:
        """Close the connections."""
        self._http.close()

    # Internals -------------------------------------------------------------------------------------

    def _slot_lock(self, slot: int | None) -> threading.Lock:
        with self._guard:
            return self._slot_locks.setdefault(slot, threading.Lock())

    def _send(
        self, method: str, path: str, body: dict[str, Any] | None, timeout: float | None = None
    ) -> httpx.Response:
        """One HTTP exchange (within `timeout` seconds, else the client's); transport failures become
        ModelUnreachable or ModelError."""
        limit = self.timeout if timeout is None else timeout
        with _transport_errors(f"{self.url}{path}", limit):
            if timeout is None:
                return self._http.request(method, path, json=body)
            within = httpx.Timeout(timeout, connect=min(timeout, CONNECT_TIMEOUT))
            return self._http.request(method, path, json=body, timeout=within)
        raise AssertionError("unreachable")  # pragma: no cover (the context manager re-raises)

    def _probe(self, path: str, timeout: float) -> Any:
        """GET an optional endpoint within `timeout` seconds; None when it is absent or does not
        answer JSON."""
        response = self._send("GET", path, None, timeout)
        if response.status_code >= 400:
            return None
        try:
            return response.json()
        except ValueError:
            return None

    def _completion(self, reply: Any) -> Completion:
        choices = field(reply, "choices", list, "reply")
        if not choices:
            raise ModelError("the model server's reply has an empty `choices`")
        choice = choices[0]
        message = field(choice, "message", dict, "choices[0]")
        finish = field(choice, "finish_reason", str, "choices[0]")
        content = optional(message, "content", str, "message")
        reasoning = optional(message, "reasoning_content", str, "message")
        if reasoning is None:
            reasoning = optional(message, "reasoning", str, "message")
        calls = optional(message, "tool_calls", list, "message") or []
        tool_calls = [self._tool_call(call, i) for i, call in enumerate(calls)]
        prompt_n, cache_n, predicted_n, timed = counts(reply)
        return Completion(
            content=content,
            reasoning=reasoning,
            tool_calls=tool_calls,
            finish_reason=finish,
            prompt_n=prompt_n,
            cache_n=cache_n,
            predicted_n=predicted_n,
            timings=timed,
        )

    def _tool_call(self, call: Any, index: int) -> ToolCall:
        where = f"message.tool_calls[{index}]"
        function = field(call, "function", dict, where)
        name = field(function, "name", str, f"{where}.function")
        arguments = function.get("arguments")
        if isinstance(arguments, dict):  # some servers send an object; keep it as the JSON string
            arguments = json.dumps(arguments, ensure_ascii=False)
        elif arguments is None:
            arguments = "{}"
        elif not isinstance(arguments, str):
            raise ModelError(f"the model server's reply has a mistyped `{where}.function.arguments`")
        call_id = call.get("id")
        if not isinstance(call_id, str) or not call_id:
            call_id = f"call_{next(self._call_numbers)}"
        return ToolCall(id=call_id, name=name, arguments=arguments)


@contextlib.contextmanager
def _transport_errors(where: str, timeout: float) -> Iterator[None]:
    """Turn httpx's transport failures into ModelUnreachable or ModelError naming `where`."""
    try:
        yield
    except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
        raise ModelUnreachable(where, reason(exc)) from exc
    except httpx.TimeoutException as exc:
        raise ModelError(f"the model server at {where} did not answer within {timeout:g} s") from exc
    except httpx.NetworkError as exc:
        raise ModelUnreachable(where, reason(exc)) from exc
    except httpx.HTTPError as exc:
        raise ModelError(f"the exchange with the model server at {where} failed: {reason(exc)}") from exc


def _abandonable(exchange: Callable[[], Completion], cancel: threading.Event) -> Completion:
    """Run `exchange` on its own thread and wait for it, or for `cancel`: then raise RequestCancelled
    at once and leave the exchange to end by itself (it checks `cancel` at each piece it reads)."""
    outcome: list[Completion | BaseException] = []

    def run() -> None:
        try:
            outcome.append(exchange())
        except BaseException as exc:  # handed to the waiting thread
            outcome.append(exc)

    worker = threading.Thread(target=run, name="model-request", daemon=True)
    worker.start()
    while worker.is_alive():
        if cancel.wait(0.05):
            raise RequestCancelled()
        worker.join(0.05)
    result = outcome[0]
    if isinstance(result, BaseException):
        raise result
    return result


__all__ = ["ContextFull", "ModelError", "ModelUnreachable", "RequestCancelled"]
