"""brokerd's fixed sentences and the codes that go with them (M5a section 8; DESIGN 10.3).

Each refusal the model reads is built here, so every site says the same thing and tests assert the
exact text (STYLE 5). `code` is the stable, machine-read part (STYLE 6).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final


class Code:
    """Every ``refused:<reason>`` code brokerd answers, by name (``Code.DENIED``)."""

    ARGUMENTS: Final = "refused:arguments"
    DENIED: Final = "refused:denied"
    FETCH_FAILED: Final = "refused:fetch-failed"
    GRANTS_INVALID: Final = "refused:grants-invalid"
    INVALID_ARGUMENTS: Final = "refused:invalid-arguments"
    MEMORYD_ERROR: Final = "refused:memoryd-error"
    MEMORYD_UNREACHABLE: Final = "refused:memoryd-unreachable"
    NOT_A_FILE: Final = "refused:not-a-file"
    NOT_FOUND: Final = "refused:not-found"
    TAINT: Final = "refused:taint"
    UNAVAILABLE: Final = "refused:unavailable"
    UNKNOWN_COMMAND: Final = "refused:unknown-command"


@dataclass(frozen=True, slots=True)
class Refusal:
    """A refused call: the stable `code` (``refused:<reason>``) and the sentence the model reads."""

    code: str
    sentence: str


#: The sentence for a grant file that names a memory tool (M5a section 8, fixed).
MEMORY_GRANT = "the policy of recall and memory is built in; remove this grant"

#: The sentence when memoryd does not answer (M5a section 8, fixed).
MEMORYD_UNREACHABLE = (
    "memoryd did not answer; recall and memory are unavailable until it is back "
    "(runbook: memoryd-unreachable)"
)


def grants_invalid(file: str, why: str, more: int) -> Refusal:
    """Every call while ``grants/`` has a problem (the fail-closed state, runbook grants-invalid)."""
    others = f" (and {more:,} more problem{'s' if more != 1 else ''})" if more else ""
    return Refusal(
        Code.GRANTS_INVALID,
        f"every call is refused while the owner's grants are invalid: {file}: {why}{others} "
        "(runbook: grants-invalid)",
    )


def no_grant(tool: str) -> Refusal:
    """No grant names the tool."""
    return Refusal(Code.DENIED, f"no grant allows the tool {tool}; the owner can add one in grants/")


def denied_by(grant: str, tool: str) -> Refusal:
    """A grant with ``mode = "deny"`` matches the call."""
    return Refusal(Code.DENIED, f"the grant {grant} denies the tool {tool}")


def constraint(grant: str, why: str) -> Refusal:
    """The call's arguments are outside a grant's `paths`, `hosts` or `patterns`."""
    return Refusal(Code.DENIED, f"the grant {grant} does not allow this call: {why}")


def taint(grant: str, tool: str, session_class: str, max_taint: str) -> Refusal:
    """The session's class is above the grant's `max_taint`."""
    return Refusal(
        Code.TAINT,
        f"this session has read {session_class} data; the grant {grant} allows {tool} only in sessions "
        f"up to {max_taint}",
    )


def invalid_arguments(tool: str, why: str) -> Refusal:
    """The arguments do not have the tool's shape; `why` names the argument."""
    return Refusal(Code.INVALID_ARGUMENTS, f"invalid arguments for {tool}: {why}")


def owner_denied(tool: str) -> Refusal:
    """The owner answered no to an `ask` grant's question."""
    return Refusal(Code.DENIED, f"the owner denied this call of {tool}")


def owner_silent(timeout_s: float) -> Refusal:
    """Nobody answered an `ask` grant's question in time."""
    return Refusal(Code.DENIED, f"the owner did not answer within {timeout_s:,g} s")


def no_runtime(tool: str) -> Refusal:
    """A grant allows a tool that no runtime here runs."""
    return Refusal(Code.UNAVAILABLE, f"no runtime here runs the tool {tool}")
