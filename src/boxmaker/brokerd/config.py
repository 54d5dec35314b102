"""brokerd's configuration (DESIGN 10.1; M5a section 8).

::

    [paths]
    home = "/var/lib/boxmaker"    # default: $BOXMAKER_HOME, then DESIGN 10.1's order

    [memory]
    socket = "..."                # memoryd's socket for brokerd; default run/broker-memory/memory.sock

    [sockets]
    loop = "..."                  # default run/loop-broker/broker.sock (loopd's tool calls)
    admin = "..."                 # default run/owner-broker/admin.sock (bxctl)

    [approvals]
    timeout_s = 600               # how long a call of an `ask` grant waits for the owner, in seconds

    [http_fetch]
    max_bytes = 2000000           # body bytes kept; the rest is cut and the output says so
    timeout_s = 20                # the whole call, redirects and body included, in seconds

    [read_file]
    max_bytes = 1000000           # file bytes kept (our addition; docs/brokerd.md)

    [limits]                      # per socket (`proto.settings.SocketLimits`)
    connections = 64              # connections served at once; one more is answered `busy`
    idle_s = 10                   # seconds a connection may take to send its request

Unknown keys are an error naming the key. Relative paths resolve against the config file's folder.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

import msgspec

from boxmaker.proto.home import Layout
from boxmaker.proto.settings import SocketLimits, load_role_config
from boxmaker.proto.wire import Limits

Positive = Annotated[int, msgspec.Meta(ge=1, le=1_000_000_000)]  # at most 1 GB, in bytes
PositiveFloat = Annotated[float, msgspec.Meta(gt=0, le=86_400)]  # at most a day, in seconds


class _Paths(msgspec.Struct, forbid_unknown_fields=True):
    home: str | None = None


class _Memory(msgspec.Struct, forbid_unknown_fields=True):
    socket: str | None = None


class _Sockets(msgspec.Struct, forbid_unknown_fields=True):
    loop: str | None = None
    admin: str | None = None


class _Approvals(msgspec.Struct, forbid_unknown_fields=True):
    timeout_s: PositiveFloat = 600.0


class _HttpFetch(msgspec.Struct, forbid_unknown_fields=True):
    max_bytes: Positive = 2_000_000
    timeout_s: PositiveFloat = 20.0


class _ReadFile(msgspec.Struct, forbid_unknown_fields=True):
    max_bytes: Positive = 1_000_000


class _File(msgspec.Struct, forbid_unknown_fields=True):
    paths: _Paths = msgspec.field(default_factory=_Paths)
    memory: _Memory = msgspec.field(default_factory=_Memory)
    sockets: _Sockets = msgspec.field(default_factory=_Sockets)
    approvals: _Approvals = msgspec.field(default_factory=_Approvals)
    http_fetch: _HttpFetch = msgspec.field(default_factory=_HttpFetch)
    read_file: _ReadFile = msgspec.field(default_factory=_ReadFile)
    limits: SocketLimits = msgspec.field(default_factory=SocketLimits)


@dataclass(frozen=True, slots=True)
class Config:
    """brokerd's settings, resolved: every path absolute, times in seconds, sizes in bytes."""

    home: Path
    memory_socket: Path
    loop_socket: Path
    admin_socket: Path
    approval_timeout_s: float = 600.0
    fetch_max_bytes: int = 2_000_000
    fetch_timeout_s: float = 20.0
    read_max_bytes: int = 1_000_000
    memoryd_timeout_s: float = 30.0
    limits: Limits = field(default_factory=Limits)

    @property
    def layout(self) -> Layout:
        """The home's layout."""
        return Layout(self.home)


def defaults(home: Path) -> Config:
    """The settings with no config file, for `home`."""
    layout = Layout(home)
    return Config(
        home=home,
        memory_socket=layout.memory_broker_socket,
        loop_socket=layout.broker_loop_socket,
        admin_socket=layout.broker_admin_socket,
    )


def load(config_path: Path | None = None, cli_home: str | None = None) -> Config:
    """Read brokerd's config (defaults when `config_path` is None) and resolve it.

    Raises:
        ConfigError: unreadable file, bad TOML, unknown key (named), or a bad value.
    """
    read = load_role_config("brokerd", _File, config_path, cli_home)
    raw, layout = read.tables, read.layout
    return Config(
        home=read.home,
        memory_socket=read.resolve(raw.memory.socket) or layout.memory_broker_socket,
        loop_socket=read.resolve(raw.sockets.loop) or layout.broker_loop_socket,
        admin_socket=read.resolve(raw.sockets.admin) or layout.broker_admin_socket,
        approval_timeout_s=raw.approvals.timeout_s,
        fetch_max_bytes=raw.http_fetch.max_bytes,
        fetch_timeout_s=raw.http_fetch.timeout_s,
        read_max_bytes=raw.read_file.max_bytes,
        limits=raw.limits.sockets,
    )
