"""A mutation run over the core rule modules against their unit tests (issue 13): mutmut (from PyPI,
in a scratch venv this script makes; never a dependency of the project or the gate) changes one small
thing at a time in each module (an operator, a constant, a condition) and runs the tests that cover the
changed function; a mutant no test fails on "survives". The survivors are written to
``docs/mutation.md``, each with its diff and, from ``bench/mutation_explained.toml``, why it is harmless
or which test now kills it; a survivor without an explanation there is listed as unexplained and makes
the script exit 1.

The modules (after the memoryd layout, docs/architecture.md): the write check, edit application, taint
routing (the writer), the recall query builder, supersede (item operations), withdrawal's records and
exclusion, the cron predicate and the compaction trigger. The source and tests are copied into a
temporary folder (beside a link to ``../shared``, which the check's tests read), so the checkout is
never touched. About 20 minutes on two cores; run it under the heavy lock:

    flock /tmp/boxmaker-heavy.lock python3 bench/mutation.py [--max-children 2] [--only GLOB] [--keep]

``--only`` mutates the modules matching a glob (``src/boxmaker/loopd/*``) and leaves docs/mutation.md
alone unless ``--out`` names a file.
"""

from __future__ import annotations

import argparse
import ast
import fnmatch
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MUTMUT = "mutmut==3.8.1"
#: The modules mutated, and the rule each holds.
MODULES = {
    "src/boxmaker/memoryd/check/rules.py": "the write check (DESIGN 10.6)",
    "src/boxmaker/memoryd/files/edits.py": "edit application (M5a section 5, Rules)",
    "src/boxmaker/memoryd/write/writer.py": "taint routing and the write path (M5a section 5)",
    "src/boxmaker/memoryd/index/query.py": "the quoted-terms query builder (M5a section 5)",
    "src/boxmaker/memoryd/write/itemops.py": "supersede by kind and subject (seed 003 section 14.2)",
    "src/boxmaker/memoryd/withdrawal/records.py": "withdrawal records and scopes (seed 003 section 12.2)",
    "src/boxmaker/memoryd/withdrawal/exclusion.py": "withdrawal excluded from every exposure (12.2)",
    "src/boxmaker/loopd/cron.py": "the cron predicate (M5d section 4.2)",
    "src/boxmaker/loopd/trigger.py": "the compaction trigger (M5d section 3.3)",
}
#: The functions mutated in a module when not all of them hold its rule (qualified names); the others are
#: marked ``# pragma: no mutate block`` in the scratch copy only.
SCOPE: dict[str, set[str]] = {
    "src/boxmaker/memoryd/write/writer.py": {"Writer.memory", "Writer.note", "decide"},
    "src/boxmaker/memoryd/write/itemops.py": {
        "supersede",
        "supersede_event",
        "_decide_supersede",
        "_visible",
        "_touchable",
    },
    "src/boxmaker/memoryd/withdrawal/records.py": {
        "Scope.key",
        "normalize",
        "same_scope",
        "scope_problem",
        "Chain.excluded",
        "Chain.controlling",
        "Chain.successor",
        "resolve",
        "_resolve",
        "_ancestry",
        "_reconciled",
        "check",
    },
}
#: Added to the scratch copy's tests/conftest.py: tests that start a real memoryd run the installed,
#: unmutated package in that process, so they can kill no mutant; they are left out of the run.
DESELECT = """

def pytest_collection_modifyitems(config, items):  # bench/mutation.py: no subprocess tests
    spawned = [item for item in items if "daemon" in getattr(item, "fixturenames", ())]
    if spawned:
        config.hook.pytest_deselected(items=spawned)
        items[:] = [item for item in items if item not in spawned]
"""
#: The unit tests the mutants run against (mutmut runs, per mutant, those that cover its function).
TESTS = [
    "tests/memoryd/test_check.py",
    "tests/memoryd/test_bad_inputs.py",
    "tests/memoryd/test_entries.py",
    "tests/memoryd/test_edits.py",
    "tests/memoryd/test_writer.py",
    "tests/memoryd/test_query.py",
    "tests/memoryd/test_items.py",
    "tests/memoryd/test_withdrawal.py",
    "tests/loopd/test_cron.py",
    "tests/loopd/test_epochs.py",
]
EXPLAINED = ROOT / "bench" / "mutation_explained.toml"
STATUS = {
    1: "killed",
    3: "killed",
    0: "survived",
    5: "no tests",
    33: "no tests",
    34: "skipped",
    36: "timeout",
}


@dataclass
class Result:
    """What the run found: mutants by status per module, and each survivor's diff."""

    counts: dict[str, dict[str, int]] = field(default_factory=dict)
    survivors: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0


def prepare(scratch: Path, modules: list[str]) -> Path:
    """A copy of the project in `scratch`/work with the mutmut settings, ``shared`` linked beside it,
    and a venv with mutmut, the project (not editable: subprocess tests import it) and pytest."""
    work = scratch / "work"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".venv", "mutants", ".hypothesis")
    shutil.copytree(ROOT / "src", work / "src", ignore=ignore)
    shutil.copytree(ROOT / "tests", work / "tests", ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, work / name)
    (work / "shared").symlink_to((ROOT.parent / "shared").resolve())  # mutants/tests/../../shared
    with (work / "tests" / "conftest.py").open("a", encoding="utf-8") as handle:
        handle.write(DESELECT)
    for module, keep in SCOPE.items():
        if module in modules:
            confine(work / module, keep)
    settings = {
        "source_paths": ["src"],
        "only_mutate": modules,
        "pytest_add_cli_args_test_selection": TESTS,
        "pytest_add_cli_args": ["-p", "no:cacheprovider", "-p", "no:randomly"],
    }
    lines = ["", "[tool.mutmut]"] + [f"{key} = {json.dumps(value)}" for key, value in settings.items()]
    with (work / "pyproject.toml").open("a", encoding="utf-8") as handle:
        handle.write("\n".join(lines) + "\n")
    venv = scratch / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q"]
    subprocess.run([*pip, MUTMUT, "pytest>=8", "hypothesis>=6.100", str(work)], check=True)
    return work


def confine(path: Path, keep: set[str]) -> None:
    """Mark every function and method of the module at `path` that is not in `keep` (qualified names)
    ``# pragma: no mutate block`` at the end of its ``def`` header, so mutmut leaves it whole."""
    lines = path.read_text(encoding="utf-8").split("\n")
    tree = ast.parse("\n".join(lines))
    found: list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]] = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            found.append((node.name, node))
        elif isinstance(node, ast.ClassDef):
            found += [
                (f"{node.name}.{sub.name}", sub)
                for sub in node.body
                if isinstance(sub, ast.FunctionDef | ast.AsyncFunctionDef)
            ]
    missing = keep - {name for name, _ in found}
    if missing:
        raise SystemExit(f"{path.name} has no {sorted(missing)}: update SCOPE in bench/mutation.py")
    for name, node in found:
        if name in keep:
            continue
        header = next(
            i for i in range(node.body[0].lineno - 2, node.lineno - 2, -1) if lines[i].rstrip().endswith(":")
        )
        lines[header] = lines[header].rstrip() + "  # pragma: no mutate block"
    path.write_text("\n".join(lines), encoding="utf-8")


def run(work: Path, max_children: int, limit_s: float) -> Result:
    """`mutmut run` in `work`, then every mutant's status and each survivor's diff."""
    mutmut = str(work.parent / "venv" / "bin" / "mutmut")
    started = time.monotonic()
    done = subprocess.run(
        [mutmut, "run", "--max-children", str(max_children)], cwd=work, timeout=limit_s, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"mutmut run exited {done.returncode}")
    return collect(work, time.monotonic() - started)


@dataclass(frozen=True)
class Group:
    """Survivors explained together: those whose name matches `mutants` and whose changed lines match
    `diff` (both regular expressions, searched), and why they are harmless."""

    title: str
    mutants: re.Pattern[str]
    diff: re.Pattern[str]
    why: str


def explanations() -> list[Group]:
    """The groups of bench/mutation_explained.toml, in order (the first that matches explains)."""
    data = tomllib.loads(EXPLAINED.read_text(encoding="utf-8")) if EXPLAINED.exists() else {}
    return [
        Group(g["title"], re.compile(g["mutants"]), re.compile(g.get("diff", "")), g["why"].strip())
        for g in data.get("group", [])
    ]


def changed(diff: str) -> str:
    """The removed and added lines of a mutant's diff, trimmed."""
    lines = diff.splitlines()
    kept = [x for x in lines if x[:1] in "+-" and not x.startswith(("+++", "---"))]
    return "\n".join(x[0] + " " + x[1:].strip() for x in kept)


def render(result: Result, modules: list[str], groups: list[Group], note: str = "") -> tuple[str, int]:
    """docs/mutation.md's text, and how many survivors no group explains."""
    total = {k: sum(c.get(k, 0) for c in result.counts.values()) for k in ("killed", "timeout")}
    lines = [
        "# Mutation run",
        "",
        "What the core rule modules' unit tests notice: `bench/mutation.py` runs mutmut over each module",
        "below (only the functions that hold the rule, where a module holds more) against the unit tests",
        "of `TESTS` in that script, and this page is its output (regenerate it under the heavy lock:",
        "`flock /tmp/boxmaker-heavy.lock python3 bench/mutation.py`). Every mutant that was not killed",
        "is listed under the reason it is harmless, from `bench/mutation_explained.toml`; the ones that",
        "mattered were killed by tests added for them (docs/decisions.md, issue 13).",
        "",
        f"Last run: {sum(sum(c.values()) for c in result.counts.values()):,} mutants, {total['killed']:,}"
        f" killed, {total['timeout']:,} timed out (counted as killed), {len(result.survivors):,} not"
        f" killed; {result.seconds / 60:.0f} minutes on two cores.{(' ' + note) if note else ''}",
        "",
        "| module | what it holds | mutants | killed | timeout | not killed |",
        "|---|---|---|---|---|---|",
    ]
    for module in modules:
        counts = result.counts.get(module, {})
        left = sum(v for k, v in counts.items() if k not in ("killed", "timeout"))
        lines.append(
            f"| `{module}` | {MODULES[module]} | {sum(counts.values())} | {counts.get('killed', 0)} | "
            f"{counts.get('timeout', 0)} | {left} |"
        )
    placed: dict[str, list[tuple[str, str, str]]] = {}
    for name, shown in sorted(result.survivors.items()):
        status, _, diff = shown.partition("\n")
        lines_changed = changed(diff)
        group = next((g for g in groups if g.mutants.search(name) and g.diff.search(lines_changed)), None)
        placed.setdefault(group.title if group else "", []).append((name, status, lines_changed))
    lines += ["", "## The mutants that were not killed, and why each is harmless", ""]
    for group in [*groups, Group("", re.compile(""), re.compile(""), "**Unexplained.**")]:
        found = placed.get(group.title, [])
        if not found:
            continue
        lines += [f"### {group.title or 'Unexplained'} ({len(found)})", "", group.why, ""]
        for name, status, lines_changed in found:
            lines += [f"- `{name}` ({status})", "", "  ```diff"]
            lines += [f"  {x}" for x in lines_changed.splitlines()] + ["  ```", ""]
    if not result.survivors:
        lines.append("None.")
    return "\n".join(lines).rstrip("\n") + "\n", len(placed.get("", []))


def collect(work: Path, seconds: float) -> Result:
    """Every mutant's status in a mutmut folder and each survivor's diff."""
    mutmut = str(work.parent / "venv" / "bin" / "mutmut")
    result = Result(seconds=seconds)
    for meta in sorted((work / "mutants" / "src").rglob("*.py.meta")):
        module = str(meta.relative_to(work / "mutants")).removesuffix(".meta")
        codes = json.loads(meta.read_text(encoding="utf-8"))["exit_code_by_key"]
        counts = result.counts.setdefault(module, {})
        for name, code in codes.items():
            status = STATUS.get(code, "suspicious" if code is not None else "not checked")
            counts[status] = counts.get(status, 0) + 1
            if status in ("survived", "no tests", "suspicious", "not checked"):
                shown = subprocess.run(
                    [mutmut, "show", name], cwd=work, capture_output=True, text=True, check=False
                )
                result.survivors[name] = f"{status}\n{shown.stdout.split(chr(10), 1)[-1].strip()}"
    (work / "seconds").write_text(f"{seconds:.0f}\n", encoding="utf-8")
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--max-children", type=int, default=2, help="mutants tested at once (default 2)")
    parser.add_argument("--only", help="mutate only the modules matching this glob")
    parser.add_argument("--out", type=Path, help="where to write the report (default docs/mutation.md)")
    parser.add_argument("--minutes", type=float, default=30, help="stop mutmut after this long (default 30)")
    parser.add_argument("--keep", action="store_true", help="keep the scratch folder (mutmut browse there)")
    parser.add_argument(
        "--rerender", type=Path, help="only write the report again from a kept scratch folder"
    )
    parser.add_argument("--note", default="", help="a sentence added to the report's summary line")
    args = parser.parse_args(argv)
    modules = [m for m in MODULES if args.only is None or fnmatch.fnmatch(m, args.only)]
    if not modules:
        parser.error(f"--only {args.only} matches none of {list(MODULES)}")
    out = args.out or (ROOT / "docs" / "mutation.md" if args.only is None else None)
    if args.rerender is not None:
        work = args.rerender / "work"
        result = collect(work, float((work / "seconds").read_text(encoding="utf-8")))
    else:
        scratch = Path(tempfile.mkdtemp(prefix="bx-mutation-", dir="/tmp"))
        try:
            work = prepare(scratch, modules)
            result = run(work, args.max_children, args.minutes * 60)
        finally:
            if args.keep:
                print(f"scratch folder kept: {scratch}")
            else:
                shutil.rmtree(scratch, ignore_errors=True)
    text, unexplained = render(result, modules, explanations(), args.note)
    if out is not None:
        out.write_text(text, encoding="utf-8")
        print(f"wrote {out}")
    else:
        print(text)
    killed = {m: c.get("killed", 0) for m, c in result.counts.items()}
    print(f"killed by module: {killed}; not killed: {len(result.survivors)}, unexplained: {unexplained}")
    print(f"mutmut took {result.seconds:.0f} s")
    return 1 if unexplained else 0


if __name__ == "__main__":
    sys.exit(main())
