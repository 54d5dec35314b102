"""Rules about the project's shape: the dependency rule, help on every command, the README's commands.

STYLE 3 and 9; DESIGN 1.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import click
import pytest

from boxmaker.brokerd.cli import cli as brokerd_cli
from boxmaker.bxctl.cli import cli as bxctl_cli
from boxmaker.memoryd.cli import cli as memoryd_cli

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "boxmaker"
ROLES = sorted(p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists())
#: Packages of data only (starter files): any role may read them, none is code.
DATA_PACKAGES = {"config"}


def boxmaker_imports(path: Path) -> set[str]:
    """The boxmaker sub-packages a module imports (``boxmaker.memoryd.x`` -> ``memoryd``)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        for name in names:
            parts = name.split(".")
            if parts[0] == "boxmaker" and len(parts) > 1:
                found.add(parts[1])
    return found


@pytest.mark.parametrize("role", [r for r in ROLES if r not in DATA_PACKAGES])
def test_each_role_imports_only_proto_and_itself(role: str) -> None:
    allowed = {"proto", role}
    for module in (PACKAGE / role).rglob("*.py"):
        extra = boxmaker_imports(module) - allowed
        assert not extra, f"{module.relative_to(ROOT)} imports boxmaker.{sorted(extra)}"


def test_proto_imports_no_role_and_no_rich_or_click() -> None:
    for module in (PACKAGE / "proto").rglob("*.py"):
        assert boxmaker_imports(module) <= {"proto"}, module
        text = module.read_text(encoding="utf-8")
        assert not re.search(r"^\s*(import|from) (rich|click|httpx)\b", text, re.M), module


PURE = [
    "memoryd/files/entries.py",
    "memoryd/files/edits.py",
    "memoryd/check/rules.py",
    "memoryd/check/phrases.py",
    "memoryd/index/query.py",
    "memoryd/files/notes.py",
    "memoryd/files/block.py",
    "memoryd/index/hits.py",
    "memoryd/review/tiers.py",
    "loopd/cron.py",
]


@pytest.mark.parametrize("module", PURE)
def test_pure_modules_do_no_io(module: str) -> None:
    text = (PACKAGE / module).read_text(encoding="utf-8")
    for word in ("import os", "import socket", "import sqlite3", "open(", "subprocess", "pathlib"):
        assert word not in text, f"{module} uses {word}"


def walk(group: click.Group, prefix: str) -> list[tuple[str, click.Command]]:
    commands: list[tuple[str, click.Command]] = [(prefix, group)]
    for name, command in sorted(group.commands.items()):
        if isinstance(command, click.Group):
            commands += walk(command, f"{prefix} {name}")
        else:
            commands.append((f"{prefix} {name}", command))
    return commands


COMMANDS = walk(bxctl_cli, "bxctl") + walk(memoryd_cli, "memoryd") + walk(brokerd_cli, "brokerd")


@pytest.mark.parametrize(("name", "command"), COMMANDS, ids=[name for name, _ in COMMANDS])
def test_every_command_has_help_with_an_example(name: str, command: click.Command) -> None:
    assert command.help, f"{name} has no help"
    first, _, rest = command.help.partition("\n")
    assert first.strip(), name
    assert "Example:" in rest, f"{name}'s help has no example"


def test_listing_commands_take_json() -> None:
    for name, command in COMMANDS:
        if name.split()[-1] in (
            "log",
            "pending",
            "files",
            "search",
            "status",
            "show",
            "approvals",
            "grants",
            "tiers",
            "jobs",
            "sessions",
        ):
            assert any(p.name == "as_json" for p in command.params), f"{name} has no --json"


def test_ci_runs_the_readme_test_command() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    blocks = re.findall(r"```(?:sh|bash|console)?\n(.*?)```", readme, re.S)
    commands = [line.strip() for block in blocks for line in block.splitlines()]
    test_command = next(c for c in commands if "scripts/gate.py" in c)
    assert test_command in ci
