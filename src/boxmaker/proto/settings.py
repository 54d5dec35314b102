"""Reading a role's TOML config into a frozen, typed value (DESIGN 10.1; STYLE 11).

Unknown keys are an error naming the key and its table; a wrong type names the key and what it takes.
`load_role_config` is the part every role's ``config.load`` shares: the file read and validated (or
the defaults), relative paths resolved against the file's folder, the home found by DESIGN 10.1's
order, and starter files that fall back to the packaged ones.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Generic, Protocol, TypeVar
from urllib.parse import urlsplit

import msgspec

from boxmaker.proto.errors import ConfigError
from boxmaker.proto.home import Layout, resolve_home
from boxmaker.proto.wire import Limits

T = TypeVar("T")

_UNKNOWN = re.compile(r"^Object contains unknown field `(?P<key>[^`]*)`(?: - at `\$\.?(?P<at>[^`]*)`)?$")
_AT = re.compile(r"^(?P<why>.*) - at `\$\.?(?P<at>[^`]*)`$")


def load_toml(path: Path) -> dict[str, Any]:
    """Read and parse a TOML file.

    Raises:
        ConfigError: unreadable, not UTF-8, or not TOML (with the parser's line and column).
    """
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(str(path), f"cannot read it ({exc.strerror or exc})") from None
    try:
        return tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise ConfigError(str(path), "not UTF-8") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(str(path), f"not valid TOML: {exc}") from None


def convert_config(data: dict[str, Any], kind: type[T], path: str) -> T:
    """Validate parsed TOML as `kind` (a msgspec Struct with ``forbid_unknown_fields``).

    Raises:
        ConfigError: naming an unknown key (``unknown key 'x' in [memory]; remove it or fix its
            spelling``) or a bad value in words (``[index] max_class: 'top' is not one of: public,
            private, secret``; ``[limits] max_tokens: must be a whole number, not text in quotes``).
    """
    try:
        return msgspec.convert(data, kind, strict=True)
    except msgspec.ValidationError as exc:
        raise ConfigError(path, _explain(str(exc), kind)) from None


#: What a TOML value of each msgspec type name is, in words.
_WORDS = {
    "int": "a whole number",
    "float": "a number",
    "str": "text in quotes",
    "bool": "true or false",
    "array": "a list [...]",
    "object": "a table",
    "null": "nothing",
}
_EXPECTED = re.compile(r"^Expected `(?P<want>[a-z| ]+)`(?P<bound>.*?), got `(?P<got>[a-z]+)`$")
_BOUND = re.compile(r"^Expected `(?P<want>[a-z]+)` (?P<op>[<>]=?) (?P<n>[-0-9.e]+)$")
_ENUM = re.compile(r"^Invalid enum value (?P<value>.+)$")


def _explain(message: str, kind: type | None = None) -> str:
    unknown = _UNKNOWN.match(message)
    if unknown:
        key, at = unknown.group("key"), unknown.group("at")
        where = f" in [{at}]" if at else " at the top level"
        return f"unknown key {key!r}{where}; remove it or fix its spelling"
    located = _AT.match(message)
    if located:
        at = located.group("at")
        table, _, key = at.rpartition(".")
        name = f"[{table}] {key}" if table else key
        return f"{name}: {_plain(located.group('why'), kind, at)}"
    return message


def _plain(why: str, kind: type | None, at: str) -> str:
    """msgspec's reason in words: the type wanted and given, a bound, an enum's allowed values."""
    expected = _EXPECTED.match(why)
    if expected:
        wants = " or ".join(_WORDS.get(w.strip(), w.strip()) for w in expected.group("want").split("|"))
        got = _WORDS.get(expected.group("got"), expected.group("got"))
        return f"must be {wants}, not {got}"
    bound = _BOUND.match(why)
    if bound:
        words = {">=": "at least", ">": "more than", "<=": "at most", "<": "less than"}[bound.group("op")]
        noun = _WORDS.get(bound.group("want"), bound.group("want"))
        return f"must be {noun} that is {words} {bound.group('n')}"
    enum = _ENUM.match(why)
    allowed = _allowed(kind, at) if enum and kind is not None else None
    if enum and allowed:
        return f"{enum.group('value')} is not one of: {', '.join(allowed)}"
    return why


def _allowed(kind: type, at: str) -> list[str] | None:
    """The values an enum (or literal) at dotted path `at` of `kind` allows, else None."""
    info: Any = msgspec.inspect.type_info(kind)
    for part in at.split("."):
        if isinstance(info, msgspec.inspect.ListType):
            info = info.item_type
        fields = {f.name: f.type for f in getattr(info, "fields", ())}
        if part not in fields:
            return None
        info = fields[part]
    if isinstance(info, msgspec.inspect.ListType):
        info = info.item_type
    if isinstance(info, msgspec.inspect.EnumType):
        return [str(m.value) for m in info.cls]
    if isinstance(info, msgspec.inspect.LiteralType):
        return [str(v) for v in info.values]
    return None


class SocketLimits(msgspec.Struct, forbid_unknown_fields=True):
    """The keys every role's ``[limits]`` table has for its sockets (`wire.Limits`)::

        [limits]
        connections = 64      # connections served at once per socket (1 to 4,096); one more is
                              # answered `busy` and the caller asks again
        idle_s = 10           # seconds a connection may take to send its request (0.1 to 3,600)

    A role whose ``[limits]`` has more keys subclasses it (loopd).
    """

    connections: Annotated[int, msgspec.Meta(ge=1, le=4096)] = 64
    idle_s: Annotated[float, msgspec.Meta(ge=0.1, le=3600.0)] = 10.0

    @property
    def sockets(self) -> Limits:
        """The limits as `wire.FrameServer` takes them."""
        return Limits(connections=self.connections, idle_s=self.idle_s)


def packaged_starter(name: str) -> Path:
    """A starter file shipped in the package (``boxmaker/config/<name>``; DESIGN 10.1)."""
    return Path(str(resources.files("boxmaker.config").joinpath(name)))


def model_url(value: str) -> str:
    """A model server's base URL, checked and normalised: http(s), a host, a valid port, no query, no
    user or password; trailing slashes and a trailing ``/v1`` or ``/v1/chat/completions`` removed (the
    client adds ``/v1/chat/completions``).

    Raises:
        ValueError: naming what is wrong, e.g. ``'http://h:x' has an invalid port``.
    """
    text = value.strip()
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"{value!r} is not a valid URL ({exc})") from None
    if parts.scheme not in ("http", "https"):
        raise ValueError(f"{value!r} is not an http:// or https:// URL")
    if not parts.hostname:
        raise ValueError(f"{value!r} has no host")
    if port == 0:
        raise ValueError(f"{value!r} has an invalid port")
    if parts.username is not None or parts.password is not None:
        raise ValueError(
            "a model URL cannot hold a user name or password (they would be shown in status lines); "
            "put a token in the environment variable named by [model] api_key_env"
        )
    if parts.query or parts.fragment or any(c.isspace() for c in text):
        raise ValueError(f"{value!r} must be a plain base URL such as http://127.0.0.1:8080")
    base = text.rstrip("/").removesuffix("/chat/completions").removesuffix("/v1")
    return base.rstrip("/")


class _Paths(Protocol):
    @property
    def home(self) -> str | None: ...


class RoleTables(Protocol):
    """A role's config file as its msgspec Struct reads it: at least a ``[paths]`` table with ``home``."""

    @property
    def paths(self) -> _Paths: ...


F = TypeVar("F", bound=RoleTables)


@dataclass(frozen=True, slots=True)
class RoleConfig(Generic[F]):
    """A role's config file, read and validated (its defaults without a file), and its home.

    Attributes:
        tables: the file's tables, every default filled in.
        path: the file, absolute; None when the defaults apply.
        where: what an error names: the file's path, or ``<role> defaults``.
        base: the folder relative paths resolve against: the file's, else the current folder.
        home: the home, by DESIGN 10.1's order (``--home``, ``[paths] home``, ``$BOXMAKER_HOME``, ...).
    """

    tables: F
    path: Path | None
    where: str
    base: Path
    home: Path

    @property
    def layout(self) -> Layout:
        """The home's layout."""
        return Layout(self.home)

    def resolve(self, value: str | None) -> Path | None:
        """A configured path, absolute (``~`` expanded, relative to `base`); None stays None."""
        return _resolve(self.base, value)

    def starter(self, value: str | None, name: str, key: str) -> Path:
        """A configured starter file (which must exist), else `name` next to the config file when it
        is there, else the packaged one (DESIGN 10.1).

        Raises:
            ConfigError: the configured file does not exist or is not a file (naming `key`).
        """
        path = self.resolve(value)
        if path is None:
            named = self.base / name if self.path is not None else None
            return named if named is not None and named.is_file() else packaged_starter(name)
        if not path.is_file():
            what = "is not a file" if path.exists() else "does not exist"
            raise ConfigError(self.where, f"{key}: {path} {what}")
        return path


def load_role_config(
    role: str, kind: type[F], config_path: Path | None, cli_home: str | None
) -> RoleConfig[F]:
    """Read `role`'s config file as `kind` (its defaults when `config_path` is None) and find its home.

    Raises:
        ConfigError: unreadable file, bad TOML, unknown key (named), or a bad value.
    """
    tables = kind()
    base = Path.cwd()
    where = f"{role} defaults"
    if config_path is not None:
        config_path = config_path.absolute()
        where = str(config_path)
        tables = convert_config(load_toml(config_path), kind, where)
        base = config_path.parent
    home = resolve_home(cli_home, _resolve(base, tables.paths.home))
    return RoleConfig(tables, config_path, where, base, home)


def _resolve(base: Path, value: str | None) -> Path | None:
    return None if value is None else (base / Path(value).expanduser()).absolute()
