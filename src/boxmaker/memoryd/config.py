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

    [mcp.clients.claude-code]     # one table per MCP client name (issue 17); a client not named here
    trust = "untrusted"           # is untrusted. "untrusted": every session read untrusted content;
                                  # "declared": trusted unless the client declares taint, identity
                                  # writes wait for the owner; "clean": the owner vouches for it, so
                                  # its identity writes apply as a clean session's

    [sockets]                     # defaults: run/loop-memory/memory.sock, run/broker-memory/memory.sock,
    loop = "..."                  #           run/owner-memory/admin.sock, run/mcp-memory/mcp.sock
    broker = "..."                #           under the home
    admin = "..."
    mcp = "..."

Unknown keys are an error naming the key. Relative paths resolve against the config file's folder. A
starter named by default falls back to the packaged one when absent; a path the owner configured and
that is missing is a start-up error.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import msgspec

from boxmaker.proto.errors import ConfigError
from boxmaker.proto.home import Layout
from boxmaker.proto.ids import is_mcp_client
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


#: How far the owner trusts an MCP client (issue 17; docs/configuration.md).
Trust = Literal["untrusted", "declared", "clean"]


class _McpClient(msgspec.Struct, forbid_unknown_fields=True):
    trust: Trust = "untrusted"


class _Mcp(msgspec.Struct, forbid_unknown_fields=True):
    clients: dict[str, _McpClient] = msgspec.field(default_factory=dict)


class _Sockets(msgspec.Struct, forbid_unknown_fields=True):
    loop: str | None = None
    broker: str | None = None
    admin: str | None = None
    mcp: str | None = None


class _File(msgspec.Struct, forbid_unknown_fields=True):
    paths: _Paths = msgspec.field(default_factory=_Paths)
    memory: _Memory = msgspec.field(default_factory=_Memory)
    index: _Index = msgspec.field(default_factory=_Index)
    sockets: _Sockets = msgspec.field(default_factory=_Sockets)
    archive: _Archive = msgspec.field(default_factory=_Archive)
    dream: _Dream = msgspec.field(default_factory=_Dream)
    mcp: _Mcp = msgspec.field(default_factory=_Mcp)
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
    #: memoryd's socket for the MCP servers (None: the layout's run/mcp-memory/mcp.sock).
    mcp_socket_path: Path | None = None
    #: The owner's trust in each named MCP client (`Trust`); a client not named is "untrusted".
    mcp_trust: dict[str, Trust] = field(default_factory=dict)

    @property
    def mcp_socket(self) -> Path:
        """memoryd's socket for ``boxmaker-mcp`` (issue 17)."""
        return self.mcp_socket_path or self.layout.memory_mcp_socket

    def trust_of(self, client: str) -> Trust:
        """The owner's trust in the MCP client `client` ("untrusted" when the config does not name it)."""
        return self.mcp_trust.get(client, "untrusted")

    @property
    def layout(self) -> Layout:
        """The home's layout."""
        return Layout(self.home)


def load(config_path: Path | None = None, cli_home: str | None = None) -> Config:
    """Read memoryd's config (defaults when `config_path` is None) and resolve it.

    Raises:
        ConfigError: unreadable file, bad TOML, unknown key, bad value, a configured soul starter
            that does not exist, or an ``[mcp.clients.<name>]`` whose name is not a client's name.
    """
    read = load_role_config("memoryd", _File, config_path, cli_home)
    raw, layout = read.tables, read.layout
    for name in raw.mcp.clients:
        if not is_mcp_client(name):
            raise ConfigError(
                read.where,
                f"[mcp.clients.{name}]: an MCP client's name is 1 to 24 characters of a-z, 0-9 and '-'",
            )
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
        mcp_socket_path=read.resolve(raw.sockets.mcp),
        mcp_trust={name: client.trust for name, client in raw.mcp.clients.items()},
    )
