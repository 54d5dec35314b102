"""The identity-write rule: who may change identity, decided in one place (issue 15 item 1;
docs/decisions.md "The identity-write rule").

Identity (memory.md, user.md; conventions.md only through the owner's accept of a proposal) is
written only by the owner, or by an origin whose label is trusted and at most ``private``. Every
write arrives with an `Origin`:

| origin | `kind` | applies its own identity write when |
|---|---|---|
| the owner's command (``bxctl memory add``, an accept, an undo) | ``owner`` | always |
| a session (brokerd's ``memory_call`` label) | ``session`` | its label is trusted and at most private |
| an MCP client (the trust the owner gave it) | ``mcp`` | as a session, and the owner trusts the client |
| an import | ``import`` | never |

A write the rule holds back is never applied by its origin: an ``add`` is kept as a note carrying
the origin's label (`Writer.note`) and staged in pending.jsonl with that label, for the owner to
accept or reject; ``replace``, ``remove`` and ``consolidate`` are refused (``refused:tainted`` for an
untrusted origin, as the seed says; ``refused:class`` for a trusted one above private). The owner's
accept is an owner edit: it shows the origin's label, needs ``--yes`` when the label is untrusted or
above private (`needs_confirmation`), runs the write check, and is journalled as the owner's with
the origin under ``origin`` and the edit's class under ``class`` (DESIGN 10.4, an added field).

Labels only get stricter: nothing here lowers a label; the owner's accept is the one declassification,
and it is journalled.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from boxmaker.memoryd.sentences import Refusal, identity
from boxmaker.proto.labels import DataClass, Label

OriginKind = Literal["owner", "session", "mcp", "import"]

#: Why the rule held a write back (`Verdict.reason`): the origin read untrusted content; its class is
#: above private; the owner has not given the client enough trust; it is an import.
Reason = Literal["", "tainted", "class", "client", "import"]


@dataclass(frozen=True, slots=True)
class Origin:
    """Where a write comes from: its kind, its name (the session id, the MCP client, the import's
    source; ``owner``), its label, and for an MCP client whether the owner trusts it to write identity."""

    kind: OriginKind
    name: str
    label: Label
    client_trusted: bool = False

    def record(self) -> dict[str, Any]:
        """The origin as journal and pending.jsonl store it: ``{"kind", "name", "class", "untrusted"}``."""
        return {
            "kind": self.kind,
            "name": self.name,
            "class": self.label.data_class.value,
            "untrusted": self.label.untrusted,
        }

    @property
    def described(self) -> str:
        """``session chat-x (secret)``, ``session chat-y (private, untrusted)``: what the owner reads."""
        tags = self.label.data_class.value + (", untrusted" if self.label.untrusted else "")
        return f"{self.kind} {self.name} ({tags})"


def origin_of(record: object) -> Origin | None:
    """An `Origin` read back from its `Origin.record` (None when it is not one)."""
    if not isinstance(record, dict):
        return None
    kind, name, untrusted = record.get("kind"), record.get("name"), record.get("untrusted")
    if kind not in ("owner", "session", "mcp", "import") or not isinstance(name, str):
        return None
    try:
        data_class = DataClass(record.get("class"))
    except ValueError:
        return None
    return Origin(kind, name, Label(data_class, untrusted is True))


@dataclass(frozen=True, slots=True)
class Verdict:
    """What the rule decided for one origin: whether its identity write applies, and if not, why."""

    applies: bool
    reason: Reason = ""

    def refusal(self, file: str, origin: Origin) -> Refusal:
        """The refusal of a held-back ``replace``, ``remove`` or ``consolidate`` of `file`."""
        if self.reason == "tainted":
            return identity.tainted(file)
        if self.reason == "class":
            return identity.above_private(file, origin.label.data_class.value)
        return identity.held_back(file, origin.described)


def identity_rule(origin: Origin) -> Verdict:
    """The identity-write rule for `origin` (module docstring); pure."""
    if origin.kind == "owner":
        return Verdict(True)
    if origin.kind == "import":
        return Verdict(False, "import")
    if origin.label.untrusted:
        return Verdict(False, "tainted")
    if origin.label.data_class > DataClass.PRIVATE:
        return Verdict(False, "class")
    if origin.kind == "mcp" and not origin.client_trusted:
        return Verdict(False, "client")
    return Verdict(True)


def needs_confirmation(label: Label) -> bool:
    """Whether the owner's accept of a change carrying `label` needs ``--yes``: untrusted, or above
    private (its text would reach every session's prompt at private)."""
    return label.untrusted or label.data_class > DataClass.PRIVATE
