"""A streamed chat completion, read as it arrives (``"stream": true``; DESIGN 10.3's ``chat_delta``).

llama-server and OpenAI-compatible servers answer a streamed request with server-sent events, one
``data: {chunk}`` line each, ending with ``data: [DONE]`` (``../shared/data/llama-server/stream_sample.txt``):

- ``choices[0].delta.content``: a piece of the reply's text, handed to the caller as it comes;
- ``choices[0].delta.reasoning_content`` (llama-server) or ``.reasoning`` (Ollama, vLLM): kept, never
  handed on (the owner does not see the model's thinking);
- ``choices[0].delta.tool_calls``: ``[{"index", "id"?, "function": {"name"?, "arguments"?}}]``, pieces
  of each call joined by ``index`` before any call is routed;
- ``choices[0].finish_reason`` on the last chunk with choices;
- ``usage`` (and llama-server's ``timings``) on a last chunk, often with empty ``choices``; loopd asks for
  it with ``stream_options.include_usage``. A server that sends no counts gets a usage of zeros, and a
  server without a cache count gets ``cache_n`` 0 (docs/configuration.md: compaction then starts later
  or only when a request does not fit).

An ``error`` object in a chunk is the server's failure, as in a plain reply.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class _Call:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


@dataclass
class StreamedReply:
    """The pieces of one streamed reply, joined into the shape of a plain (non-streamed) reply.

    Attributes:
        on_text: called with each piece of the reply's text as it arrives.
    """

    on_text: Callable[[str], None]
    content: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    calls: dict[int, _Call] = field(default_factory=dict)
    finish: str | None = None
    usage: dict[str, Any] | None = None
    timings: dict[str, Any] | None = None
    error: Any = None
    done: bool = False
    seen: bool = False  # at least one event arrived

    def line(self, text: str) -> None:
        """Read one line of the event stream.

        Raises:
            ValueError: a ``data:`` line that is not a JSON object (the sentence says so).
        """
        if not text.startswith("data:"):
            return  # a comment, an event name, a keep-alive, or the blank line between events
        data = text[5:].strip()
        self.seen = True
        if data == "[DONE]":
            self.done = True
            return
        chunk = json.loads(data)
        if not isinstance(chunk, dict):
            raise ValueError(f"a stream event is not a JSON object: {data[:80]!r}")
        self.chunk(chunk)

    def chunk(self, chunk: dict[str, Any]) -> None:
        """Take one chunk's pieces."""
        if "error" in chunk:
            self.error = chunk
            return
        if isinstance(chunk.get("usage"), dict):
            self.usage = chunk["usage"]
        if isinstance(chunk.get("timings"), dict):
            self.timings = chunk["timings"]
        choices = chunk.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            return
        choice = choices[0]
        if isinstance(choice.get("finish_reason"), str):
            self.finish = choice["finish_reason"]
        delta = choice.get("delta")
        if not isinstance(delta, dict):
            return
        for key in ("reasoning_content", "reasoning"):
            if isinstance(delta.get(key), str):
                self.reasoning.append(delta[key])
        if isinstance(delta.get("content"), str) and delta["content"]:
            self.content.append(delta["content"])
            self.on_text(delta["content"])
        for piece in delta.get("tool_calls") or []:
            if isinstance(piece, dict):
                self._call_piece(piece)

    def _call_piece(self, piece: dict[str, Any]) -> None:
        index = piece.get("index")
        call = self.calls.setdefault(index if isinstance(index, int) else len(self.calls), _Call())
        if isinstance(piece.get("id"), str) and piece["id"]:
            call.id = piece["id"]
        function = piece.get("function")
        if isinstance(function, dict):
            if isinstance(function.get("name"), str) and function["name"]:
                call.name = function["name"]
            if isinstance(function.get("arguments"), str):
                call.arguments.append(function["arguments"])

    def reply(self) -> dict[str, Any]:
        """The whole reply in the plain (non-streamed) shape: ``choices[0].message``, ``usage``,
        ``timings`` when sent (a usage of zeros when the server sent no counts)."""
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self.content) or None}
        if self.reasoning:
            message["reasoning_content"] = "".join(self.reasoning)
        if self.calls:
            message["tool_calls"] = [
                {
                    "id": call.id or None,
                    "type": "function",
                    "function": {"name": call.name, "arguments": "".join(call.arguments)},
                }
                for _, call in sorted(self.calls.items())
            ]
        finish = self.finish or ("tool_calls" if self.calls else "stop")
        reply: dict[str, Any] = {
            "choices": [{"index": 0, "finish_reason": finish, "message": message}],
            "usage": self.usage or {"prompt_tokens": 0, "completion_tokens": 0},
        }
        if self.timings is not None:
            reply["timings"] = self.timings
        return reply
