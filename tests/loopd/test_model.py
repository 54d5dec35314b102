"""The model client (boxmaker.loopd.model) against recorded llama-server replies and the fake server.

The recordings are read from ``../shared/data/llama-server/`` at test time (its README.md says what each
shows); a missing file fails the test. DESIGN section 7.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from boxmaker.loopd.model import (
    Completion,
    ContextFull,
    ModelClient,
    ModelError,
    ModelUnreachable,
    ServerInfo,
)
from boxmaker.proto.records import ToolCall
from conftest import shared_data
from fakes.llama_server import FakeLlamaServer, FakeReply, render_prompt, tokens

USER = [{"role": "user", "content": "What is the weather in Paris?"}]


# Recorded replies ----------------------------------------------------------------------------------


def sample(name: str, label: str) -> dict[str, Any]:
    """The exchange labelled ``label`` in a JSON samples file."""
    items = json.loads(shared_data(f"llama-server/{name}").read_text(encoding="utf-8"))
    return next(item for item in items if item["label"] == label)


def recorded_text(name: str, part: str = "") -> tuple[int, str]:
    """(status, body) of a ``curl`` capture: a JSON body followed by a line ``HTTP <status> ...``;
    ``part`` picks the exchange after the line ``== <part>`` in files holding several."""
    text = shared_data(f"llama-server/{name}").read_text(encoding="utf-8")
    if part:
        text = text.split(f"== {part}\n", 1)[1].split("\n== ", 1)[0]
    body, status_line = text.strip().rsplit("\n", 1)
    return int(status_line.split()[1]), body


Answer = tuple[int, Any]


def replay(answers: dict[str, Answer | list[Answer]]) -> tuple[httpx.MockTransport, list[httpx.Request]]:
    """A transport that answers each path with its recorded (status, body); a str body is sent raw.
    A list of answers is served in order. Other paths get 404. Returns the requests it saw as well."""
    seen: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        answer = answers.get(request.url.path)
        if isinstance(answer, list):
            answer = answer.pop(0)
        if answer is None:
            return httpx.Response(404, json={"detail": "Not Found"})
        status, body = answer
        if isinstance(body, str):
            return httpx.Response(status, content=body.encode(), headers={"Content-Type": "application/json"})
        return httpx.Response(status, json=body)

    return httpx.MockTransport(handle), seen


def replay_client(answers: dict[str, Answer | list[Answer]]) -> tuple[ModelClient, list[httpx.Request]]:
    transport, seen = replay(answers)
    return ModelClient("http://model.test", transport=transport), seen


def recorded_chat(name: str, label: str) -> Completion:
    """The Completion the client makes of a recorded chat reply."""
    item = sample(name, label)
    client, _ = replay_client({"/v1/chat/completions": (item["status"], item["response"])})
    return client.complete(item["request"]["messages"], None, 0)


# server_info ---------------------------------------------------------------------------------------


def test_server_info_from_the_recorded_props_and_slots() -> None:
    props, slots = sample("samples_llama_server.json", "props"), sample("samples_llama_server.json", "slots")
    client, seen = replay_client({"/props": (200, props["response"]), "/slots": (200, slots["response"])})
    assert client.server_info() == ServerInfo(n_ctx=4096, slots=2, supports_tools=False, llama=True)
    assert [r.url.path for r in seen] == ["/props", "/slots"]


def test_server_info_with_slots_disabled_takes_total_slots_from_props() -> None:
    props = sample("samples_llama_server.json", "props")["response"]
    disabled = {"error": {"code": 501, "message": "This server does not support slots endpoint."}}
    client, _ = replay_client({"/props": (200, props), "/slots": (501, disabled)})
    assert client.server_info() == ServerInfo(n_ctx=4096, slots=2, supports_tools=False, llama=True)


def test_server_info_from_slots_alone_takes_the_per_slot_n_ctx() -> None:
    slots = sample("samples_llama_server.json", "slots after")["response"]
    client, _ = replay_client({"/slots": (200, slots)})
    assert client.server_info() == ServerInfo(n_ctx=4096, slots=2, supports_tools=None, llama=True)


def test_server_info_of_an_openai_compatible_server_is_all_unknown() -> None:
    client, _ = replay_client({"/props": (200, "<html>a web UI</html>")})
    assert client.server_info() == ServerInfo(None, None, None, llama=False)


# Token counts --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("label", "cache_n", "prompt_n", "predicted_n"),
    [
        ("chat turn1 slot0", 0, 624, 32),
        ("chat turn2 slot0 (extension)", 655, 34, 32),
        ("chat turn3 slot0 after slot1 work", 720, 32, 16),
        ("chat background slot1", 0, 284, 16),
    ],
)
def test_counts_come_from_the_recorded_timings(
    label: str, cache_n: int, prompt_n: int, predicted_n: int
) -> None:
    reply = recorded_chat("samples_llama_server.json", label)
    assert (reply.cache_n, reply.prompt_n, reply.predicted_n, reply.timings) == (
        cache_n,
        prompt_n,
        predicted_n,
        True,
    )
    assert reply.finish_reason == "length"  # cut by max_tokens: a reply, not an error


def test_counts_without_timings_come_from_usage() -> None:
    status, body = recorded_text("llama_cpp_python_resp_lcp_chat1.txt")
    client, _ = replay_client({"/v1/chat/completions": (status, body)})
    reply = client.complete(USER, None, None)
    assert (reply.prompt_n, reply.cache_n, reply.predicted_n, reply.timings) == (27, 0, 64, False)
    assert reply.content is not None
    assert reply.content.startswith("\n<img")


def test_usage_with_cached_tokens_counts_them_apart_from_the_prompt() -> None:
    body = json.loads(recorded_text("llama_cpp_python_resp_lcp_chat1.txt")[1])
    body["usage"] = {
        "prompt_tokens": 100,
        "completion_tokens": 5,
        "prompt_tokens_details": {"cached_tokens": 60},
    }
    client, _ = replay_client({"/v1/chat/completions": (200, body)})
    reply = client.complete(USER, None, None)
    assert (reply.prompt_n, reply.cache_n, reply.predicted_n) == (40, 60, 5)


# The context error ---------------------------------------------------------------------------------


@pytest.mark.parametrize("status", [400, 500])
def test_the_recorded_context_error_is_context_full_whatever_the_status(status: int) -> None:
    body = sample("samples_llama_server.json", "overflow chat")["response"]
    client, _ = replay_client({"/v1/chat/completions": (status, body)})
    with pytest.raises(ContextFull) as caught:
        client.complete(USER, None, 0)
    assert (caught.value.n_prompt, caught.value.n_ctx, caught.value.code) == (6024, 4096, "session_full")
    assert str(caught.value) == "the prompt (6,024 tokens) does not fit the model's context (4,096 tokens)"


def test_the_context_error_of_a_streamed_request_is_context_full_too() -> None:
    status, body = recorded_text("stream_overflow.txt")
    client, _ = replay_client({"/v1/chat/completions": (status, body)})
    with pytest.raises(ContextFull) as caught:
        client.complete(USER, None, 0)
    assert (caught.value.n_prompt, caught.value.n_ctx) == (6054, 4096)


def test_the_llama_cpp_python_context_error_is_context_full() -> None:
    status, body = recorded_text("llama_cpp_python_resp_lcp_overflow.txt")
    client, _ = replay_client({"/v1/chat/completions": (status, body)})
    with pytest.raises(ContextFull) as caught:
        client.complete(USER, None, None)
    assert (caught.value.n_prompt, caught.value.n_ctx) == (6009, 4096)


def test_a_context_sentence_without_numbers_is_context_full_with_the_servers_words() -> None:
    body = {"error": {"message": "The input exceeds the context window", "code": "context_length_exceeded"}}
    client, _ = replay_client({"/v1/chat/completions": (400, body)})
    with pytest.raises(ContextFull) as caught:
        client.complete(USER, None, None)
    assert (caught.value.n_prompt, caught.value.n_ctx) == (None, None)
    assert (
        str(caught.value)
        == "the prompt does not fit the model's context: The input exceeds the context window"
    )


def test_another_http_error_is_a_model_error_with_the_status_and_message() -> None:
    body = {"error": {"code": 503, "message": "Loading model", "type": "unavailable_error"}}
    client, _ = replay_client({"/v1/chat/completions": (503, body)})
    with pytest.raises(ModelError) as caught:
        client.complete(USER, None, 0)
    assert type(caught.value) is ModelError
    assert str(caught.value) == "the model server answered HTTP 503 to /v1/chat/completions: Loading model"


# Reasoning and tool calls --------------------------------------------------------------------------


def test_reasoning_content_is_kept() -> None:
    reply = recorded_chat("samples_tools.json", "reasoning default (auto/deepseek)")
    assert reply.content == ""
    assert reply.reasoning == "<think>\n" * 10


def test_reasoning_under_ollamas_name_is_kept() -> None:
    body = json.loads(recorded_text("llama_cpp_python_resp_lcp_chat1.txt")[1])
    body["choices"][0]["message"] = {"role": "assistant", "content": "Yes.", "reasoning": "17 is prime."}
    client, _ = replay_client({"/v1/chat/completions": (200, body)})
    assert client.complete(USER, None, None).reasoning == "17 is prime."


def test_tool_calls_are_parsed_from_the_recorded_llama_server_reply() -> None:
    reply = recorded_chat("samples_tools.json", "tool result round trip")
    assert reply.tool_calls == [
        ToolCall(id="zXTnv8KaQ08vim3UaBMJBAi7gkauYppe", name="get_weather", arguments="{")
    ]
    assert reply.content == "</tool_response>\n\n"


def test_tool_calls_are_parsed_from_the_recorded_llama_cpp_python_reply() -> None:
    status, body = recorded_text("llama_cpp_python_resp_lcp_tools_fc.txt", "req_tools_forced.json")
    client, _ = replay_client({"/v1/chat/completions": (status, body)})
    reply = client.complete(USER, [], None)
    assert reply.tool_calls == [
        ToolCall(
            id="call__0_get_weather_cmpl-4cfb4fd6-83e4-4948-92dd-87f930af0911",
            name="get_weather",
            arguments='{ "city": "Paris" } ',
        )
    ]
    assert (reply.content, reply.finish_reason) == (None, "tool_calls")


def test_a_tool_call_without_an_id_gets_one() -> None:
    calls = [{"type": "function", "function": {"name": "a", "arguments": "{}"}} for _ in range(2)]
    body = {
        "choices": [{"finish_reason": "tool_calls", "message": {"content": None, "tool_calls": calls}}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2},
    }
    client, _ = replay_client({"/v1/chat/completions": (200, body)})
    assert [c.id for c in client.complete(USER, None, None).tool_calls] == ["call_1", "call_2"]


# Malformed replies and unreachable servers ---------------------------------------------------------


def chat_body() -> dict[str, Any]:
    return json.loads(json.dumps(sample("samples_llama_server.json", "chat turn1 slot0")["response"]))


def without(path: str) -> dict[str, Any]:
    """The recorded turn-1 reply without the field at ``path`` (dotted; a number indexes a list)."""
    body = chat_body()
    *parents, last = path.split(".")
    node: Any = body
    for part in parents:
        node = node[int(part)] if part.isdigit() else node[part]
    del node[last]
    return body


@pytest.mark.parametrize(
    ("body", "sentence"),
    [
        (
            {"id": "x", "object": "chat.completion"},
            'the model server\'s /v1/chat/completions reply has no `choices`: {"id": "x", "object": '
            '"chat.completion"}',
        ),
        ({**chat_body(), "choices": []}, "the model server's reply has an empty `choices`"),
        (without("choices.0.message"), "the model server's reply has no `choices[0].message`"),
        (without("choices.0.finish_reason"), "the model server's reply has no `choices[0].finish_reason`"),
        ({**chat_body(), "timings": {"cache_n": "7"}}, "the model server's reply has no `timings.prompt_n`"),
        (
            {**chat_body(), "timings": {"cache_n": "7", "prompt_n": 1, "predicted_n": 1}},
            "the model server's reply has a mistyped `timings.cache_n` ('7')",
        ),
        (
            {k: v for k, v in chat_body().items() if k not in ("timings", "usage")},
            "the model server's reply has no `reply.usage`",
        ),
        (
            "not json at all",
            "the model server's chat completion reply (HTTP 200) is not JSON: 'not json at all'",
        ),
        ([1, 2], "the model server's reply has no object `reply`"),
    ],
)
def test_a_malformed_reply_is_a_model_error_that_says_what_is_wrong(body: Any, sentence: str) -> None:
    client, _ = replay_client({"/v1/chat/completions": (200, body)})
    with pytest.raises(ModelError) as caught:
        client.complete(USER, None, 0)
    assert str(caught.value) == sentence
    assert caught.value.code == "model-error"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def test_connection_refused_is_model_unreachable_naming_the_url() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    client = ModelClient(url, timeout=5)
    with pytest.raises(ModelUnreachable) as caught:
        client.complete(USER, None, 0)
    assert (
        str(caught.value) == f"cannot reach the model server at {url}/v1/chat/completions: connection refused"
    )
    assert caught.value.code == "model-unreachable"
    with pytest.raises(ModelUnreachable, match="/props: connection refused"):
        client.server_info()
    client.close()


# Against the fake server, over a socket and through its transport ----------------------------------


@pytest.fixture(params=["socket", "transport"])
def connect(request: pytest.FixtureRequest) -> Iterator[Callable[..., tuple[FakeLlamaServer, ModelClient]]]:
    """Start a fake server with the given options and a client on it, over a socket or a transport."""
    opened: list[tuple[FakeLlamaServer, ModelClient]] = []

    def make(**options: Any) -> tuple[FakeLlamaServer, ModelClient]:
        server = FakeLlamaServer(**options)
        if request.param == "socket":
            client = ModelClient(server.start().url, timeout=10)
        else:
            client = ModelClient("http://fake-llama", transport=server.transport())
        opened.append((server, client))
        return server, client

    yield make
    for server, client in opened:
        client.close()
        server.stop()


def test_server_info_of_the_fake(connect: Callable[..., tuple[FakeLlamaServer, ModelClient]]) -> None:
    _, client = connect(n_ctx=2048, slots=3)
    assert client.server_info() == ServerInfo(n_ctx=2048, slots=3, supports_tools=True, llama=True)
    _, degraded = connect(degraded=True)
    assert degraded.server_info() == ServerInfo(None, None, None, llama=False)


def test_slot_fields_are_sent_only_with_a_slot(
    connect: Callable[..., tuple[FakeLlamaServer, ModelClient]],
) -> None:
    server, client = connect()
    client.complete(USER, None, 1, max_tokens=8)
    client.complete(USER, [], None)
    pinned, free = (body for _, body in server.requests)
    assert (pinned["id_slot"], pinned["cache_prompt"], pinned["max_tokens"]) == (1, True, 8)
    assert not {"id_slot", "cache_prompt", "tools", "model", "max_tokens"} & set(free)


def test_model_and_tools_are_sent_when_given() -> None:
    server = FakeLlamaServer()
    client = ModelClient("http://fake-llama", model="small", transport=server.transport())
    tools = [{"type": "function", "function": {"name": "recall", "parameters": {"type": "object"}}}]
    client.complete(USER, tools, 0)
    _, body = server.requests[0]
    assert (body["model"], body["tools"]) == ("small", tools)


def test_a_chat_with_the_fake_returns_its_reply_and_counts(
    connect: Callable[..., tuple[FakeLlamaServer, ModelClient]],
) -> None:
    _, client = connect()
    reply = client.complete([{"role": "user", "content": "hello there"}], None, 0)
    assert (reply.content, reply.finish_reason, reply.cache_n, reply.timings) == (
        "ok: hello there",
        "stop",
        0,
        True,
    )
    assert reply.predicted_n == 4  # "ok", ":", "hello", "there"


def test_tokenize_counts_tokens_and_is_none_without_the_endpoint(
    connect: Callable[..., tuple[FakeLlamaServer, ModelClient]],
) -> None:
    _, client = connect()
    assert client.tokenize("Hello, world!") == 4
    _, degraded = connect(degraded=True)
    assert degraded.tokenize("Hello, world!") is None


def test_the_degraded_fake_gives_counts_from_usage(
    connect: Callable[..., tuple[FakeLlamaServer, ModelClient]],
) -> None:
    server, client = connect(degraded=True)
    server.script(FakeReply(content="Yes.", reasoning="17 has no divisors"))
    reply = client.complete([{"role": "user", "content": "Is 17 prime?"}], None, 0)
    assert (reply.content, reply.reasoning, reply.timings, reply.cache_n) == (
        "Yes.",
        "17 has no divisors",
        False,
        0,
    )
    assert reply.prompt_n > 0


def test_tool_calls_and_reasoning_from_the_fake(
    connect: Callable[..., tuple[FakeLlamaServer, ModelClient]],
) -> None:
    server, client = connect()
    server.script(FakeReply(tool_calls=[("get_weather", {"city": "Paris"})], reasoning="Need the weather."))
    weather = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}
    reply = client.complete(USER, [weather], 0)
    assert reply.finish_reason == "tool_calls"
    assert reply.reasoning == "Need the weather."
    assert [(c.name, c.arguments) for c in reply.tool_calls] == [("get_weather", '{"city": "Paris"}')]
    assert len(reply.tool_calls[0].id) == 32


def prompt_size(messages: list[dict[str, Any]]) -> int:
    """The fake's token count of a prompt of ``messages`` without tools."""
    return len(tokens(render_prompt(messages, None)))


@pytest.mark.parametrize("old_status", [False, True])
def test_the_fakes_context_error_is_context_full(
    connect: Callable[..., tuple[FakeLlamaServer, ModelClient]], old_status: bool
) -> None:
    _, client = connect(n_ctx=16, old_status=old_status)
    messages = [{"role": "user", "content": "one two three four five six seven eight"}]
    with pytest.raises(ContextFull) as caught:
        client.complete(messages, None, 0)
    assert (caught.value.n_prompt, caught.value.n_ctx) == (prompt_size(messages), 16)


def test_the_degraded_fakes_context_error_is_context_full(
    connect: Callable[..., tuple[FakeLlamaServer, ModelClient]],
) -> None:
    _, client = connect(n_ctx=16, degraded=True)
    messages = [{"role": "user", "content": "one two three"}]
    with pytest.raises(ContextFull) as caught:
        client.complete(messages, None, 0, max_tokens=8)
    assert (caught.value.n_prompt, caught.value.n_ctx) == (prompt_size(messages), 16)


def test_a_reply_cut_by_the_context_is_returned_with_length(
    connect: Callable[..., tuple[FakeLlamaServer, ModelClient]],
) -> None:
    messages = [{"role": "user", "content": "hi"}]
    server, client = connect(n_ctx=prompt_size(messages) + 5)
    server.script(FakeReply(content="a b c d e f g h i j"))
    reply = client.complete(messages, None, 0)
    assert (reply.content, reply.finish_reason, reply.predicted_n) == ("a b c d e", "length", 5)


# One request at a time per slot --------------------------------------------------------------------


def run_together(client: ModelClient, slots: list[int | None]) -> None:
    """One completion per entry of ``slots``, each from its own thread, all at once."""
    errors: list[BaseException] = []

    def one(slot: int | None) -> None:
        try:
            client.complete([{"role": "user", "content": f"on {slot}"}], None, slot)
        except BaseException as exc:  # re-raised in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(slot,)) for slot in slots]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert not errors


def overlapping(spans: list[tuple[int, float, float]]) -> bool:
    (_, start_a, end_a), (_, start_b, end_b) = spans
    return start_a < end_b and start_b < end_a


@pytest.mark.parametrize("slot", [0, None])
def test_two_requests_on_one_slot_take_turns(
    connect: Callable[..., tuple[FakeLlamaServer, ModelClient]], slot: int | None
) -> None:
    server, client = connect(delay=0.15)
    run_together(client, [slot, slot])
    assert not overlapping(server.spans)
    assert server.queued == 0  # the client held the second back; the server never saw it wait


def test_requests_on_two_slots_run_at_once(
    connect: Callable[..., tuple[FakeLlamaServer, ModelClient]],
) -> None:
    server, client = connect(delay=0.15)
    run_together(client, [0, 1])
    assert overlapping(server.spans)
    assert sorted(slot for slot, _, _ in server.spans) == [0, 1]


# The fake itself -----------------------------------------------------------------------------------


def test_the_fakes_cache_grows_across_a_strictly_extending_conversation() -> None:
    server = FakeLlamaServer()
    client = ModelClient("http://fake-llama", transport=server.transport())
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are terse."}]
    totals: list[int] = []
    caches: list[int] = []
    for turn in ("Name three colours.", "And three more?", "Thanks!"):
        messages.append({"role": "user", "content": turn})
        reply = client.complete(messages, None, 0)
        messages.append({"role": "assistant", "content": reply.content})
        caches.append(reply.cache_n)
        totals.append(reply.cache_n + reply.prompt_n + reply.predicted_n)
    assert caches == [0, totals[0] - 1, totals[1] - 1]
    assert caches[0] < caches[1] < caches[2]


def test_the_fakes_context_error_has_llama_servers_shape() -> None:
    server = FakeLlamaServer(n_ctx=8)
    status, body = server.handle("POST", "/v1/chat/completions", json.dumps({"messages": USER}).encode())
    recorded = sample("samples_llama_server.json", "overflow chat")["response"]
    assert status == 400
    assert set(body["error"]) == set(recorded["error"])
    assert body["error"]["type"] == "exceed_context_size_error"
    assert body["error"]["message"] == (
        f"request ({body['error']['n_prompt_tokens']} tokens) exceeds the available context size (8 tokens), "
        "try increasing it"
    )
    assert (
        FakeLlamaServer(n_ctx=8, old_status=True).handle(
            "POST", "/v1/chat/completions", json.dumps({"messages": USER}).encode()
        )[0]
        == 500
    )


def test_the_fakes_replies_have_the_recorded_keys() -> None:
    server = FakeLlamaServer()
    _, body = server.handle(
        "POST", "/v1/chat/completions", json.dumps({"messages": USER, "id_slot": 0}).encode()
    )
    recorded = sample("samples_llama_server.json", "chat turn1 slot0")["response"]
    assert set(body) == set(recorded)
    assert set(body["timings"]) == set(recorded["timings"])
    assert set(body["usage"]) == set(recorded["usage"])
    assert body["usage"]["prompt_tokens"] == body["timings"]["cache_n"] + body["timings"]["prompt_n"]
    props = sample("samples_llama_server.json", "props")["response"]
    assert (
        server.handle("GET", "/props", b"")[1]["default_generation_settings"]["n_ctx"]
        == props["default_generation_settings"]["n_ctx"]
    )


def test_a_second_slot_leaves_slot_0s_cache_alone() -> None:
    server = FakeLlamaServer()
    client = ModelClient("http://fake-llama", transport=server.transport())
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Remember the number seven."}]
    first = client.complete(messages, None, 0)
    client.complete([{"role": "user", "content": "Summarise the quick brown fox."}], None, 1)
    messages += [
        {"role": "assistant", "content": first.content},
        {"role": "user", "content": "Which number?"},
    ]
    second = client.complete(messages, None, 0)
    assert second.cache_n == first.cache_n + first.prompt_n + first.predicted_n - 1


def test_the_fake_without_cache_prompt_reuses_nothing() -> None:
    server = FakeLlamaServer()
    first = {"messages": USER, "id_slot": 0}
    server.handle("POST", "/v1/chat/completions", json.dumps(first).encode())
    _, body = server.handle(
        "POST", "/v1/chat/completions", json.dumps({**first, "cache_prompt": False}).encode()
    )
    assert body["timings"]["cache_n"] == 0


def test_the_fake_picks_an_idle_slot_by_shared_prefix_and_wraps_out_of_range_ids() -> None:
    server = FakeLlamaServer(slots=2)
    client = ModelClient("http://fake-llama", transport=server.transport())
    client.complete([{"role": "user", "content": "alpha"}], None, 3)  # wraps to slot 1
    assert [slot for slot, _, _ in server.spans] == [1]
    reply = client.complete([{"role": "user", "content": "alpha"}], None, None)  # free: the warm slot 1
    assert server.spans[-1][0] == 1
    assert reply.cache_n > 0


def test_the_fake_answers_scripts_in_order_then_the_default() -> None:
    server = FakeLlamaServer()
    client = ModelClient("http://fake-llama", transport=server.transport())
    server.script(
        FakeReply(content="first"), lambda body: FakeReply(content=f"{len(body['messages'])} messages")
    )
    answers = [client.complete(USER, None, 0).content for _ in range(3)]
    assert answers == ["first", "1 messages", "ok: What is the weather in Paris?"]


def test_the_fake_runs_as_a_script() -> None:
    script = Path(__file__).resolve().parents[1] / "fakes" / "llama_server.py"
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, str(script), "--port", str(port), "--n-ctx", "1024", "--slots", "1"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        assert process.stdout.readline().strip() == f"fake llama-server listening on http://127.0.0.1:{port}"
        client = ModelClient(f"http://127.0.0.1:{port}/v1")
        assert client.server_info() == ServerInfo(n_ctx=1024, slots=1, supports_tools=True, llama=True)
        client.close()
    finally:
        process.send_signal(signal.SIGTERM)
        status = process.wait(timeout=10)
        if process.stdout is not None:
            process.stdout.close()
    assert status == 0
