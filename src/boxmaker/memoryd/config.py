"""memoryd's configuration (M5a section 11; DESIGN 10.1).

::

    [paths]
    home = "/var/lib/boxmaker"    # default: $BOXMAKER_HOME, then DESIGN 10.1's order

    [memory]
    soul_starter = "soul.md"      # next to the config file; the packaged starter when absent
    review = false                # true: writes to memory.md and user.md wait for the owner

    [index]
    max_class = "private"         # records above this class are not indexed

    [archive]
    enabled = true                # memoryd's own daily archive timer (seed 003 section 13)

    [dream]
    stage = false                 # true: autodream's maintenance actions wait in memory/dream/ for the
                                  # owner (bxctl memory dream show/apply/discard) instead of applying

    [limits]                      # per socket (`proto.settings.SocketLimits`)
    connections = 64              # connections served at once; one more is answered `busy`
    idle_s = 10                   # seconds a connection may take to send its request

    [sockets]                     # defaults: run/loop-memory/memory.sock, run/broker-memory/memory.sock,
    loop = "..."                  #           run/owner-memory/admin.sock under the home
    broker = "..."
    admin = "..."

Unknown keys are an error naming the key. Relative paths resolve against the config file's folder. A
starter named by default falls back to the packaged one when absent; a path the owner configured and
that is missing is a start-up error.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from boxmaker.proto.home import Layout
from boxmaker.proto.labels import DataClass
from boxmaker.proto.settings import SocketLimits, load_role_config
from boxmaker.proto.wire import Limits


class _Paths(msgspec.Struct, forbid_unknown_fields=True):
    home: str | None = None


class _Memory(msgspec.Struct, forbid_unknown_fields=True):
    soul_starter: str | None = None
    review: bool = False


class _Index(msgspec.Struct, forbid_unknown_fields=True):
    max_class: DataClass = DataClass.PRIVATE


class _Archive(msgspec.Struct, forbid_unknown_fields=True):
    enabled: bool = True


class _Dream(msgspec.Struct, forbid_unknown_fields=True):
    stage: bool = False


class _Sockets(msgspec.Struct, forbid_unknown_fields=True):
    loop: str | None = None
    broker: str | None = None
    admin: str | None = None


class _File(msgspec.Struct, forbid_unknown_fields=True):
    paths: _Paths = msgspec.field(default_factory=_Paths)
    memory: _Memory = msgspec.field(default_factory=_Memory)
    index: _Index = msgspec.field(default_factory=_Index)
    sockets: _Sockets = msgspec.field(default_factory=_Sockets)
    archive: _Archive = msgspec.field(default_factory=_Archive)
    dream: _Dream = msgspec.field(default_factory=_Dream)
    limits: SocketLimits = msgspec.field(default_factory=SocketLimits)


@dataclass(frozen=True, slots=True)
class Config:
    """memoryd's settings, resolved: every path absolute."""

    home: Path
    soul_starter: Path
    review: bool
    max_class: DataClass
    loop_socket: Path
    broker_socket: Path
    admin_socket: Path
    archive: bool = True
    dream_stage: bool = False
    limits: Limits = field(default_factory=Limits)

    @property
    def layout(self) -> Layout:
        """The home's layout."""
        return Layout(self.home)


def load(config_path: Path | None = None, cli_home: str | None = None) -> Config:
    """Read memoryd's config (defaults when `config_path` is None) and resolve it.

    Raises:
        ConfigError: unreadable file, bad TOML, unknown key, bad value, or a configured soul starter
            that does not exist.
    """
    read = load_role_config("memoryd", _File, config_path, cli_home)
    raw, layout = read.tables, read.layout
    return Config(
        home=read.home,
        soul_starter=read.starter(raw.memory.soul_starter, "soul.md", "[memory] soul_starter"),
        review=raw.memory.review,
        max_class=raw.index.max_class,
        loop_socket=read.resolve(raw.sockets.loop) or layout.memory_loop_socket,
        broker_socket=read.resolve(raw.sockets.broker) or layout.memory_broker_socket,
        admin_socket=read.resolve(raw.sockets.admin) or layout.memory_admin_socket,
        archive=raw.archive.enabled,
        dream_stage=raw.dream.stage,
        limits=raw.limits.sockets,
    )
