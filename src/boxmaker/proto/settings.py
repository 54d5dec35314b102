"""Reading a role's TOML config into a frozen, typed value (DESIGN 10.1; STYLE 11).

Unknown keys are an error naming the key and its table; a wrong type names the key and what it takes.
"""

from __future__ import annotations

import re
import tomllib
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

import msgspec

from boxmaker.proto.errors import ConfigError

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
            spelling``) or a bad value (``[index] max_class: Invalid enum value 'top'``).
    """
    try:
        return msgspec.convert(data, kind, strict=True)
    except msgspec.ValidationError as exc:
        raise ConfigError(path, _explain(str(exc))) from None


def _explain(message: str) -> str:
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
        return f"{name}: {located.group('why')}"
    return message


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
