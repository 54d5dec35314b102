"""Grants: the owner's files in ``{home}/grants/`` and the built-ins (M5a section 8).

A grant file is ``grants/<id>.toml``; its id is the file's stem (``^[a-z0-9][a-z0-9-]{0,63}$``, ids
starting ``builtin-`` are reserved)::

    tool = "http_fetch"            # the tool's name
    mode = "auto"                  # auto | ask (the owner approves each call) | deny
    max_taint = "private"          # allowed only while the session's class <= this
    result_class = "public"        # the class of what the tool returns
    untrusted = true               # whether what it returns is untrusted
    description = "..."            # optional; find_tool shows it
    paths = ["/srv/docs", "/home/me/*.txt"]   # optional: absolute folders or glob patterns
    hosts = ["docs.python.org", "*.example.org", "127.0.0.1:9000"]  # optional: host names (any port),
                                   # host:port (that port only); *.x matches subdomains of x
    patterns = ['^[a-z ]+$']       # optional: every string argument must fully match one of them

Built in, always present and listed apart from the owner's: ``builtin-recall`` and ``builtin-memory``
(M5a section 8, their TOML text exactly as the seed gives it, `grant_sha256` its hash), and our
additions ``builtin-clock`` and ``builtin-find-tool``.

Any problem (unreadable file, bad TOML, unknown key, bad value, reserved or bad id, a grant for recall
or memory) makes the whole set invalid: brokerd then refuses every call (``refused:grants-invalid``).
A missing ``grants/`` folder means no owner grants. `GrantWatcher` re-reads the folder when the names,
sizes or mtimes of its files change.
"""

from __future__ import annotations

import enum
import hashlib
import os
import re
import threading
import tomllib
from dataclasses import dataclass
from pathlib import Path

import msgspec

from boxmaker.brokerd.sentences import MEMORY_GRANT
from boxmaker.proto.errors import ConfigError
from boxmaker.proto.labels import DataClass, Label
from boxmaker.proto.settings import convert_config

GRANT_ID = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}\Z")
TOOL_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,63}\Z")
HOST = re.compile(
    r"^(\*\.)?[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)*\Z"
)
MEMORY_TOOLS = frozenset({"recall", "memory"})
RESERVED_PREFIX = "builtin-"


class Mode(enum.Enum):
    """What a matching grant does with a call."""

    AUTO = "auto"
    ASK = "ask"
    DENY = "deny"


class _GrantFile(msgspec.Struct, forbid_unknown_fields=True):
    tool: str
    mode: Mode
    max_taint: DataClass
    result_class: DataClass
    untrusted: bool
    description: str = ""
    paths: list[str] = msgspec.field(default_factory=list)
    hosts: list[str] = msgspec.field(default_factory=list)
    patterns: list[str] = msgspec.field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Grant:
    """One grant, validated. `sha256` is the hex hash of the file's exact bytes."""

    id: str
    tool: str
    mode: Mode
    max_taint: DataClass
    result_class: DataClass
    untrusted: bool
    sha256: str
    builtin: bool = False
    description: str = ""
    paths: tuple[str, ...] = ()
    hosts: tuple[str, ...] = ()
    patterns: tuple[str, ...] = ()

    @property
    def label(self) -> Label:
        """The label the grant gives what the tool returns."""
        return Label(self.result_class, self.untrusted)

    @property
    def constrained(self) -> bool:
        """True when the grant has any of `paths`, `hosts`, `patterns`."""
        return bool(self.paths or self.hosts or self.patterns)

    def summary(self) -> dict[str, object]:
        """The grant as JSON data (``bxctl grants --json``)."""
        return {
            "id": self.id,
            "tool": self.tool,
            "mode": self.mode.value,
            "max_taint": self.max_taint.value,
            "result_class": self.result_class.value,
            "untrusted": self.untrusted,
            "description": self.description,
            "paths": list(self.paths),
            "hosts": list(self.hosts),
            "patterns": list(self.patterns),
            "grant_sha256": self.sha256,
        }


@dataclass(frozen=True, slots=True)
class Problem:
    """Why a file in ``grants/`` cannot be used: `file` is ``grants/<name>``."""

    file: str
    why: str


class GrantProblem(Exception):
    """Raised by `parse_grant` with the reason a grant text is unusable."""


def _builtin_text(tool: str, mode: str, max_taint: str, result_class: str) -> str:
    return (
        f"# built in: {tool}\n"
        f'tool = "{tool}"\n'
        f'mode = "{mode}"\n'
        f'max_taint = "{max_taint}"\n'
        f'result_class = "{result_class}"\n'
        "untrusted = false\n"
    )


#: The built-in grants' TOML texts, by id; `grant_sha256` is the SHA-256 of each text's UTF-8 bytes.
#: recall and memory are M5a section 8's; clock and find_tool are our additions (docs/brokerd.md).
BUILTIN_TEXTS: dict[str, str] = {
    "builtin-recall": _builtin_text("recall", "auto", "secret", "private"),
    "builtin-memory": _builtin_text("memory", "auto", "secret", "private"),
    "builtin-clock": _builtin_text("clock", "auto", "secret", "public"),
    "builtin-find-tool": _builtin_text("find_tool", "auto", "secret", "public"),
}


def parse_grant(grant_id: str, raw: bytes, builtin: bool = False) -> Grant:
    """Parse and validate one grant's TOML bytes.

    Raises:
        GrantProblem: with the reason (not UTF-8, bad TOML, unknown key, bad value, bad id, a grant
            for recall or memory that is not built in).
    """
    if not GRANT_ID.match(grant_id):
        raise GrantProblem(f"the grant id {grant_id!r} (the file's name) must match {GRANT_ID.pattern}")
    if grant_id.startswith(RESERVED_PREFIX) and not builtin:
        raise GrantProblem(f"grant ids starting {RESERVED_PREFIX!r} are reserved for the built-in grants")
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise GrantProblem("not UTF-8") from None
    except tomllib.TOMLDecodeError as exc:
        raise GrantProblem(f"not valid TOML: {exc}") from None
    try:
        spec = convert_config(data, _GrantFile, "")
    except ConfigError as exc:
        raise GrantProblem(exc.why) from None
    if spec.tool in MEMORY_TOOLS and not builtin:
        raise GrantProblem(MEMORY_GRANT)
    _check_fields(spec)
    return Grant(
        id=grant_id,
        tool=spec.tool,
        mode=spec.mode,
        max_taint=spec.max_taint,
        result_class=spec.result_class,
        untrusted=spec.untrusted,
        sha256=hashlib.sha256(raw).hexdigest(),
        builtin=builtin,
        description=spec.description,
        paths=tuple(os.path.normpath(p) if not _is_glob(p) else p for p in spec.paths),
        hosts=tuple(_host_entry(h) for h in spec.hosts),
        patterns=tuple(spec.patterns),
    )


def _is_glob(path: str) -> bool:
    return any(c in path for c in "*?[")


def _check_fields(spec: _GrantFile) -> None:
    if not TOOL_NAME.match(spec.tool):
        raise GrantProblem(f"tool: {spec.tool!r} is not a tool name ({TOOL_NAME.pattern})")
    if len(spec.description) > 1_000:
        raise GrantProblem("description: longer than 1,000 characters")
    for path in spec.paths:
        if not path.startswith("/") or "\x00" in path:
            raise GrantProblem(f"paths: {path!r} is not an absolute path")
    for host in spec.hosts:
        _check_host(host)
    for pattern in spec.patterns:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise GrantProblem(f"patterns: {pattern!r} is not a regular expression ({exc})") from None


def _check_host(entry: str) -> None:
    """``host``, ``host:port`` or ``*.domain[:port]``; a wildcard over an IP address is refused."""
    name, colon, port = entry.lower().rpartition(":") if ":" in entry else (entry.lower(), "", "")
    name = name.rstrip(".")
    if not HOST.match(name) or (colon and not (port.isdigit() and 1 <= int(port) <= 65535)):
        raise GrantProblem(f"hosts: {entry!r} is not a host name, host:port or *.domain")
    labels = name.removeprefix("*.").split(".")
    if name.startswith("*.") and all(label.isdigit() for label in labels):
        raise GrantProblem(
            f"hosts: {entry!r} is a wildcard over IP addresses; name each address (with :port to limit it)"
        )


def _host_entry(entry: str) -> str:
    name, colon, port = entry.lower().rpartition(":") if ":" in entry else (entry.lower(), "", "")
    return f"{name.rstrip('.')}{colon}{int(port) if colon else ''}"


BUILTINS: tuple[Grant, ...] = tuple(
    parse_grant(grant_id, text.encode("utf-8"), builtin=True) for grant_id, text in BUILTIN_TEXTS.items()
)


@dataclass(frozen=True, slots=True)
class GrantSet:
    """The owner's grants, the built-ins, and every problem found while loading ``grants/``."""

    owner: tuple[Grant, ...] = ()
    builtin: tuple[Grant, ...] = BUILTINS
    problems: tuple[Problem, ...] = ()

    @property
    def valid(self) -> bool:
        """False when any file in ``grants/`` has a problem (the fail-closed state)."""
        return not self.problems

    def for_tool(self, tool: str) -> list[Grant]:
        """Every grant, built-in or the owner's, naming `tool` (built-ins first, then by id)."""
        return [g for g in (*self.builtin, *self.owner) if g.tool == tool]

    def all(self) -> tuple[Grant, ...]:
        """Built-ins, then the owner's grants by id."""
        return (*self.builtin, *self.owner)


def load_grants(folder: Path) -> GrantSet:
    """Read every ``*.toml`` in `folder` (other names are ignored); a missing folder is no grants."""
    try:
        names = sorted(e.name for e in os.scandir(folder) if e.name.endswith(".toml"))
    except FileNotFoundError:
        return GrantSet()
    except OSError as exc:
        return GrantSet(problems=(Problem("grants/", f"cannot list it ({exc.strerror or exc})"),))
    owner: list[Grant] = []
    problems: list[Problem] = []
    for name in names:
        where = f"grants/{name}"
        try:
            raw = (folder / name).read_bytes()
            owner.append(parse_grant(name.removesuffix(".toml"), raw))
        except OSError as exc:
            problems.append(Problem(where, f"cannot read it ({exc.strerror or exc})"))
        except GrantProblem as exc:
            problems.append(Problem(where, str(exc)))
    return GrantSet(owner=tuple(owner), problems=tuple(problems))


Fingerprint = tuple[tuple[str, int, int], ...] | None


def fingerprint(folder: Path) -> Fingerprint:
    """Names, mtimes and sizes of the folder and its entries: cheap to compare on every call."""
    try:
        own = folder.stat()
        entries = [(e.name, *_stat(e)) for e in os.scandir(folder)]
    except FileNotFoundError:
        return None
    except OSError:
        return (("", -1, -1),)
    return (("", own.st_mtime_ns, own.st_size), *sorted(entries))


def _stat(entry: os.DirEntry[str]) -> tuple[int, int]:
    try:
        info = entry.stat()
    except OSError:
        return (-1, -1)
    return (info.st_mtime_ns, info.st_size)


class GrantWatcher:
    """The current `GrantSet` of a folder, re-read whenever its fingerprint changes."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._lock = threading.Lock()
        self._seen: Fingerprint | tuple[str] = ("never",)
        self._current = GrantSet()

    def current(self) -> GrantSet:
        """The grants as the folder holds them now (re-read only when it changed)."""
        with self._lock:
            seen = fingerprint(self.folder)
            if seen != self._seen:
                self._current = load_grants(self.folder)
                self._seen = seen
            return self._current
