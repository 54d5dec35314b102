"""The model client: one OpenAI-compatible chat server, llama.cpp's ``llama-server`` first (DESIGN section 7).

What the server says on the wire is recorded in ``../shared/data/llama-server/README.md`` and the samples
beside it; this module reads exactly those shapes:

- ``GET /props`` → ``default_generation_settings.n_ctx`` (the PER-SLOT context), ``total_slots``,
  ``chat_template_caps.supports_tools``; ``GET /slots`` → ``[{"id", "n_ctx", "is_processing"}, ...]``.
  Servers without them (Ollama, vLLM, llama-cpp-python, LM Studio) answer 404 and are still fine.
- ``POST /v1/chat/completions`` (non-streaming). ``id_slot`` pins a slot and ``cache_prompt`` keeps its
  prompt cache; both are sent only when a slot is given. The reply's ``timings`` (llama-server only) give
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
        └── ContextFull       the prompt does not fit the slot's context (code "session_full")

A reply cut by the token limit (``finish_reason: "length"``) is not an error: it is returned as is.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
import time
from dataclasses import dataclass
from typing import Any

import httpx

from boxmaker.proto.errors import BoxmakerError
from boxmaker.proto.records import ToolCall

#: Statuses that mean "this server has no such endpoint" (llama-server answers 501 for a disabled /slots).
ABSENT = frozenset({404, 405, 501})
#: How long to wait for a TCP connection, in seconds, whatever the overall timeout.
CONNECT_TIMEOUT = 10.0
#: How long `ModelClient.server_info` waits in all for ``/props`` and ``/slots``, in seconds: a server
#: that accepts connections and never answers must not hold loopd's start (or a status tick) for the
#: model timeout (``[model] timeout_s``, 600 s).
PROBE_TIMEOUT_S = 5.0
#: Messages that say the context is exceeded, in the OpenAI style (llama-cpp-python, vLLM) and llama's.
CONTEXT_MESSAGE = re.compile(
    r"maximum context length|exceeds? the (available )?context|context (length|size|window) (is )?exceeded",
    re.IGNORECASE,
)


# Errors --------------------------------------------------------------------------------------------


class ModelError(BoxmakerError):
    """Raised when the model server answers, but not with a usable reply.

    Attributes:
        code: stable machine-read code ("model-error").
        message: the sentence, which says what failed.
    """

    code = "model-error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ModelUnreachable(ModelError):
    """Raised when no connection to the model server could be made or kept; the sentence names the URL."""

    code = "model-unreachable"

    def __init__(self, url: str, why: str) -> None:
        super().__init__(f"cannot reach the model server at {url}: {why}")
        self.url = url


class ContextFull(ModelError):
    """Raised when the prompt does not fit the slot's context; the session must be compacted.

    Attributes:
        n_prompt: the prompt's size in tokens, when the server said it.
        n_ctx: the slot's context size in tokens, when the server said it.
    """

    code = "session_full"

    def __init__(self, n_prompt: int | None, n_ctx: int | None, detail: str = "") -> None:
        prompt = f" ({n_prompt:,} tokens)" if n_prompt is not None else ""
        context = f" ({n_ctx:,} tokens)" if n_ctx is not None else ""
        sentence = f"the prompt{prompt} does not fit the model's context{context}"
        if n_prompt is None and n_ctx is None and detail:
            sentence += f": {detail}"
        super().__init__(sentence)
        self.n_prompt = n_prompt
        self.n_ctx = n_ctx


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
            n_ctx = _count(settings.get("n_ctx")) if isinstance(settings, dict) else None
            total = _count(props.get("total_slots"))
            caps = props.get("chat_template_caps")
            supports = caps.get("supports_tools") if isinstance(caps, dict) else None
            tools = supports if isinstance(supports, bool) else None
        if isinstance(slots, list) and all(isinstance(s, dict) and "id" in s for s in slots):
            llama = True
            total = len(slots)
            if n_ctx is None and slots:
                n_ctx = _count(slots[0].get("n_ctx"))
        return ServerInfo(n_ctx=n_ctx, slots=total, supports_tools=tools, llama=llama)

    def complete(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        slot: int | None,
        max_tokens: int | None = None,
    ) -> Completion:
        """Ask ``POST /v1/chat/completions`` (non-streaming) for the next assistant message.

        With ``slot`` given the body carries ``"id_slot": slot`` and ``"cache_prompt": true``; with None
        neither is sent. Requests on the same slot (None counts as one slot) wait for each other.

        Raises ContextFull when the prompt does not fit, ModelUnreachable without a connection, and
        ModelError for any other failure or an unusable reply.
        """
        body: dict[str, Any] = {"messages": messages, "stream": False}
        if self.model is not None:
            body["model"] = self.model
        if tools:
            body["tools"] = tools
        if max_tokens is not None:
            body["max_tokens"] = max_tokens
        if slot is not None:
            body["id_slot"] = slot
            body["cache_prompt"] = True
        with self._slot_lock(slot):
            response = self._send("POST", "/v1/chat/completions", body)
        reply = _json(response, "chat completion")
        if response.status_code >= 400 or (isinstance(reply, dict) and "choices" not in reply):
            raise _failure(response.status_code, reply, "/v1/chat/completions")
        return self._completion(reply)

    def tokenize(self, text: str) -> int | None:
        """How many tokens ``text`` is (``POST /tokenize``); None when the server has no /tokenize."""
        response = self._send("POST", "/tokenize", {"content": text})
        if response.status_code in ABSENT:
            return None
        reply = _json(response, "tokenize")
        if response.status_code >= 400:
            raise _failure(response.status_code, reply, "/tokenize")
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
                raise ModelUnreachable(f"{self.url}{path}", _reason(exc)) from exc
            except httpx.HTTPError as exc:
                return f"slot {slot}: {_reason(exc)}"
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
        where = f"{self.url}{path}"
        limit = self.timeout if timeout is None else timeout
        try:
            if timeout is None:
                return self._http.request(method, path, json=body)
            within = httpx.Timeout(timeout, connect=min(timeout, CONNECT_TIMEOUT))
            return self._http.request(method, path, json=body, timeout=within)
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            raise ModelUnreachable(where, _reason(exc)) from exc
        except httpx.TimeoutException as exc:
            raise ModelError(f"the model server at {where} did not answer within {limit:g} s") from exc
        except httpx.NetworkError as exc:
            raise ModelUnreachable(where, _reason(exc)) from exc
        except httpx.HTTPError as exc:
            raise ModelError(f"the exchange with the model server at {where} failed: {_reason(exc)}") from exc

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
        choices = _field(reply, "choices", list, "reply")
        if not choices:
            raise ModelError("the model server's reply has an empty `choices`")
        choice = choices[0]
        message = _field(choice, "message", dict, "choices[0]")
        finish = _field(choice, "finish_reason", str, "choices[0]")
        content = _optional(message, "content", str, "message")
        reasoning = _optional(message, "reasoning_content", str, "message")
        if reasoning is None:
            reasoning = _optional(message, "reasoning", str, "message")
        calls = _optional(message, "tool_calls", list, "message") or []
        tool_calls = [self._tool_call(call, i) for i, call in enumerate(calls)]
        prompt_n, cache_n, predicted_n, timed = _counts(reply)
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
        function = _field(call, "function", dict, where)
        name = _field(function, "name", str, f"{where}.function")
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


# Reading replies -----------------------------------------------------------------------------------


def _reason(exc: Exception) -> str:
    text = str(exc)
    if "refused" in text.lower():
        return "connection refused"
    return text or type(exc).__name__


def _json(response: httpx.Response, what: str) -> Any:
    """The response's JSON; ModelError with the status when it is not JSON."""
    try:
        return response.json()
    except ValueError:
        snippet = response.text[:200].strip()
        status = f"HTTP {response.status_code}"
        raise ModelError(f"the model server's {what} reply ({status}) is not JSON: {snippet!r}") from None


def _failure(status: int, reply: Any, path: str) -> ModelError:
    """The error for a failed request: ContextFull when its type says so, else ModelError."""
    error = reply.get("error") if isinstance(reply, dict) else None
    if isinstance(error, dict):
        message = error.get("message")
        text = message if isinstance(message, str) else json.dumps(error)[:300]
        kinds = {error.get("type"), error.get("code")}
        if "exceed_context_size_error" in kinds:
            return ContextFull(_count(error.get("n_prompt_tokens")), _count(error.get("n_ctx")), text)
        if "context_length_exceeded" in kinds or CONTEXT_MESSAGE.search(text):
            return _openai_context_full(text)
    elif isinstance(error, str):
        text = error
        if CONTEXT_MESSAGE.search(text):
            return _openai_context_full(text)
    else:
        text = json.dumps(reply)[:300]
    if status < 400:
        return ModelError(f"the model server's {path} reply has no `choices`: {text}")
    return ModelError(f"the model server answered HTTP {status} to {path}: {text}")


def _openai_context_full(text: str) -> ContextFull:
    """ContextFull from an OpenAI-style sentence ("maximum context length is 4096 tokens ... (6009 in
    the messages, ...)"); the numbers are None when the sentence does not give them."""
    n_ctx = re.search(r"context length (?:is|of) ([0-9]+)", text)
    n_prompt = re.search(r"([0-9]+) in the messages", text) or re.search(r"has ([0-9]+) input tokens", text)
    return ContextFull(
        int(n_prompt.group(1)) if n_prompt else None,
        int(n_ctx.group(1)) if n_ctx else None,
        text,
    )


def _counts(reply: dict[str, Any]) -> tuple[int, int, int, bool]:
    """(prompt_n, cache_n, predicted_n, timings) from ``timings``, else from ``usage``."""
    timings = reply.get("timings")
    if timings is not None:
        prompt_n = _field(timings, "prompt_n", int, "timings")
        cache_n = _field(timings, "cache_n", int, "timings")
        predicted_n = _field(timings, "predicted_n", int, "timings")
        return prompt_n, cache_n, predicted_n, True
    usage = _field(reply, "usage", dict, "reply")
    prompt_tokens = _field(usage, "prompt_tokens", int, "usage")
    completion_tokens = _field(usage, "completion_tokens", int, "usage")
    details = _optional(usage, "prompt_tokens_details", dict, "usage") or {}
    cached = _optional(details, "cached_tokens", int, "usage.prompt_tokens_details") or 0
    return max(prompt_tokens - cached, 0), cached, completion_tokens, False


def _field(value: Any, name: str, kind: type, where: str) -> Any:
    """``value[name]``, which must be a ``kind``; ModelError naming the field otherwise."""
    if not isinstance(value, dict):
        raise ModelError(f"the model server's reply has no object `{where}`")
    if name not in value or value[name] is None:
        raise ModelError(f"the model server's reply has no `{where}.{name}`")
    item = value[name]
    if not isinstance(item, kind) or (kind is int and isinstance(item, bool)):
        raise ModelError(f"the model server's reply has a mistyped `{where}.{name}` ({item!r:.60})")
    return item


def _optional(value: dict[str, Any], name: str, kind: type, where: str) -> Any:
    """``value[name]`` when present and not null; ModelError when it has the wrong type."""
    if value.get(name) is None:
        return None
    return _field(value, name, kind, where)


def _count(value: Any) -> int | None:
    """A positive count from a server's self-description, else None."""
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return None
