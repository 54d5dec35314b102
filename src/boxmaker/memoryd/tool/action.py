"""One `memory` action as the tool's table holds it (`tool.ACTIONS`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from boxmaker.memoryd.memory import Memory
from boxmaker.memoryd.tool.call import Call
from boxmaker.proto.messages import ToolResponse


@dataclass(frozen=True, slots=True)
class Action:
    """A `memory` action: its name, its parse and its apply, side by side in its handler module.

    Attributes:
        name: the ``action`` value.
        parse: the call's arguments checked (a typed value), or the refusal the model reads; it may
            also refuse by the session's state before looking at the arguments (``forget``).
        apply: runs the parsed action against memoryd's collaborators; the reply.
        maintenance: offered only to a running maintenance job (autodream; `maintenance.gate`).
        barred_in_maintenance: refused to a maintenance run (identity writes and ``forget``).
    """

    name: str
    parse: Callable[[Call], Any]
    apply: Callable[[Memory, Call, Any], ToolResponse]
    maintenance: bool = False
    barred_in_maintenance: bool = False
