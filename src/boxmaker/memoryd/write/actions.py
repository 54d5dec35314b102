"""The `memory` tool's identity and note actions, validated (M5a sections 5 and 8), and `convert`, the
argument check every tool action uses (`tool/` holds the other actions' shapes).

`parse_memory` turns the model's JSON object into a typed action (``add``, ``replace``, ``remove``,
``consolidate``, ``note``) or a `Refusal` (``refused:arguments``) whose sentence names the field.
Lengths that have their own rule (a note of 1 to 1,000 characters, ``refused:length``) are checked by
the writer.

`note` and `add` also take the protocol's capture fields (seed 003 sections 4, 9 and 12; DESIGN 8):
``kind`` (``state`` or ``knowledge``, default knowledge), ``subject`` (required for state; 1-120
characters), ``confidence`` (``epistemic-status-v1``), ``scope`` (1-120 characters),
``corroborating_refs`` (at most 10 strings of 1-200 characters) and ``inspired_by`` (1-200 characters).
A subject, scope, reference or inspired_by holds no newline, no control character and no `` · ``
(the notes.md header's field separator); `capture_fields` refuses them naming the field, and a state
item without a subject (or with a blank one) with ``refused:subject``. Each of these fields also
passes the whole write check (`rules.check_text`, every rule, ``secret`` included), refused with the
rule's code and a sentence naming the field, and is stored NFC-normalised and stripped.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from typing import Annotated, Any, Literal, TypeAlias

import msgspec

from boxmaker.memoryd.check.rules import check_text, sentence_for
from boxmaker.memoryd.files.edits import Item, Outcome, add, consolidate, remove, replace
from boxmaker.memoryd.files.entries import FileSpec
from boxmaker.memoryd.sentences import Refusal, capture, identity

FileKey: TypeAlias = Literal["memory", "user"]
KindKey: TypeAlias = Literal["state", "knowledge"]
ConfidenceKey: TypeAlias = Literal["confirmed", "observed-once", "inferred", "unknown"]
_Short = Annotated[str, msgspec.Meta(min_length=1, max_length=120)]
_Ref = Annotated[str, msgspec.Meta(min_length=1, max_length=200)]


class _Action(msgspec.Struct, frozen=True, forbid_unknown_fields=True, tag_field="action"):
    """Common base of the five actions, tagged by `action`."""


class Add(_Action, frozen=True, tag="add", omit_defaults=True):
    """``{"action": "add", "file", "text"}`` and the optional capture fields (module docstring)."""

    file: FileKey
    text: str
    kind: KindKey | None = None
    subject: _Short | None = None
    confidence: ConfidenceKey | None = None
    scope: _Short | None = None
    corroborating_refs: Annotated[list[_Ref], msgspec.Meta(max_length=10)] | None = None
    inspired_by: _Ref | None = None


class Replace(_Action, frozen=True, tag="replace"):
    """``{"action": "replace", "file", "old", "text"}``."""

    file: FileKey
    old: str
    text: str


class Remove(_Action, frozen=True, tag="remove"):
    """``{"action": "remove", "file", "old"}``."""

    file: FileKey
    old: str


class Note(_Action, frozen=True, tag="note", omit_defaults=True):
    """``{"action": "note", "text"}`` and the optional capture fields (module docstring)."""

    text: str
    kind: KindKey | None = None
    subject: _Short | None = None
    confidence: ConfidenceKey | None = None
    scope: _Short | None = None
    corroborating_refs: Annotated[list[_Ref], msgspec.Meta(max_length=10)] | None = None
    inspired_by: _Ref | None = None


class RawItem(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One consolidate item as sent."""

    old: str | None = None
    keep: bool | None = None
    text: str | None = None
    move: bool | None = None
    drop: bool | None = None


class Consolidate(_Action, frozen=True, tag="consolidate"):
    """``{"action": "consolidate", "file", "entries": [...]}``."""

    file: FileKey
    entries: Annotated[list[RawItem], msgspec.Meta(max_length=200)]


MemoryAction: TypeAlias = Add | Replace | Remove | Note | Consolidate


_LENGTH = re.compile(r"^Expected `(str|array)` of length ([<>]=) ([0-9]+) - at `\$\.([^`]+)`\Z")


def convert(value: dict[str, Any], kind: Any) -> Any:
    """`value` as the msgspec type `kind` (strict), or ``refused:arguments`` naming the field, or
    ``refused:surrogate`` for a lone surrogate where a name or a fixed word is expected (`surrogates`)."""
    try:
        return msgspec.convert(value, kind, strict=True)
    except msgspec.ValidationError as exc:
        return identity.arguments(_clean(str(exc)))
    except UnicodeEncodeError:
        return surrogates(value) or identity.arguments("the arguments are not valid Unicode")


_SURROGATE = re.compile("[\ud800-\udfff]")


def surrogates(arguments: object, *, values: bool = True) -> Refusal | None:
    """``refused:surrogate`` for a lone surrogate code point (DESIGN 10.6 rule 1) in a name anywhere
    in `arguments`, or (with `values`) in a value, else None. A name is refused with its own sentence;
    a value with the write check's sentence naming its field (``entries[2].old``). A JSON decoder keeps
    lone surrogates (``"\\ud800"``), and a name or fixed word that holds one cannot be compared or
    encoded, so the front door refuses names before any other check (`tool.call`)."""
    found = _surrogate_at(arguments, "", values)
    if found is None:
        return None
    where, is_name = found
    if is_name:
        return identity.surrogate_name(where)
    return identity.field_refused(where or "arguments", "surrogate", sentence_for("surrogate"))


def _surrogate_at(value: object, where: str, values: bool) -> tuple[str, bool] | None:
    """Where the first lone surrogate is: (the path of its value or of the object holding the name,
    True for a name). Iterative, so arguments nested as deep as JSON allows are walked safely."""
    stack: list[tuple[object, str]] = [(value, where)]
    while stack:
        current, path = stack.pop()
        if isinstance(current, str):
            if values and _SURROGATE.search(current):
                return path, False
        elif isinstance(current, dict):
            for key in current:
                if isinstance(key, str) and _SURROGATE.search(key):
                    return path, True
            inner = [(v, f"{path}.{k}" if path else str(k)) for k, v in current.items()]
            stack.extend(reversed(inner))
        elif isinstance(current, list):
            stack.extend(reversed([(v, f"{path}[{n}]") for n, v in enumerate(current)]))
    return None


def _clean(message: str) -> str:
    """A validator's message as a sentence: lengths said in words, the field named in backticks."""
    match = _LENGTH.match(message)
    if match is None:
        return message.replace("`$.", "`")
    what, bound, size, key = match.groups()
    unit = "characters" if what == "str" else "items"
    if bound == ">=":
        return f"`{key}` must not be empty" if size == "1" else f"`{key}` needs at least {size} {unit}"
    return f"`{key}` is too long: at most {int(size):,} {unit}"


def parse_memory(arguments: dict[str, Any]) -> MemoryAction | Refusal:
    """The `memory` tool's arguments as one of the five actions, or ``refused:arguments`` (and
    ``refused:subject`` for a state item without a subject: `capture_fields`)."""
    if "action" not in arguments:
        return identity.arguments("missing required field `action`")
    result: MemoryAction | Refusal = convert(arguments, MemoryAction)
    if isinstance(result, (Note, Add)):
        fields = capture_fields(result)
        if isinstance(fields, Refusal):
            return fields
    return result


class CaptureFields(msgspec.Struct, frozen=True, kw_only=True):
    """The protocol's fields of one capture, checked (seed 003 section 9).

    Attributes:
        kind: ``state`` or ``knowledge`` (knowledge when the call gave none: when in doubt, knowledge).
        subject: set for every state item; scope, confidence, inspired_by: None when not given.
        corroborating_refs: at most 10, each 1-200 characters.
    """

    kind: str = "knowledge"
    subject: str | None = None
    confidence: str | None = None
    scope: str | None = None
    corroborating_refs: tuple[str, ...] = ()
    inspired_by: str | None = None

    def given(self) -> dict[str, Any]:
        """The fields a call set (for the journal line of an identity add), kind always."""
        found: dict[str, Any] = {"kind": self.kind}
        for key in ("subject", "confidence", "scope", "inspired_by"):
            if getattr(self, key) is not None:
                found[key] = getattr(self, key)
        if self.corroborating_refs:
            found["corroborating_refs"] = list(self.corroborating_refs)
        return found


#: What a header field may not hold: a line break or other control character, or the separator.
_FIELD_BAD = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]| \u00b7 ")


def check_field(key: str, value: str) -> str | Refusal:
    """A capture field (or autodream's `assign` topic and triggers, `itemops.assign`) NFC-normalised
    and stripped of surrounding white space, or its refusal: a
    line break, control character or `` · `` (``refused:arguments``), blank (``refused:arguments``),
    or any rule of the write check (``refused:<rule>``, the sentence naming the field)."""
    if _FIELD_BAD.search(value):
        return identity.arguments(f"`{key}` must be one line without control characters or ' \u00b7 '")
    text = unicodedata.normalize("NFC", value).strip()
    if not text:
        return identity.arguments(f"`{key}` must not be blank")
    refusal = check_text(text)
    if refusal is not None:
        return identity.field_refused(key, refusal.rule, refusal.sentence)
    return text


def capture_fields(action: Note | Add) -> CaptureFields | Refusal:
    """The checked capture fields of a `note` or `add`: each of subject, scope, inspired_by and
    corroborating_refs passes `check_field` (every rule of the write check, ``secret`` included), and is
    stored stripped; ``refused:subject`` for state without a subject (a blank one counts as none)."""
    kind = action.kind or "knowledge"
    if kind == "state" and (action.subject is None or not action.subject.strip()):
        return capture.STATE_WITHOUT_SUBJECT
    checked: dict[str, str | None] = {}
    for key in ("subject", "scope", "inspired_by"):
        value = getattr(action, key)
        if value is None:
            checked[key] = None
            continue
        result = check_field(key, value)
        if isinstance(result, Refusal):
            return result
        checked[key] = result
    refs: list[str] = []
    for ref in action.corroborating_refs or ():
        result = check_field("corroborating_refs", ref)
        if isinstance(result, Refusal):
            return result
        refs.append(result)
    return CaptureFields(
        kind=kind,
        subject=checked["subject"],
        confidence=action.confidence,
        scope=checked["scope"],
        corroborating_refs=tuple(refs),
        inspired_by=checked["inspired_by"],
    )


def items(raw: list[RawItem]) -> list[Item] | Refusal:
    """Consolidate items with exactly one of keep/text/move/drop when `old` is given, and only
    `text` otherwise (M5a section 5, Rules)."""
    result: list[Item] = []
    for item in raw:
        ops = [
            op
            for op, value in (
                ("keep", item.keep),
                ("text", item.text),
                ("move", item.move),
                ("drop", item.drop),
            )
            if value is not None
        ]
        if item.old is None:
            if ops != ["text"]:
                return identity.CONSOLIDATE_SHAPE
            result.append(Item("new", None, item.text))
        elif len(ops) != 1 or (ops[0] != "text" and getattr(item, ops[0]) is not True):
            return identity.CONSOLIDATE_SHAPE
        else:
            op: Literal["keep", "text", "move", "drop"] = ops[0]  # type: ignore[assignment]
            result.append(Item(op, item.old, item.text))
    return result


def decide(spec: FileSpec, entries: Sequence[str], action: MemoryAction) -> Outcome | Refusal:
    """The outcome of an identity action on `entries`, or its refusal (pure)."""
    if isinstance(action, Add):
        return add(spec, entries, action.text)
    if isinstance(action, Replace):
        return replace(spec, entries, action.old, action.text)
    if isinstance(action, Remove):
        return remove(spec, entries, action.old)
    if isinstance(action, Consolidate):
        parsed = items(list(action.entries))
        return parsed if isinstance(parsed, Refusal) else consolidate(spec, entries, parsed)
    raise TypeError(f"not an identity action: {action!r}")


def given(action: MemoryAction, fields: CaptureFields | Refusal | None) -> dict[str, Any]:
    """The journal field ``capture`` of a trusted identity `add` that was given capture fields
    (recorded there only: identity entries are not items), else nothing."""
    if not isinstance(action, Add) or all(
        getattr(action, key) is None
        for key in ("kind", "subject", "confidence", "scope", "corroborating_refs", "inspired_by")
    ):
        return {}
    checked = fields if isinstance(fields, CaptureFields) else capture_fields(action)
    return {"capture": checked.given()} if isinstance(checked, CaptureFields) else {}
