"""What the model server's replies mean: the errors a request ends with, and the reading of a reply's
fields (``boxmaker.loopd.model`` sends the requests). The error tree is in that module's docstring.
"""

from __future__ import annotations

import json
import re
from typing import Any

import httpx

from boxmaker.proto.errors import BoxmakerError

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


class RequestCancelled(ModelError):
    """Raised when the caller's `cancel` event is set while a request runs: the request is abandoned
    (a stream is closed at its next piece, so the server stops generating)."""

    code = "cancelled"

    def __init__(self) -> None:
        super().__init__("the request to the model server was cancelled")


# Reading replies -----------------------------------------------------------------------------------


def reason(exc: Exception) -> str:
    text = str(exc)
    if "refused" in text.lower():
        return "connection refused"
    return text or type(exc).__name__


def read_json(response: httpx.Response, what: str) -> Any:
    """The response's JSON; ModelError with the status when it is not JSON."""
    try:
        return response.json()
    except ValueError:
        snippet = response.text[:200].strip()
        status = f"HTTP {response.status_code}"
        raise ModelError(f"the model server's {what} reply ({status}) is not JSON: {snippet!r}") from None


def failure(status: int, reply: Any, path: str) -> ModelError:
    """The error for a failed request: ContextFull when its type says so, else ModelError."""
    error = reply.get("error") if isinstance(reply, dict) else None
    if isinstance(error, dict):
        message = error.get("message")
        text = message if isinstance(message, str) else json.dumps(error)[:300]
        kinds = {error.get("type"), error.get("code")}
        if "exceed_context_size_error" in kinds:
            return ContextFull(count(error.get("n_prompt_tokens")), count(error.get("n_ctx")), text)
        if "context_length_exceeded" in kinds or CONTEXT_MESSAGE.search(text):
            return openai_context_full(text)
    elif isinstance(error, str):
        text = error
        if CONTEXT_MESSAGE.search(text):
            return openai_context_full(text)
    else:
        text = json.dumps(reply)[:300]
    if status < 400:
        return ModelError(f"the model server's {path} reply has no `choices`: {text}")
    return ModelError(f"the model server answered HTTP {status} to {path}: {text}")


def openai_context_full(text: str) -> ContextFull:
    """ContextFull from an OpenAI-style sentence ("maximum context length is 4096 tokens ... (6009 in
    the messages, ...)"); the numbers are None when the sentence does not give them."""
    n_ctx = re.search(r"context length (?:is|of) ([0-9]+)", text)
    n_prompt = re.search(r"([0-9]+) in the messages", text) or re.search(r"has ([0-9]+) input tokens", text)
    return ContextFull(
        int(n_prompt.group(1)) if n_prompt else None,
        int(n_ctx.group(1)) if n_ctx else None,
        text,
    )


def counts(reply: dict[str, Any]) -> tuple[int, int, int, bool]:
    """(prompt_n, cache_n, predicted_n, timings) from ``timings``, else from ``usage``."""
    timings = reply.get("timings")
    if timings is not None:
        prompt_n = field(timings, "prompt_n", int, "timings")
        cache_n = field(timings, "cache_n", int, "timings")
        predicted_n = field(timings, "predicted_n", int, "timings")
        return prompt_n, cache_n, predicted_n, True
    usage = field(reply, "usage", dict, "reply")
    prompt_tokens = field(usage, "prompt_tokens", int, "usage")
    completion_tokens = field(usage, "completion_tokens", int, "usage")
    details = optional(usage, "prompt_tokens_details", dict, "usage") or {}
    cached = optional(details, "cached_tokens", int, "usage.prompt_tokens_details") or 0
    return max(prompt_tokens - cached, 0), cached, completion_tokens, False


def field(value: Any, name: str, kind: type, where: str) -> Any:
    """``value[name]``, which must be a ``kind``; ModelError naming the field otherwise."""
    if not isinstance(value, dict):
        raise ModelError(f"the model server's reply has no object `{where}`")
    if name not in value or value[name] is None:
        raise ModelError(f"the model server's reply has no `{where}.{name}`")
    item = value[name]
    if not isinstance(item, kind) or (kind is int and isinstance(item, bool)):
        raise ModelError(f"the model server's reply has a mistyped `{where}.{name}` ({item!r:.60})")
    return item


def optional(value: dict[str, Any], name: str, kind: type, where: str) -> Any:
    """``value[name]`` when present and not null; ModelError when it has the wrong type."""
    if value.get(name) is None:
        return None
    return field(value, name, kind, where)


def count(value: Any) -> int | None:
    """A positive count from a server's self-description, else None."""
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return None
