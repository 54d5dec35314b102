"""The benchmarks run, print what DESIGN 10.7 fixes, and the recall quality holds its targets.

Speed is not asserted here (bench/scale.py prints it); quality is a property of the method.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from boxmaker.memoryd import tool
from boxmaker.memoryd.config import load
from boxmaker.memoryd.files import chain
from boxmaker.memoryd.service import Memoryd
from boxmaker.proto.labels import DataClass
from boxmaker.proto.messages import MemoryCall, ToolRequest
from conftest import Clock, shared_data

ROOT = Path(__file__).resolve().parents[1]
METRICS = {f"{m}@{k}" for m in ("any", "all", "frac") for k in (1, 5, 10)} | {"mrr", "p50_ms", "p99_ms", "n"}


def run(script: str, *args: str) -> dict[str, object]:
    result = subprocess.run(
        [sys.executable, str(ROOT / "bench" / script), *args, "--json"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    # the bench's stderr in the failure, so a failure in CI says why
    assert result.returncode == 0, f"{script} exited {result.returncode}: {result.stderr[-4000:]}"
    value: dict[str, object] = json.loads(result.stdout)
    return value


def test_locomo_recall_json_and_targets() -> None:
    result = run("locomo_recall.py", "--data", str(shared_data("locomo-dev.json")))
    assert set(result) == {"overall", "overall_1_4", "by_category", "n_questions", "n_dropped"}
    overall = result["overall"]
    assert isinstance(overall, dict)
    assert set(overall) == METRICS
    assert set(result["by_category"]) == {"1", "2", "3", "4", "5"}  # type: ignore[arg-type]
    assert result["n_questions"] == 999
    assert result["n_dropped"] == 2
    assert overall["n"] == 997
    assert all(0 <= overall[m] <= 1 for m in METRICS - {"p50_ms", "p99_ms", "n"})
    assert overall["any@5"] >= 0.70
    assert overall["frac@5"] >= 0.60


def test_locomo_recall_refuses_a_negative_distractor_count() -> None:
    result = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "locomo_recall.py"),
            "--data",
            str(shared_data("locomo-dev.json")),
            "--distractors",
            "-1",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert "--distractors must be 0 or more, not -1" in result.stderr
    assert "Traceback" not in result.stderr


def test_scale_benchmark_runs() -> None:
    result = run(
        "scale.py",
        "--sizes",
        "2000,3000",
        "--queries",
        "30",
        "--writes",
        "20",
        "--data",
        str(shared_data("locomo-dev.json")),
    )
    sizes = result["sizes"]
    assert isinstance(sizes, list)
    assert [s["records"] for s in sizes] == [2000, 3000]
    assert all(s["build_rate"] > 0 and s["recall_p99_ms"] >= s["recall_p50_ms"] > 0 for s in sizes)
    assert result["writes"] == 20


def test_startcheck_bench_runs_and_the_check_finds_nothing_in_a_sound_home() -> None:
    result = run("startcheck.py", "--items", "2000", "--since", "20")
    assert result["findings"] == 0
    assert result["items"] == 2000
    for key in ("no_checkpoint_s", "checkpoint_nothing_since_s", "checkpoint_with_since_s"):
        assert isinstance(result[key], float)


def test_seeded_notes_are_the_bytes_memoryd_writes(home: Path, clock: Clock) -> None:
    """bench/seed.py writes what `Writer.note` writes (so the growth benchmark's homes are real homes)."""
    sys.path.insert(0, str(ROOT / "bench"))
    from seed import note_lines

    service = Memoryd(load(None, str(home)), now=clock.now)
    service.open()
    journal_before = b"".join(p.read_bytes() for p in sorted((home / "memory" / "edits").glob("*.jsonl")))
    expected: dict[str, bytes] = {"notes.md": b"", "items.jsonl": b"", "edits": journal_before}
    fields = [("knowledge", None, None), ("state", "host1:address", None), ("knowledge", None, "Project X")]
    for position, (kind, subject, scope) in enumerate(fields):
        moment = clock.now()
        arguments = {"action": "note", "text": f"Note {position} about the deploy.", "kind": kind}
        arguments |= {k: v for k, v in (("subject", subject), ("scope", scope)) if v}
        request = ToolRequest(session="chat-seed", call_id=f"c{position}", tool="memory", arguments=arguments)
        reply = tool.call(
            service.memory, MemoryCall(request=request, taint=DataClass.PRIVATE, untrusted=False)
        )
        assert reply.code == "noted", reply.output
        ident = f"mem-{moment:%Y-%m-%d}-{position + 1:03d}"
        edit = str(next(service.memory.journal.entries_newest_first())["id"])
        made = note_lines(
            position,
            moment,
            ident,
            edit,
            text=str(arguments["text"]),
            kind=kind,
            subject=subject,
            scope=scope,
            session="chat-seed",
            notes_at=len(expected["notes.md"]),
            items_at=len(expected["items.jsonl"]),
        )
        for key, data in zip(expected, made, strict=True):
            expected[key] += data
        clock.advance(minutes=7)
    service.close()
    memory = home / "memory"
    assert (memory / "notes.md").read_bytes() == expected["notes.md"]
    assert (memory / "items.jsonl").read_bytes() == expected["items.jsonl"]
    written = b"".join(p.read_bytes() for p in sorted((memory / "edits").glob("*.jsonl")))
    assert unchained(written) == unchained(expected["edits"])  # the salts are fresh for every line


def unchained(journal: bytes) -> list[dict[str, object]]:
    """The journal's lines without their chain fields (`chain.FIELDS`: a fresh salt each)."""
    lines = [json.loads(raw) for raw in journal.splitlines()]
    return [{k: v for k, v in line.items() if k not in chain.FIELDS} for line in lines]


def test_growth_benchmark_runs() -> None:
    result = run(
        "scale.py",
        "--items",
        "0,100",
        "--growth-writes",
        "2",
        "--queries",
        "3",
        "--data",
        str(shared_data("locomo-dev.json")),
    )
    rows = result["rows"]
    assert isinstance(rows, list)
    assert [r["items"] for r in rows] == [0, 100]
    for row in rows:
        assert row["note"]["p99_ms"] >= row["note"]["p50_ms"] > 0
        assert row["peak_rss_mb"] > 0
        assert row["start_s"] > 0
        assert set(row["commands"]) >= {"items", "review", "export", "reindex"}
    assert result["fsyncs_per_commit"]["note"] > 0
    assert set(result["p50_ratio_to_first"]) == {"100"}
