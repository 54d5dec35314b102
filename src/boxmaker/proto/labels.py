"""Labels: a data class and whether the data is untrusted (DESIGN section 5).

`DataClass` is ordered public < private < secret. A label is (class, untrusted); "stricter" takes the
higher class, and untrusted if either is. A session's label is the stricter of every tool result it has
seen, starting from `private` (M5a section 6, Labels).
"""

from __future__ import annotations

import enum

import msgspec


class DataClass(enum.Enum):
    """How sensitive data is; on the wire "public", "private" or "secret" (DESIGN 10.2)."""

    PUBLIC = "public"
    PRIVATE = "private"
    SECRET = "secret"

    @property
    def rank(self) -> int:
        """0 for public, 1 for private, 2 for secret."""
        return _RANK[self]

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, DataClass):
            return NotImplemented
        return self.rank < other.rank

    def __le__(self, other: object) -> bool:
        if not isinstance(other, DataClass):
            return NotImplemented
        return self.rank <= other.rank

    def __gt__(self, other: object) -> bool:
        if not isinstance(other, DataClass):
            return NotImplemented
        return self.rank > other.rank

    def __ge__(self, other: object) -> bool:
        if not isinstance(other, DataClass):
            return NotImplemented
        return self.rank >= other.rank


_RANK = {DataClass.PUBLIC: 0, DataClass.PRIVATE: 1, DataClass.SECRET: 2}


class Label(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A label as it travels: {"class": DataClass, "untrusted": bool}."""

    data_class: DataClass = msgspec.field(name="class")
    untrusted: bool = False

    def stricter(self, other: Label) -> Label:
        """The higher class of the two, untrusted if either is (DESIGN section 5)."""
        return Label(max(self.data_class, other.data_class), self.untrusted or other.untrusted)


#: The label of a session that has seen nothing yet (M5a section 6: "at least private").
SESSION_START_LABEL = Label(DataClass.PRIVATE, False)


def stricter(a: Label, b: Label) -> Label:
    """Module-level form of `Label.stricter`."""
    return a.stricter(b)
