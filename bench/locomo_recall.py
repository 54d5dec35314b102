"""Recall quality and latency on LoCoMo-format conversations, through memoryd's own code (DESIGN 10.7).

Usage::

    python bench/locomo_recall.py --data ../shared/data/locomo-dev.json [--distractors N] [--json]

For each conversation, in its own temporary home (one agent's memory each): every LoCoMo session
becomes a session log in the project's format (``sessions/locomo-s<N>/0.jsonl``: a ``session_start``,
then one ``user`` record per turn with the speaker's name, the time from the session's date, and the
caption of an image the speaker shared appended as ``[image: <caption>]``). memoryd's indexer reads the
logs; every question goes through memoryd's recall layer (`Recaller.recall`, top 10), whose hits are
mapped back to turns. Never indexed or read: ``observation``, ``session_summary``, ``event_summary``,
the ``qa`` answers.

Metrics (``../shared/data/README.md``), overall, for categories 1-4, and per category: any@k, all@k and
frac@k for k = 1, 5, 10, mrr at 10, and query latency p50/p99 in milliseconds. Evidence ids are
normalised (``D8:6; D9:17`` split, ``D:11:26`` -> ``D11:26``, ``D30:05`` -> ``D30:5``); ids naming no turn
are dropped, and a question left with none is counted in ``n_dropped``.

With ``--distractors N``, each conversation's home also holds N records of other chat (`corpus`: the
scale benchmark's text, made from the same conversations' sentences recombined, names replaced and one
content word in five made up), indexed with it: the same questions, asked inside a large memory.

With ``--json``, stdout holds only one JSON object: ``{"overall", "overall_1_4", "by_category",
"n_questions", "n_dropped"}``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import sys
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchkit import open_home, percentiles, write_session
from boxmaker.memoryd.index.recall import RecallResult
from corpus import Corpus, write_sessions

KS = (1, 5, 10)
_EVIDENCE = re.compile(r"D:?(\d+):0*(\d+)")
_FALLBACK_DAY = dt.datetime(2023, 1, 1, tzinfo=dt.UTC)


@dataclass
class Question:
    """One question with its normalised evidence and category."""

    text: str
    evidence: set[str]
    category: int


@dataclass
class Outcome:
    """What recall returned for one question: ranked turn ids and the time it took."""

    question: Question
    ranked: list[str]
    ms: float


@dataclass
class Conversation:
    """One LoCoMo conversation as sessions of (dia_id, speaker, text, caption) turns."""

    sample_id: str
    sessions: list[tuple[int, dt.datetime, list[dict[str, Any]]]]
    questions: list[Question] = field(default_factory=list)
    dropped: int = 0


def parse_date(text: str) -> dt.datetime | None:
    """LoCoMo's ``1:56 pm on 8 May, 2023`` as UTC, or None."""
    try:
        return dt.datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=dt.UTC)
    except ValueError:
        return None


def evidence_ids(raw: Iterable[str]) -> set[str]:
    """Normalised evidence ids (``D<session>:<turn>``) from LoCoMo's sometimes malformed strings."""
    found = set()
    for item in raw:
        for match in _EVIDENCE.finditer(str(item)):
            found.add(f"D{int(match.group(1))}:{int(match.group(2))}")
    return found


def load(path: Path) -> list[Conversation]:
    """Read a LoCoMo-format file: sessions in order and questions with valid evidence."""
    conversations = []
    for sample in json.loads(path.read_text(encoding="utf-8")):
        conv = sample["conversation"]
        numbers = sorted(int(k.split("_")[1]) for k in conv if re.fullmatch(r"session_\d+", k))
        sessions = []
        for n in numbers:
            when = parse_date(conv.get(f"session_{n}_date_time", "")) or _FALLBACK_DAY + dt.timedelta(days=n)
            sessions.append((n, when, conv[f"session_{n}"]))
        item = Conversation(sample["sample_id"], sessions)
        turns = {t["dia_id"] for _, _, session in sessions for t in session}
        for qa in sample["qa"]:
            evidence = evidence_ids(qa.get("evidence", [])) & turns
            if evidence:
                item.questions.append(Question(qa["question"], evidence, int(qa["category"])))
            else:
                item.dropped += 1
        conversations.append(item)
    return conversations


def write_logs(conv: Conversation, sessions_dir: Path) -> dict[str, str]:
    """Write one session log per LoCoMo session; return the map from source key to dia_id."""
    keys: dict[str, str] = {}
    for n, when, turns in conv.sessions:
        session = f"locomo-s{n}"
        rows = []
        for i, turn in enumerate(turns, start=1):
            text = turn.get("text", "")
            if turn.get("blip_caption"):
                text = f"{text} [image: {turn['blip_caption']}]"
            rows.append((when + dt.timedelta(seconds=i), turn["speaker"], text))
            keys[f"session/{session}/0/{i}"] = turn["dia_id"]
        write_session(sessions_dir / session, when, rows)
    return keys


def run_conversation(conv: Conversation, distractors: tuple[Corpus, int] | None = None) -> list[Outcome]:
    """Index one conversation (with `distractors`: that many records of the corpus' chat beside it) in
    a temporary home and ask every question through recall."""
    with tempfile.TemporaryDirectory(prefix="bx-locomo-") as tmp:
        home = Path(tmp)
        keys = write_logs(conv, home / "sessions")
        if distractors is not None:
            write_sessions(distractors[0], home / "sessions", distractors[1])
        index, recaller = open_home(home)
        index.catch_up_all()
        outcomes = []
        for question in conv.questions:
            started = time.perf_counter()
            result = recaller.recall(question.text[:500], 10, session="bench", bench=True)
            elapsed = (time.perf_counter() - started) * 1000
            hits = result.hits if isinstance(result, RecallResult) else ()
            outcomes.append(Outcome(question, [keys.get(h.key, "") for h in hits], elapsed))
        index.close()
    return outcomes


def metrics(outcomes: list[Outcome]) -> dict[str, float | int]:
    """any@k, all@k, frac@k (k = 1, 5, 10), mrr at 10, p50/p99 latency, n."""
    result: dict[str, float | int] = {}
    n = len(outcomes)
    for k in KS:
        found = [len(o.question.evidence & set(o.ranked[:k])) for o in outcomes]
        sizes = [len(o.question.evidence) for o in outcomes]
        result[f"any@{k}"] = _mean([f > 0 for f in found])
        result[f"all@{k}"] = _mean([f == s for f, s in zip(found, sizes, strict=True)])
        result[f"frac@{k}"] = _mean([f / s for f, s in zip(found, sizes, strict=True)])
    ranks = [
        next((i for i, d in enumerate(o.ranked[:10], 1) if d in o.question.evidence), 0) for o in outcomes
    ]
    result["mrr"] = _mean([1 / r if r else 0.0 for r in ranks])
    p50, p99 = percentiles([o.ms for o in outcomes])
    result["p50_ms"], result["p99_ms"] = round(p50, 3), round(p99, 3)
    result["n"] = n
    return result


def _mean(values: list[float] | list[bool]) -> float:
    return round(sum(values) / len(values), 4) if values else 0.0


def report(outcomes: list[Outcome], questions: int, dropped: int) -> dict[str, Any]:
    """The DESIGN 10.7 JSON object."""
    return {
        "overall": metrics(outcomes),
        "overall_1_4": metrics([o for o in outcomes if o.question.category <= 4]),
        "by_category": {
            str(c): metrics([o for o in outcomes if o.question.category == c]) for c in range(1, 6)
        },
        "n_questions": questions,
        "n_dropped": dropped,
    }


def print_table(result: dict[str, Any]) -> None:
    """A table for people (rich)."""
    from rich.console import Console
    from rich.table import Table

    columns = ["any@1", "any@5", "any@10", "all@5", "frac@5", "frac@10", "mrr", "p50_ms", "p99_ms", "n"]
    table = Table(title=f"LoCoMo recall: {result['n_questions']} questions, {result['n_dropped']} dropped")
    table.add_column("group")
    for column in columns:
        table.add_column(column, justify="right")
    rows = [("overall", result["overall"]), ("categories 1-4", result["overall_1_4"])]
    rows += [(f"category {c}", m) for c, m in result["by_category"].items()]
    for name, m in rows:
        table.add_row(name, *[f"{m[c]:.3f}" if isinstance(m[c], float) else str(m[c]) for c in columns])
    Console(highlight=False, width=150).print(table)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; print the table, or the JSON object with --json."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True, help="a LoCoMo-format JSON file")
    parser.add_argument("--json", action="store_true", help="print only the JSON object")
    parser.add_argument(
        "--distractors", type=int, default=0, help="records of other chat indexed beside each conversation"
    )
    args = parser.parse_args(argv)
    if not args.data.is_file():
        parser.error(f"{args.data} does not exist")
    if args.distractors < 0:
        parser.error(f"--distractors must be 0 or more, not {args.distractors}")
    try:
        conversations = load(args.data)
    except (ValueError, KeyError, TypeError, AttributeError, IndexError) as exc:
        parser.error(f"{args.data} is not a LoCoMo-format file ({type(exc).__name__}: {exc})")
    if not any(conv.questions for conv in conversations):
        parser.error(f"{args.data} holds no conversation with a question to ask")
    outcomes: list[Outcome] = []
    extra = (Corpus(args.data, 1), args.distractors) if args.distractors else None
    for conv in conversations:
        outcomes += run_conversation(conv, extra)
        if not args.json:
            print(f"{conv.sample_id}: {len(conv.questions)} questions", file=sys.stderr)
    dropped = sum(c.dropped for c in conversations)
    result = report(outcomes, len(outcomes) + dropped, dropped)
    if args.json:
        print(json.dumps(result))
    else:
        print_table(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
