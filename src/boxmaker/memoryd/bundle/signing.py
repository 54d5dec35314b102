"""Signed bundles (issue 15 item 9): ``bxctl memory import --trusted`` keeps a bundle's labels only when
this home signed it, so an edited bundle cannot claim a label it never had.

Each home has a key: 32 random bytes in ``memory/.bundle.key`` (0600, made on first export or import,
never overwritten). An export carries ``"signature": {"alg": "hmac-sha256", "key_id", "value"}``: HMAC-
SHA256 with the key over the bundle without its signature, as canonical JSON (keys sorted, ASCII, no
spaces); ``key_id`` names the key without revealing it (the first 16 hex digits of a hash of it).

`verify` says whose a bundle is: ``this-home`` (signed here and unchanged), ``unsigned`` (bundles
exported before signing included), ``another-home`` (signed with another key), or ``changed`` (signed
here, then edited). Only ``this-home`` honours ``--trusted``; every other import keeps every item
untrusted, and the answer says why. The key protects against an edited file, not against a process
of the same user, which can read the key (README "What memoryd guarantees").
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from pathlib import Path
from typing import Any, Literal

from boxmaker.memoryd.files.names import BUNDLE_KEY
from boxmaker.proto import fsio

ALG = "hmac-sha256"
Whose = Literal["this-home", "unsigned", "another-home", "changed"]


def home_key(memory_dir: Path) -> bytes:
    """This home's key, made (0600, durably, never over an existing one) when missing.

    Raises:
        OSError: the key cannot be read or made; LinkRefused when it is a link.
    """
    path = memory_dir / BUNDLE_KEY
    fsio.ensure_file(path, secrets.token_bytes(32))
    key = fsio.read_bytes(path)
    if len(key) < 32:
        raise OSError(f"{path} is damaged ({len(key)} bytes); move it away to make a new key")
    return key


def existing_key(memory_dir: Path) -> bytes | None:
    """This home's key when it has one (never made here: a refused import changes no file).

    Raises:
        OSError: the key cannot be read; LinkRefused when it is a link.
    """
    try:
        return fsio.read_bytes(memory_dir / BUNDLE_KEY)
    except FileNotFoundError:
        return None


def key_id(key: bytes) -> str:
    """The key's public name: 16 hex digits of a hash of it."""
    return hashlib.sha256(b"boxmaker-bundle-key\x00" + key).hexdigest()[:16]


def _canonical(bundle: dict[str, Any]) -> bytes:
    body = {k: v for k, v in bundle.items() if k != "signature"}
    return json.dumps(body, ensure_ascii=True, sort_keys=True, separators=(",", ":")).encode("ascii")


def sign(bundle: dict[str, Any], key: bytes) -> dict[str, Any]:
    """`bundle` with its ``signature`` (module docstring)."""
    value = hmac.new(key, _canonical(bundle), hashlib.sha256).hexdigest()
    return {**bundle, "signature": {"alg": ALG, "key_id": key_id(key), "value": value}}


def verify(bundle: dict[str, Any], key: bytes | None) -> Whose:
    """Whose `bundle` is, by its signature and this home's `key` (None: this home has signed nothing
    yet; module docstring)."""
    signature = bundle.get("signature")
    if not isinstance(signature, dict) or signature.get("alg") != ALG:
        return "unsigned"
    value = signature.get("value")
    if key is None or signature.get("key_id") != key_id(key) or not isinstance(value, str):
        return "another-home"
    expected = hmac.new(key, _canonical(bundle), hashlib.sha256).hexdigest()
    return "this-home" if hmac.compare_digest(expected, value) else "changed"
