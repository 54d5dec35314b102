"""Errors shared by every role.

The tree, and when each is raised::

    BoxmakerError                 base of every error the project raises on purpose
    ├── ProtocolError             a frame or message from a peer is unusable (has code, message, runbook)
    │   ├── FrameTooLarge         a frame header announces more than MAX_FRAME bytes (the body is not read)
    │   ├── FrameTruncated        the peer closed the connection inside a frame
    │   ├── MalformedMessage      the frame is not UTF-8 JSON, or not {"kind": str, "body": object}
    │   ├── UnknownKind           "kind" names no message this side knows
    │   └── InvalidBody           the body does not fit the kind's schema (names the field)
    ├── InvalidId                 a session, edit or pending id does not have its form (DESIGN 10.2)
    ├── ConfigError               a config file is unreadable, not TOML, or has an unknown key or bad value
    ├── HomeError                 the home folder cannot be resolved or created
    │   └── EmptyHome             a daemon's ``--home`` is given but empty (a usage error)
    ├── CannotStart               a daemon cannot start: its config is unusable or its server refused to start
    └── PeerError                 a role answered with an `error` frame, or did not answer (client side)

Every class builds its own sentence from its arguments, so every raise site says the same thing and
tests can assert the exact text (STYLE 5). `code` is the stable, machine-read name (STYLE 6).
"""

from __future__ import annotations


class BoxmakerError(Exception):
    """Base of every error the project raises on purpose."""


class ProtocolError(BoxmakerError):
    """A frame or message from a peer is unusable.

    Attributes:
        code: stable machine-read code sent in the `error` reply.
        message: the fixed sentence.
        runbook: the runbook entry that explains it ("" when none applies).
    """

    code = "protocol"
    runbook = ""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class FrameTooLarge(ProtocolError):
    """Raised when a frame's 4-byte header announces more than MAX_FRAME bytes."""

    code = "frame-too-large"

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"frame of {size:,} bytes is over the limit of {limit:,} bytes")
        self.size = size
        self.limit = limit


class FrameTruncated(ProtocolError):
    """Raised when the peer closes the connection before a whole frame arrived."""

    code = "frame-truncated"

    def __init__(self, got: int, wanted: int) -> None:
        super().__init__(f"connection closed after {got:,} of {wanted:,} bytes of a frame")
        self.got = got
        self.wanted = wanted


class MalformedMessage(ProtocolError):
    """Raised when a frame is not UTF-8 JSON of the form {"kind": string, "body": object}."""

    code = "malformed-message"

    def __init__(self, why: str) -> None:
        super().__init__(f"malformed message: {why}")


class UnknownKind(ProtocolError):
    """Raised when a message's kind is not one this side accepts."""

    code = "unknown-kind"

    def __init__(self, kind: str) -> None:
        super().__init__(f"unknown message kind {kind!r}")
        self.kind = kind


class InvalidBody(ProtocolError):
    """Raised when a body does not fit its kind's schema; the sentence names the field."""

    code = "invalid-body"

    def __init__(self, kind: str, why: str) -> None:
        super().__init__(f"invalid {kind} body: {why}")
        self.kind = kind


class InvalidId(BoxmakerError):
    """Raised when an id does not have the form DESIGN 10.2 gives it."""

    def __init__(self, what: str, value: str, form: str) -> None:
        super().__init__(f"invalid {what} {value!r}: expected {form}")
        self.what = what
        self.value = value


class ConfigError(BoxmakerError):
    """Raised when a config file is unreadable, not TOML, or has an unknown key or a bad value."""

    def __init__(self, path: str, why: str) -> None:
        super().__init__(f"{path}: {why}")
        self.path = path
        self.why = why


class HomeError(BoxmakerError):
    """Raised when the home folder cannot be resolved, created or given its permissions."""


class EmptyHome(HomeError):
    """Raised when a daemon's ``--home`` is given but empty (before its config is read)."""

    def __init__(self) -> None:
        super().__init__("the home folder cannot be empty")


class CannotStart(BoxmakerError):
    """Raised when a daemon cannot start (`boxmaker.proto.daemon.serve`): its config is unusable, or
    its server refused to start. The sentence is the whole line the owner reads, runbook pointer
    included."""


class PeerError(BoxmakerError):
    """Raised by a client when a role answers with an `error` frame or cannot be reached.

    Attributes:
        code: the peer's error code, or "unreachable" when no answer came.
        message: the peer's sentence, or why it could not be reached.
        runbook: the runbook entry the error points to ("" when none).
        sent: False when the request never left (nothing answered the connect), so asking again
            cannot do it twice.
    """

    def __init__(self, code: str, message: str, runbook: str = "", *, sent: bool = True) -> None:
        text = message if not runbook else f"{message} (runbook: {runbook})"
        super().__init__(text)
        self.code = code
        self.message = message
        self.runbook = runbook
        self.sent = sent
