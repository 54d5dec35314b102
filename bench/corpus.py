"""Chat-like text for the benchmarks: LoCoMo sentences recombined with a long-tailed vocabulary, and
session logs of it in the project's format (bench/scale.py, bench/seed.py, bench/peers.py)."""

from __future__ import annotations

import bisect
import datetime as dt
import itertools
import json
import random
import re
from pathlib import Path

from benchkit import write_session

_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_WORD = re.compile(r"[A-Za-z][A-Za-z']*")
_SYLLABLES = [c + v for c in "bcdfghjklmnprstvwz" for v in ("a", "e", "i", "o", "u", "ai", "ou", "ee")]
_STOP = {"the", "and", "that", "with", "this", "have", "from", "what", "your", "about", "just", "really"}


class Corpus:
    """Chat-like text from LoCoMo sentences, recombined (see the module's docstring)."""

    def __init__(self, data: Path, seed: int) -> None:
        self.rng = random.Random(seed)
        samples = json.loads(data.read_text(encoding="utf-8"))
        turns: list[str] = []
        self.names_seen: set[str] = set()
        self.questions: list[str] = []
        for sample in samples:
            conv = sample["conversation"]
            self.names_seen |= {conv["speaker_a"], conv["speaker_b"]}
            for key, value in conv.items():
                if re.fullmatch(r"session_\d+", key):
                    turns += [t["text"] for t in value]
            self.questions += [qa["question"] for qa in sample["qa"]]
        self.sentences = [s for t in turns for s in _SENTENCE.split(t) if s]
        self.lengths = [len(_SENTENCE.split(t)) for t in turns]
        self.names = sorted({self._word(2).capitalize() for _ in range(3000)})
        self.vocabulary = sorted({self._word(self.rng.randint(2, 4)) for _ in range(120_000)})
        self.rng.shuffle(self.vocabulary)
        self.weights = list(itertools.accumulate(1 / (r + 1) ** 1.05 for r in range(len(self.vocabulary))))

    def _word(self, syllables: int) -> str:
        return "".join(self.rng.choice(_SYLLABLES) for _ in range(syllables))

    def _zipf(self) -> str:
        return self.vocabulary[bisect.bisect_left(self.weights, self.rng.random() * self.weights[-1])]

    def turn(self, other: str) -> str:
        """One turn's text."""

        def swap(match: re.Match[str]) -> str:
            word = match.group()
            if word.split("'")[0] in self.names_seen:
                return other if self.rng.random() < 0.7 else self.rng.choice(self.names)
            if len(word) >= 4 and word.lower() not in _STOP and self.rng.random() < 0.2:
                return self._zipf()
            return word

        count = self.lengths[self.rng.randrange(len(self.lengths))]
        return " ".join(_WORD.sub(swap, self.rng.choice(self.sentences)) for _ in range(count))


def write_sessions(corpus: Corpus, sessions: Path, count: int) -> int:
    """Write `count` user records as session logs; returns the number of sessions."""
    written = 0
    session = 0
    start = dt.datetime(2021, 1, 1, tzinfo=dt.UTC)
    while written < count:
        session += 1
        a, b = corpus.rng.sample(corpus.names, 2)
        day = start + dt.timedelta(days=corpus.rng.randrange(5 * 365))
        turns = []
        for i in range(min(corpus.rng.randint(10, 40), count - written)):
            speaker, other = (a, b) if i % 2 == 0 else (b, a)
            turns.append((day + dt.timedelta(seconds=30 * i), speaker, corpus.turn(other)))
        written += len(turns)
        write_session(sessions / f"s{session}", day, turns)
    return session
