"""The benchmarks run, print what DESIGN 10.7 fixes, and the recall quality holds its targets.

Speed is not asserted here (bench/scale.py prints it); quality is a property of the method.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conftest import shared_data

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
