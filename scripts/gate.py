"""The one gate: format, lint, types, generated tables (invisible ranges, confusables), tests.

CI runs the same (.ci/run).

Usage: ``.venv/bin/python scripts/gate.py [pytest args...]``. Exits non-zero at the first failing step.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PATHS = ["src", "tests", "bench", "scripts"]
#: Tests run in four worker processes (pytest-xdist), a test file per worker at a time: most tests wait on
#: real daemons and sockets rather than the CPU, so four workers keep two cores busy; files stay whole
#: because some share a module-scoped home between their tests.
PARALLEL = ["-n", "4", "--dist", "loadfile"]


def main() -> int:
    """Run every step in order; return the first failing step's status, else 0."""
    python = sys.executable
    steps = [
        ("format", [python, "-m", "ruff", "format", "--check", *PATHS]),
        ("lint", [python, "-m", "ruff", "check", *PATHS]),
        ("types", [python, "-m", "mypy", "--strict", "src"]),
        ("unicode table", [python, "scripts/make_unicode_tables.py", "--check"]),
        ("confusables table", [python, "scripts/make_confusables_table.py", "--check"]),
        ("tests", [python, "-m", "pytest", "-q", "-W", "error", *PARALLEL, *sys.argv[1:]]),
    ]
    for name, command in steps:
        started = time.monotonic()
        print(f"== gate: {name}: {' '.join(command[1:])}", flush=True)
        status = subprocess.call(command, cwd=ROOT)
        print(
            f"== gate: {name}: {'ok' if status == 0 else 'FAILED'} in {time.monotonic() - started:.1f} s",
            flush=True,
        )
        if status != 0:
            return status
    print("== gate: all steps passed", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
