"""Every ``refused:<reason>`` code loopd itself answers (a tool call it could not route, brokerd out of
reach, an owner command it does not know), by name; the tools' own codes come from brokerd and memoryd.
"""

from __future__ import annotations

from typing import Final


class Code:
    """loopd's ``refused:<reason>`` codes (``Code.BROKERD_UNREACHABLE``)."""

    ARGUMENTS: Final = "refused:arguments"
    BAD_REPLY: Final = "refused:bad-reply"
    BROKERD_UNREACHABLE: Final = "refused:brokerd-unreachable"
    INVALID_ARGUMENTS: Final = "refused:invalid-arguments"
    JOB_NOT_RUN: Final = "refused:job-not-run"
    JOBS_INVALID: Final = "refused:jobs-invalid"
    UNKNOWN_COMMAND: Final = "refused:unknown-command"
