"""loopd's own time per turn, outside the model (issue 3's benchmark; target p99 <= 20 ms).

Real memoryd and brokerd processes serve a temporary home; the loop runs in this process with their
socket clients and the fake llama-server (through an httpx MockTransport, so no HTTP time is counted
for it). Time inside the model client's `complete` is subtracted from each turn; what remains is
loopd's: the baseline (a `memory_block` round trip) for a new session, replaying the log into
messages, appending records (each fsynced), the broker round trip of a tool call (brokerd decides and
asks memoryd to recall), and `session_updated`.

Every other turn makes one `recall` call, so half the turns have two completions and a broker round
trip. Sessions run 20 turns each.

    python bench/loop_turn.py [--turns 1000] [--json]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from benchkit import percentiles  # noqa: E402
from boxmaker.loopd import erase  # noqa: E402
from boxmaker.loopd.broker import BrokerdClient  # noqa: E402
from boxmaker.loopd.loop import Loop, LoopSettings  # noqa: E402
from boxmaker.loopd.memory import MemorydSource  # noqa: E402
from boxmaker.loopd.model import Completion, ModelClient  # noqa: E402
from boxmaker.proto import wire  # noqa: E402
from boxmaker.proto.errors import PeerError  # noqa: E402
from boxmaker.proto.home import Layout  # noqa: E402
from boxmaker.proto.messages import MemoryAdmin, Status  # noqa: E402
from boxmaker.proto.settings import packaged_starter  # noqa: E402
from fakes.llama_server import FakeLlamaServer, FakeReply  # noqa: E402

TURNS_PER_SESSION = 20
WORDS = (
    "launch",
    "window",
    "moved",
    "thursday",
    "backup",
    "disk",
    "sister",
    "bees",
    "deploy",
    "garden",
    "invoice",
)


class TimedModel:
    """Wraps the model client and adds up the seconds spent inside `complete`."""

    def __init__(self, client: ModelClient) -> None:
        self.client = client
        self.seconds = 0.0

    def complete(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        slot: int | None,
        max_tokens: int | None = None,
    ) -> Completion:
        start = time.perf_counter()
        try:
            return self.client.complete(messages, tools, slot, max_tokens)
        finally:
            self.seconds += time.perf_counter() - start


def spawn(role: str, home: Path) -> subprocess.Popen[bytes]:
    log = (home.parent / f"{role}.log").open("ab")
    with log:
        return subprocess.Popen(
            [sys.executable, "-m", f"boxmaker.{role}", "serve", "--home", str(home)],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
        )


def wait(socket: Path, body: Any, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"{socket}: the role exited with {process.returncode}")
        try:
            wire.call(socket, body, timeout=5)
            return
        except PeerError:
            time.sleep(0.05)
    raise SystemExit(f"{socket}: no answer")


def measure(turns: int) -> dict[str, Any]:
    root = Path(tempfile.mkdtemp(prefix="bx-bench-", dir="/tmp"))
    home = root / "home"
    layout = Layout(home)
    processes = [spawn("memoryd", home)]
    try:
        wait(layout.memory_admin_socket, MemoryAdmin(command="status"), processes[0])
        processes.append(spawn("brokerd", home))
        wait(layout.broker_admin_socket, Status(), processes[1])
        server = FakeLlamaServer(n_ctx=1_000_000, slots=2)
        model = TimedModel(ModelClient("http://fake", transport=server.transport()))
        loop = Loop(
            layout.sessions,
            model,
            BrokerdClient(layout.broker_loop_socket),
            MemorydSource(layout.memory_loop_socket),
            lambda: packaged_starter("system.md").read_text(encoding="utf-8"),
            settings=LoopSettings(main_slot=0, tool_calls_per_turn=16, max_tokens=256),
            rescrub=erase.rescrub,
        )
        own: list[float] = []
        with_tool: list[float] = []
        first_turns: list[float] = []
        for n in range(turns):
            session = f"chat-bench{n // TURNS_PER_SESSION:04d}"
            text = f"turn {n}: the {WORDS[n % len(WORDS)]} and the {WORDS[(n * 7) % len(WORDS)]}"
            if n % 2:
                server.script(
                    FakeReply(tool_calls=[("recall", {"query": WORDS[n % len(WORDS)], "k": 5})]),
                    FakeReply(content=f"answer {n}"),
                )
            model.seconds = 0.0
            start = time.perf_counter()
            loop.turn(session, text)
            spent = (time.perf_counter() - start - model.seconds) * 1000
            own.append(spent)
            (with_tool if n % 2 else first_turns if n % TURNS_PER_SESSION == 0 else []).append(spent)
        p50, p99 = percentiles(own)
        tool_p50, tool_p99 = percentiles(with_tool)
        new_p50, new_p99 = percentiles(first_turns)
        return {
            "turns": turns,
            "sessions": (turns + TURNS_PER_SESSION - 1) // TURNS_PER_SESSION,
            "own_p50_ms": round(p50, 2),
            "own_p99_ms": round(p99, 2),
            "tool_turn_p50_ms": round(tool_p50, 2),
            "tool_turn_p99_ms": round(tool_p99, 2),
            "new_session_p50_ms": round(new_p50, 2),
            "new_session_p99_ms": round(new_p99, 2),
            "date": dt.date.today().isoformat(),
        }
    finally:
        for process in processes:
            process.terminate()
            process.wait(timeout=20)
        shutil.rmtree(root, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    result = measure(args.turns)
    if args.json:
        print(json.dumps(result))
    else:
        print(
            f"loopd's own time over {result['turns']:,} turns ({result['sessions']} sessions): "
            f"p50 {result['own_p50_ms']} ms, p99 {result['own_p99_ms']} ms\n"
            f"  turns with a recall call: p50 {result['tool_turn_p50_ms']} ms, "
            f"p99 {result['tool_turn_p99_ms']} ms\n"
            f"  first turns (new session, memory block): p50 {result['new_session_p50_ms']} ms, "
            f"p99 {result['new_session_p99_ms']} ms"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
