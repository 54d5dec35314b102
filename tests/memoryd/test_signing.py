"""Signed bundles (issue 15 item 9): --trusted keeps labels only for a bundle this home signed."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from boxmaker.memoryd.bundle import signing
from boxmaker.memoryd.service import Memoryd
from boxmaker.proto.messages import MemoryAdmin, MemoryAdminReply


def admin(memory: Memoryd, command: str, arg: str = "", **args: object) -> MemoryAdminReply:
    reply = memory.handle("memory_admin", MemoryAdmin(command=command, arg=arg, args=args))
    assert isinstance(reply, MemoryAdminReply)
    return reply


def test_sign_and_verify(tmp_path: Path) -> None:
    key = signing.home_key(tmp_path)
    assert stat.S_IMODE((tmp_path / ".bundle.key").stat().st_mode) == 0o600
    assert signing.home_key(tmp_path) == key  # never remade
    bundle = {"format": "boxmaker-memory-export-v1", "items": [{"text": "é"}], "withdrawn": []}
    signed = signing.sign(bundle, key)
    assert signing.verify(signed, key) == "this-home"
    assert signing.verify(json.loads(json.dumps(signed, indent=1)), key) == "this-home"
    assert signing.verify(bundle, key) == "unsigned"
    assert signing.verify(signed, None) == "another-home"
    assert signing.verify(signing.sign(bundle, b"k" * 32), key) == "another-home"
    for edit in ({"items": [{"text": "e"}]}, {"withdrawn": ["mem-2026-01-01-001"]}, {"extra": 1}):
        assert signing.verify({**signed, **edit}, key) == "changed"
    assert key.hex() not in json.dumps(signed)


@pytest.mark.parametrize("signature", [None, {"alg": "none"}, {"alg": "hmac-sha256", "key_id": 5}])
def test_an_unsigned_or_odd_bundle_imports_untrusted_saying_so(
    service: Memoryd, tmp_path: Path, signature: object
) -> None:
    admin(service, "note", "The staging host moved to rack 4.")
    path = tmp_path / "out.json"
    assert admin(service, "export", str(path)).data["code"] == "ok"
    data = json.loads(path.read_text())
    assert data["signature"]["alg"] == "hmac-sha256"
    if signature is None:
        del data["signature"]  # a bundle exported before signing
    else:
        data["signature"] = signature
    for item in data["items"]:
        item["label"] = {"class": "public", "untrusted": False}
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(data))
    (service.config.layout.memory / "items.jsonl").unlink()  # so the items are new here
    reply = admin(service, "import", str(edited), trusted=True)
    assert reply.data["code"] == "ok", reply.text
    assert reply.data["trusted"] is False
    assert "--trusted is honoured only for a bundle this home signed" in reply.text
    assert all(
        i.label.untrusted and i.label.data_class.value == "private"
        for i in service.memory.items.items().values()
    )


def test_a_refused_import_makes_no_key(service: Memoryd, tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "boxmaker-memory-export-v1", "items": 5}')
    assert admin(service, "import", str(bad)).data["code"] != "ok"
    assert not (service.config.layout.memory / ".bundle.key").exists()
