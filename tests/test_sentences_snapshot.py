"""Every fixed sentence and `refused:<reason>` code, pinned byte for byte (DESIGN 10.3, 10.6; STYLE 5).

The snapshot (`sentences.snapshot.json` beside this file) was taken once, before memoryd's sentences were
split into area modules; any later move of a sentence must reproduce it exactly. Each public factory of
every sentence module is called twice with synthetic arguments made from its annotations (a singular
and a plural set, so plural forms are pinned too), each constant is read as it is, every content rule of
the write check gives its sentence, and every ``"refused:<reason>"`` string literal of ``src/`` is listed.

Regenerate (only when a sentence changes on purpose, with its line in docs/decisions.md):
``.venv/bin/python tests/test_sentences_snapshot.py --write``.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import pkgutil
import re
import sys
import typing
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SNAPSHOT = Path(__file__).with_name("sentences.snapshot.json")
#: The packages or modules that hold the fixed sentences of each role.
SENTENCE_HOMES = ("boxmaker.memoryd.sentences", "boxmaker.brokerd.sentences", "boxmaker.mcpserver.sentences")
_CODE = re.compile(r"^refused:[a-z][a-z0-9-]*\Z")


def _modules(name: str) -> list[ModuleType]:
    top = importlib.import_module(name)
    found = [top]
    if hasattr(top, "__path__"):
        for info in pkgutil.walk_packages(top.__path__, f"{name}."):
            found.append(importlib.import_module(info.name))
    return found


def _assigned(module: ModuleType) -> set[str]:
    """The names a module itself defines at its top level (not the ones it imports)."""
    tree = ast.parse(inspect.getsource(module))
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def _sample(annotation: Any, param: str, plural: bool) -> Any:
    """A value of the annotated type: strings name their parameter, numbers and lists differ by set."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        chosen = [a for a in args if a is not type(None)]
        return _sample(chosen[0], param, plural)
    if annotation is str:
        return f"<{param}>"
    if annotation is bool:
        return plural
    if annotation is int:
        return 2_345 if plural else 1
    if annotation is float:
        return 2.5 if plural else 1.0
    if origin is tuple and args and args[-1] is not Ellipsis:
        return tuple(_sample(a, f"{param}{n}", plural) for n, a in enumerate(args))
    if origin in (list, tuple, set, frozenset) or (
        origin is not None and getattr(origin, "__name__", "") in ("Sequence", "Iterable", "Collection")
    ):
        inner = args[0] if args else str
        count = 3 if plural else 1
        values = [_sample(inner, f"{param}{n}", plural) for n in range(count)]
        return tuple(values) if origin is tuple else values
    raise TypeError(f"no sample for {param}: {annotation!r}")


def _entry(value: Any) -> dict[str, str] | str | None:
    code = getattr(value, "code", None)
    sentence = getattr(value, "sentence", None)
    if isinstance(code, str) and isinstance(sentence, str):
        return {"code": code, "sentence": sentence}
    if isinstance(value, str):
        return value
    return None


def sentences() -> dict[str, Any]:
    """Every factory's outputs and every constant of the sentence homes, keyed by role and name."""
    found: dict[str, Any] = {}
    for home in SENTENCE_HOMES:
        role = home.split(".")[1]
        for module in _modules(home):
            own = _assigned(module)
            for name, value in sorted(vars(module).items()):
                if name.startswith("_") or name not in own:
                    continue
                key = f"{role}:{name}"
                if inspect.isfunction(value):
                    hints = typing.get_type_hints(value)
                    params = [p for p in inspect.signature(value).parameters.values() if p.default is p.empty]
                    calls = []
                    for plural in (False, True):
                        kwargs = {p.name: _sample(hints[p.name], p.name, plural) for p in params}
                        calls.append(_entry(value(**kwargs)))
                    assert key not in found, f"{key} is defined twice"
                    found[key] = calls
                elif (entry := _entry(value)) is not None and not inspect.isclass(value):
                    if isinstance(entry, str) and (not name.isupper() or _CODE.match(entry)):
                        continue  # plain strings only as named constants; codes are pinned by codes()
                    assert key not in found, f"{key} is defined twice"
                    found[key] = entry
    return found


def check_sentences() -> dict[str, str]:
    """The write check's fixed sentence of every rule and refinement (DESIGN 10.6; ``secret`` and the
    rules of issue 15 included)."""
    from boxmaker.memoryd.check.rules import sentence_for, sentence_keys

    return {rule: sentence_for(rule) for rule in sentence_keys()}


def codes() -> list[str]:
    """Every ``refused:<reason>`` literal in ``src/`` (the set, not the places)."""
    found: set[str] = set()
    for path in (ROOT / "src").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and _CODE.match(node.value):
                found.add(node.value)
    return sorted(found)


def current() -> dict[str, Any]:
    return {"sentences": sentences(), "check": check_sentences(), "codes": codes()}


def test_every_fixed_sentence_and_code_is_as_snapshotted() -> None:
    expected = json.loads(SNAPSHOT.read_text(encoding="utf-8"))
    now = current()
    for part in ("sentences", "check"):
        missing = sorted(set(expected[part]) - set(now[part]))
        added = sorted(set(now[part]) - set(expected[part]))
        assert not missing, f"{part}: gone since the snapshot: {missing}"
        assert not added, f"{part}: new since the snapshot (add them with --write): {added}"
        for key, value in expected[part].items():
            assert now[part][key] == value, key
    assert now["codes"] == expected["codes"]


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: test_sentences_snapshot.py --write")
    SNAPSHOT.write_text(json.dumps(current(), indent=1, ensure_ascii=True, sort_keys=True) + "\n")
    print(f"wrote {SNAPSHOT}")
