"""Gemini CLI's GEMINI.md (issue 17).

PATH is a GEMINI.md file or the folder holding it (``~/.gemini``). Gemini CLI's ``save_memory`` appends
each fact as a bullet under the heading ``## Gemini Added Memories``: each bullet there is an entry for
user.md (the facts are mostly the owner's preferences). The rest of the file is instructions the owner
wrote: shown as a suggestion for soul.md or conventions.md, never stored. (Newer Gemini CLI versions
may also keep per-project memory folders; they are not read.)
"""

from __future__ import annotations

from pathlib import Path

from boxmaker.bxctl.imports.parsed import Entry, Malformed, Parsed, Suggestion, read_text

HEADING = "## Gemini Added Memories"


def parse(path: Path) -> Parsed:
    """Read GEMINI.md (module docstring).

    Raises:
        Malformed: the file cannot be read, or holds no added-memories section.
    """
    file = path / "GEMINI.md" if path.is_dir() else path
    lines = read_text(file).splitlines()
    parsed = Parsed()
    inside = False
    found = False
    rest: list[str] = []
    for number, line in enumerate(lines, start=1):
        stripped = line.strip()
        if stripped == HEADING:
            inside, found = True, True
            continue
        if inside and stripped.startswith("#"):
            inside = False
        if not inside:
            rest.append(line)
            continue
        if stripped[:2] in ("- ", "* ") and stripped[2:].strip():
            parsed.entries.append(Entry("user", stripped[2:].strip(), f"{file.name} line {number}"))
    if not found:
        raise Malformed(file, "", f"has no {HEADING!r} section")
    body = "\n".join(rest).strip()
    if body:
        parsed.suggestions.append(Suggestion(str(file), body, "soul.md or conventions.md"))
    return parsed
