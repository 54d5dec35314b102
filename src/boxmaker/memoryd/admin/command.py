"""One owner command as the admin table holds it (`admin.COMMANDS`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from boxmaker.memoryd.memory import Memory
from boxmaker.proto.messages import MemoryAdmin, MemoryAdminReply


@dataclass(frozen=True, slots=True)
class Command:
    """An owner command: its name, what it runs, and the arguments it takes.

    Attributes:
        name: the ``command`` value.
        run: answers the request (the reply; `InvalidBody` for a malformed argument).
        args: the keys of ``args`` it takes (any other is refused, naming it).
        takes_arg: whether it takes ``arg`` (one that does not is refused a non-empty one).
    """

    name: str
    run: Callable[[Memory, MemoryAdmin], MemoryAdminReply]
    args: frozenset[str] = field(default_factory=frozenset)
    takes_arg: bool = True
