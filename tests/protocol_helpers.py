"""What the end-to-end tests of the memory protocol (seed 003) share: a `Box` of real daemons started
by `bxctl up` against the fake llama-server, the model's scripted tool calls, and the file checks.

Test modules import it with ``from protocol_helpers import Box, ...`` (pytest puts tests/ on the path).
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from boxmaker.proto.records import ToolResult, read_log
from fakes.llama_server import FakeLlamaServer, FakeReply

RETRIEVAL = re.compile(r"\(retrieval (memret-\d{4}-\d{2}-\d{2}-\d{3})\)")


@dataclass
class Box:
    """A home served by real memoryd, brokerd and loopd (`bxctl up`) and the fake model server."""

    home: Path
    model: FakeLlamaServer

    def bxctl(self, *args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
        """Run bxctl as the owner does (its own process); with `ok`, fail unless it exits 0."""
        done = subprocess.run(
            [sys.executable, "-m", "boxmaker.bxctl", "--home", str(self.home), *args],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if ok:
            assert done.returncode == 0, done.stdout + done.stderr
        assert "Traceback" not in done.stderr
        return done

    def chat(self, session: str, text: str, *replies: Script) -> subprocess.CompletedProcess[str]:
        """One turn of `bxctl chat`, the model's replies scripted in order."""
        self.model.script(*replies)
        return self.bxctl("chat", "--session", session, "-m", text)

    def items(self, *args: str) -> list[dict[str, Any]]:
        """`bxctl memory items --json ARGS`."""
        value: list[dict[str, Any]] = json.loads(self.bxctl("memory", "items", "--json", *args).stdout)
        return value

    def log_line(self, anchor: str) -> dict[str, Any]:
        """The session-log record a Source anchor (``sessions/<id>/<epoch>.jsonl#<line>``) names."""
        path, _, line = anchor.partition("#")
        lines = (self.home / path).read_text(encoding="utf-8").splitlines()
        record: dict[str, Any] = json.loads(lines[int(line) - 1])
        return record

    def baseline(self, session: str) -> dict[str, Any]:
        """The session's saved baseline (epoch 0): ``{"system", "tools", ...}``."""
        value: dict[str, Any] = json.loads((self.home / "sessions" / session / "0.baseline.json").read_text())
        return value

    def journal(self) -> list[dict[str, Any]]:
        """The last 1,000 lines of the edit journal, oldest first (`bxctl memory log --json`)."""
        value: list[dict[str, Any]] = json.loads(self.bxctl("memory", "log", "1000", "--json").stdout)
        return value

    def run_job(self, name: str, *replies: Script) -> list[ToolResult]:
        """Run a maintenance job once (see `run_job`)."""
        return run_job(self.home, self.model, name, *replies)


Script = FakeReply | Callable[[dict[str, Any]], FakeReply]


@contextmanager
def running(prefix: str, n_ctx: int = 16384) -> Iterator[Box]:
    """A new home under /tmp with every role up against a fake two-slot model server; `bxctl down` after."""
    root = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    with FakeLlamaServer(n_ctx=n_ctx, slots=2) as model:
        box = Box(root / "home", model)
        box.bxctl("up", "--model-url", model.url)
        try:
            yield box
        finally:
            box.bxctl("down", ok=False)


# The model's tool calls ---------------------------------------------------------------------------


def call(**arguments: Any) -> FakeReply:
    """The model calls the `memory` tool with these arguments."""
    return FakeReply(tool_calls=[("memory", arguments)])


def note_call(text: str, **fields: str) -> FakeReply:
    """The model calls `memory` `note`."""
    return call(action="note", text=text, **fields)


def propose_call(text: str, refs: list[str], target: str = "conventions") -> FakeReply:
    """The model calls `memory` `propose` with a benefit and a risk."""
    return call(
        action="propose",
        target=target,
        text=text,
        refs=refs,
        benefit="No deploy lands without a backup.",
        risk="Deploys wait when the check is slow.",
    )


def cite_retrieval(verdict: str, **extra: Any) -> Script:
    """The model's next reply: `memory` `feedback` on the last retrieval id a recall answer showed."""

    def reply(request: dict[str, Any]) -> FakeReply:
        shown = [m["content"] for m in request["messages"] if m["role"] == "tool"]
        ident = [i for content in shown for i in RETRIEVAL.findall(content)][-1]
        return call(action="feedback", retrieval=ident, verdict=verdict, **extra)

    return reply


def captured(box: Box, session: str, text: str) -> str:
    """The id of the item a session's `note` of `text` became."""
    box.chat(session, "Remember this.", note_call(text), FakeReply(content="Noted."))
    [item] = [i for i in box.items() if i["text"] == text]
    return str(item["id"])


# A model that acts on what its context says ---------------------------------------------------------
#
# These scripts decide from the request the model server receives (its system message, the owner's
# words, the tool results so far), never from the test's own constants, so what they do proves what
# reached the model's context.

_PRIOR = re.compile(r"\b(decid\w*|decision|agreed|earlier|last time|before)\b", re.I)
_TOPIC_LINE = re.compile(r"^- (?P<page>[\w.-]+)\.md — Read when: (?P<triggers>.+?)(?: · \w+)?$", re.M)


def _last_user(request: dict[str, Any]) -> str:
    return next(str(m["content"]) for m in reversed(request["messages"]) if m["role"] == "user")


def _tool_texts(request: dict[str, Any]) -> list[str]:
    """The tool results the model has read in this turn so far, oldest first."""
    messages = request["messages"]
    last_user = max(i for i, m in enumerate(messages) if m["role"] == "user")
    return [str(m["content"]) for m in messages[last_user:] if m["role"] == "tool"]


def reads_memory_for_prior_decisions(request: dict[str, Any]) -> FakeReply:
    """A model that follows the read rule of its system message (checklist 2). When the rule is there
    and the owner refers to an earlier decision: first `memory` `index`; then the topic page whose
    "Read when" triggers share a word with the owner's question, as the index it was given lists
    them; then `recall` of the question; then an answer quoting the topic page's first fact line.
    Without the rule, or for any other message, it answers without a tool."""
    system, asked = str(request["messages"][0]["content"]), _last_user(request)
    read = _tool_texts(request)
    if "earlier preferences, decisions or work" not in system or not _PRIOR.search(asked):
        return FakeReply(content="(answered without memory)")
    if not read:
        return call(action="index")
    if len(read) == 1:
        words = set(re.findall(r"\w+", asked.lower()))
        pages = [
            m["page"]
            for m in _TOPIC_LINE.finditer(read[0])
            if words & set(re.findall(r"\w+", m["triggers"].lower()))
        ]
        return call(action="topic", topic=pages[0]) if pages else FakeReply(content="(no topic matched)")
    if len(read) == 2:
        return FakeReply(tool_calls=[("recall", {"query": asked})])
    facts = [line[2:] for line in read[1].splitlines() if line.startswith("- ")]
    return FakeReply(content=f"From the topic page: {facts[0]}" if facts else "(the topic page had no fact)")


def obeys_conventions(request: dict[str, Any]) -> FakeReply:
    """A model that checks the owner's request against the rules of its baseline's conventions.md
    (checklist 10): a rule "Never <verb> ... <noun> ..." that shares its verb and a noun with the
    request makes it refuse, quoting the rule; otherwise it does what it was asked."""
    system, asked = str(request["messages"][0]["content"]), _last_user(request).lower()
    block = re.search(r"^# conventions\.md \(.*?\)\n\n(.*?)(?=\n\n# |\Z)", system, re.M | re.S)
    rules = [r.strip() for r in block.group(1).split("\n§\n")] if block else []
    for rule in rules:
        found = re.match(r"Never (\w+) (?:an? |the )?(\w+)", rule)
        if found and found.group(1).lower() in asked and found.group(2).lower().rstrip("s") in asked:
            return FakeReply(content=f"I will not: the rule in conventions.md says: {rule}")
    return FakeReply(content="Done as asked.")


# Reading what happened ----------------------------------------------------------------------------


def tool_results(box: Box, session: str) -> list[dict[str, Any]]:
    """The `tool_result` records of a session's epoch 0, in order."""
    lines = (box.home / "sessions" / session / "0.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if r["type"] == "tool_result"]


def wait_finished(home: Path, name: str, timeout: float = 60.0) -> dict[str, Any]:
    """The first finished or failed run of job `name` in ``jobs/runs.jsonl``; AssertionError on timeout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        path = home / "jobs" / "runs.jsonl"
        if path.exists():
            lines = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
            done = [x for x in lines if x["name"] == name and x["status"] in ("finished", "failed")]
            if done:
                return dict(done[0])
        time.sleep(0.2)
    raise AssertionError(f"job {name} did not run")


def run_job(home: Path, model: FakeLlamaServer, name: str, *replies: Script) -> list[ToolResult]:
    """Drop a maintenance job (the starter dream prompt) whose schedule does not come round by itself
    (midnight of 1 January), start one run with ``bxctl jobs run`` once the scheduler has read the file,
    let it finish, remove the file again; the run's tool results. (A job due every minute could fire a
    second time at a minute's turn before its file was removed, and that run took the next job's
    scripted replies.)"""
    model.script(*replies)
    path = home / "jobs" / f"{name}.toml"
    job = 'schedule = "0 0 1 1 *"\nmaintenance = true\nprompt_file = "dream.md"\n'
    path.write_text(job, encoding="utf-8")
    try:
        deadline = time.monotonic() + 30
        while True:
            started = subprocess.run(
                [sys.executable, "-m", "boxmaker.bxctl", "--home", str(home), "jobs", "run", name],
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
            if started.returncode == 0:
                break
            assert "Traceback" not in started.stderr, started.stderr
            assert time.monotonic() < deadline, started.stdout + started.stderr
            time.sleep(0.2)  # the scheduler reads new job files at its next tick
        run = wait_finished(home, name)
    finally:
        path.unlink()
    assert run["status"] == "finished", run
    records, _ = read_log(home / "sessions" / str(run["session"]) / "0.jsonl")
    return [r for r in records if isinstance(r, ToolResult)]


def snapshot(folder: Path) -> dict[str, str]:
    """Every file under `folder` and its sha256."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def forms(text: str) -> list[bytes]:
    """`text` as it could sit in a file: UTF-8, and JSON-escaped both ways."""
    found = {text.encode("utf-8")}
    for ascii_only in (True, False):
        once = json.dumps(text, ensure_ascii=ascii_only)[1:-1]
        found.add(once.encode("utf-8"))
        found.add(json.dumps(once, ensure_ascii=ascii_only)[1:-1].encode("utf-8"))  # JSON inside JSON
    return sorted(found)


def home_files(home: Path, skip_run: bool = False) -> dict[str, bytes]:
    """Every file of the home and its bytes (sockets excluded; `skip_run` leaves out run/, whose role
    logs grow by themselves)."""
    found = {}
    for path in sorted(home.rglob("*")):
        rel = str(path.relative_to(home))
        if not path.is_file() or (skip_run and rel.startswith("run/")):
            continue
        found[rel] = path.read_bytes()
    return found


def holding(home: Path, *needles: str) -> list[str]:
    """The files of the home (all of them) that hold any form of any needle."""
    wanted = [f for n in needles for f in forms(n)]
    return [rel for rel, data in home_files(home).items() if any(w in data for w in wanted)]
