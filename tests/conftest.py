"""Helpers shared by the whole test suite.

``shared_data(name)`` resolves a file of the shared test data, which lives beside the checkout in
``../shared/data`` (data/README.md there: read it at test time, never copy it into the project).
A test that needs such a file fails when it is missing; it never skips.

Test modules import the helper with ``from conftest import shared_data``: pytest puts this folder
on ``sys.path`` when it loads this file.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

SHARED_DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"


def shared_data(name: str) -> Path:
    """The path of ``name`` in ``../shared/data``; FileNotFoundError when it is not there."""
    path = (SHARED_DATA / name).resolve()
    if not path.is_file():
        raise FileNotFoundError(
            f"{path}: shared test data is missing (expected in ../shared/data beside the checkout)"
        )
    return path


# The fault suite's options and figures (tests/faults) ----------------------------------------------

_FIGURES: list[str] = []


def pytest_addoption(parser: pytest.Parser) -> None:
    """``--long``: the fault suite's long versions (thousands of writes, tens of kills)."""
    parser.addoption(
        "--long",
        action="store_true",
        default=False,
        help="run the long versions of tests/faults (minutes; they print their figures)",
    )


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Collect the figures tests recorded (``record_property("figure", …)``), from every worker."""
    if report.when == "call":
        _FIGURES.extend(str(value) for name, value in report.user_properties if name == "figure")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Print the fault suite's figures after the run."""
    if _FIGURES:
        terminalreporter.section("fault suite figures")
        for line in sorted(_FIGURES):
            terminalreporter.write_line(line)


# Fixtures ------------------------------------------------------------------------------------------


def pytest_report_header() -> list[str]:
    """SQLite's version and whether FTS5 and the trigram tokenizer work (STYLE 17)."""
    conn = sqlite3.connect(":memory:")
    try:
        conn.execute("CREATE VIRTUAL TABLE t USING fts5(x, tokenize='trigram')")
        fts5 = "FTS5 with trigram: yes"
    except sqlite3.Error as exc:
        fts5 = f"FTS5 with trigram: NO ({exc})"
    finally:
        conn.close()
    return [f"sqlite {sqlite3.sqlite_version}; {fts5}"]


@pytest.fixture(autouse=True)
def home(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A throwaway home for every test, with BOXMAKER_HOME pointing at it (STYLE 17).

    It lives under a short /tmp path so socket paths stay under the platform's 107 bytes.
    """
    root = Path(tempfile.mkdtemp(prefix="bx-", dir="/tmp"))
    path = root / "home"
    monkeypatch.setenv("BOXMAKER_HOME", str(path))
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    yield path
    shutil.rmtree(root, ignore_errors=True)


class Clock:
    """A settable clock: `now()` returns the time set, in UTC; `advance` moves it."""

    def __init__(self, start: dt.datetime) -> None:
        self.moment = start

    def now(self) -> dt.datetime:
        return self.moment

    def advance(self, **delta: float) -> None:
        self.moment += dt.timedelta(**delta)


@pytest.fixture
def clock() -> Clock:
    """A clock set to 2026-09-24 21:02:07 UTC."""
    return Clock(dt.datetime(2026, 9, 24, 21, 2, 7, tzinfo=dt.UTC))


def record(kind: str, time: str = "2026-09-20T14:02:00Z", **fields: object) -> dict[str, object]:
    """A session-log record as a dict (DESIGN 10.4)."""
    return {"type": kind, "time": time, **fields}


def start(epoch: int = 0, time: str = "2026-09-20T14:00:00Z") -> dict[str, object]:
    """A `session_start` record."""
    return record("session_start", time, epoch=epoch, slot=0, baseline="sha256:" + "0" * 64)


def write_log(home: Path, session: str, records: list[dict[str, object]], epoch: int = 0) -> Path:
    """Append records to ``sessions/<session>/<epoch>.jsonl`` (ASCII JSON lines, as loopd writes them)."""
    folder = home / "sessions" / session
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{epoch}.jsonl"
    with path.open("a", encoding="ascii") as handle:
        for item in records:
            handle.write(json.dumps(item, ensure_ascii=True) + "\n")
    return path


@pytest.fixture
def service(home: Path, clock: Clock) -> Iterator[object]:
    """An opened memoryd service (no sockets) on the throwaway home."""
    from boxmaker.memoryd.config import load
    from boxmaker.memoryd.service import Memoryd

    memory = Memoryd(load(None, str(home)), now=clock.now)
    memory.open()
    assert memory.memory.index.wait_ready(60)
    yield memory
    memory.close()


def spawn_memoryd(home: Path, *args: str) -> subprocess.Popen[bytes]:
    """Start a real memoryd process on `home`; its stderr goes to ``<home>/../memoryd.log``."""
    command = [sys.executable, "-m", "boxmaker.memoryd", "serve", *args]
    if not any(a.startswith("--config") for a in args):
        command += ["--home", str(home)]
    with (home.parent / "memoryd.log").open("ab") as log:
        return subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=log)


def daemon_log(home: Path) -> str:
    """What the memoryd processes of a test wrote to stderr."""
    path = home.parent / "memoryd.log"
    return path.read_text(errors="replace") if path.exists() else ""


def wait_until_answers(process: subprocess.Popen[bytes], socket_path: Path, timeout: float = 30.0) -> None:
    """Wait for memoryd to answer `status` on its admin socket; fail with its log if it exits."""
    from boxmaker.proto import wire
    from boxmaker.proto.errors import PeerError
    from boxmaker.proto.messages import MemoryAdmin

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            home = socket_path.parents[2]
            raise AssertionError(f"memoryd exited with {process.returncode}: {daemon_log(home)}")
        try:
            wire.call(socket_path, MemoryAdmin(command="status"), timeout=5.0)
            return
        except PeerError:
            time.sleep(0.05)
    raise AssertionError("memoryd did not answer in time")


def stop(process: subprocess.Popen[bytes], sig: int = signal.SIGTERM) -> int:
    """Signal a process and wait for it; returns its exit status."""
    if process.poll() is None:
        process.send_signal(sig)
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    return process.returncode


@pytest.fixture
def daemon(home: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A real memoryd serving the throwaway home, stopped with SIGTERM afterwards."""
    process = spawn_memoryd(home)
    try:
        wait_until_answers(process, home / "run" / "owner-memory" / "admin.sock")
        yield process
    finally:
        stop(process)


def bxctl_ok(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run bxctl as the owner does (its own process, ``--home home``); fail the test unless it exits 0."""
    done = subprocess.run(
        [sys.executable, "-m", "boxmaker.bxctl", "--home", str(home), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def bxctl_down(home: Path) -> None:
    """Stop the roles `bxctl up` started for `home` (a test's cleanup: never fails)."""
    subprocess.run(
        [sys.executable, "-m", "boxmaker.bxctl", "--home", str(home), "down"], timeout=60, check=False
    )
