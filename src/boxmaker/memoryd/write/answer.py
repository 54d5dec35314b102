"""Who writes and what a write answers (M5a section 5; DESIGN 10.3): the `Caller` (a session and its
label, or the owner), the `Answer` (the sentence the model or owner reads, its stable code and the edit
id), and `guarded`, which turns a memory file that cannot be read into a refusal instead of an error.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from boxmaker.memoryd import sentences
from boxmaker.memoryd.files.store import FileUnreadable
from boxmaker.memoryd.sentences import Refusal
from boxmaker.memoryd.sentences.damage import DISK_FULL
from boxmaker.memoryd.write.origin import Origin, OriginKind
from boxmaker.proto import fsio
from boxmaker.proto.ids import OWNER_SESSION
from boxmaker.proto.labels import DataClass, Label

log = logging.getLogger("boxmaker.memoryd")


@dataclass(frozen=True, slots=True)
class Caller:
    """Who writes: the session, the call id, the session's label, and whether it is the owner
    (set only by the owner's own commands on the admin socket, never from a message body); `kind`
    says what a non-owner caller is (a ``session``, an ``mcp`` client whose identity writes the owner
    trusts when `client_trusted`, an ``import``), for the identity-write rule (`origin`)."""

    session: str
    call: str
    label: Label
    owner: bool = False
    kind: OriginKind = "session"
    client_trusted: bool = False

    @property
    def origin(self) -> Origin:
        """Where this caller's writes come from, with its label (`write.origin.identity_rule`)."""
        if self.owner:
            return Origin("owner", OWNER_SESSION, self.label)
        return Origin(self.kind, self.session, self.label, self.client_trusted)


#: The label of the owner's own writes, and of moved and dropped notes: private, trusted.
PRIVATE = Label(DataClass.PRIVATE, False)

OWNER = Caller(OWNER_SESSION, "", PRIVATE, owner=True)


@dataclass(frozen=True, slots=True)
class Answer:
    """What a write answers: the sentence the model (or owner) reads and the stable code."""

    output: str
    code: str
    edit: str = ""

    @classmethod
    def refused(cls, refusal: Refusal) -> Answer:
        """An answer carrying a refusal."""
        return cls(refusal.sentence, refusal.code)

    @property
    def ok(self) -> bool:
        """True unless refused."""
        return not self.code.startswith("refused:")


def guarded(apply: Callable[[], Answer]) -> Answer:
    """Run a write, turning a memory file that cannot be read into a refusal the model can read
    (``refused:unavailable``, "…; nothing was written") instead of an error, and a full disk into
    ``refused:disk-full`` (the journal has undone the commit: nothing was written)."""
    try:
        return apply()
    except FileUnreadable as exc:
        log.error("memory-unavailable: %s", exc)
        return Answer.refused(sentences.unavailable(str(exc)))
    except OSError as exc:
        if not fsio.disk_full(exc):
            raise
        log.error("disk-full: a write was refused, nothing was written: %s", exc)
        return Answer.refused(DISK_FULL)
