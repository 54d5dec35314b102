"""``bxctl memory verify`` against a real memoryd (issue 19): the head printed, a recorded head proven,
a changed file named with exit 1 and nothing changed, a malformed head refused without a traceback, and
``bxctl status`` saying what the start-up check did with the chain."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from click.testing import CliRunner

from boxmaker.bxctl.cli import cli
from conftest import daemon_log


def files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_verify_prints_the_head_proves_it_and_names_a_changed_file(
    home: Path, daemon: subprocess.Popen[bytes]
) -> None:
    del daemon
    runner = CliRunner()
    for text in ("Prefers answers in UTC.", "Deploys on Thursdays."):
        assert runner.invoke(cli, ["memory", "add", "--file", "user", text]).exit_code == 0
    done = runner.invoke(cli, ["memory", "verify", "--json"])
    assert done.exit_code == 0, done.output
    report = json.loads(done.output)
    assert report["intact"]
    assert len(report["head"]) == 64
    head = report["head"]

    assert runner.invoke(cli, ["memory", "note", "The kettle is blue."]).exit_code == 0
    proven = runner.invoke(cli, ["memory", "verify", "--head", head])
    assert proven.exit_code == 0, proven.output
    assert f"recorded head {head}" in proven.output
    assert "the history up to it is unchanged" in proven.output

    bad = runner.invoke(cli, ["memory", "verify", "--head", "yesterday"])
    assert bad.exit_code == 1
    assert "64 hex digits" in bad.output
    assert "Traceback" not in bad.output

    assert "memoryd INFO journal chain checked at start: 0 journal lines" in daemon_log(home)
    status = runner.invoke(cli, ["status"])
    assert "journal: ok - journal chain checked at start" in status.output, status.output

    memory = home / "memory"
    (memory / "user.md").write_text("Prefers answers in CET.\n")
    before = files(memory)
    tampered = runner.invoke(cli, ["memory", "verify", "--json"])
    assert tampered.exit_code == 1
    found = json.loads(tampered.output)
    assert found["intact"] is False
    assert found["problems"][0]["file"] == "user.md"
    assert "user.md is not what the journal's replay gives (line 1 differs)" in found["problems"][0]["text"]
    assert files(memory) == before
    text = runner.invoke(cli, ["memory", "verify"])
    assert text.exit_code == 1
    assert text.output.startswith("DISAGREES: user.md")
