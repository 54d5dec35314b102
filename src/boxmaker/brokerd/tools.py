"""The tools brokerd knows, each with its JSON schema (name, description, parameters).

`find_tool` shows these schemas for the tools the grants allow, so a model can call them with
`call_tool`. recall and memory are core tools (declared in every session, M5a section 5); they are
listed here so every known tool has a schema.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class ToolSchema:
    """A tool's name, one-line description and JSON-schema parameters."""

    name: str
    description: str
    parameters: dict[str, Any]

    def as_json(self) -> dict[str, Any]:
        """The schema as an OpenAI-style function object."""
        return {"name": self.name, "description": self.description, "parameters": self.parameters}


def _object(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


SCHEMAS: dict[str, ToolSchema] = {
    schema.name: schema
    for schema in (
        ToolSchema(
            "recall",
            "Search what you remember: past sessions and notes; best hits first.",
            _object(
                {
                    "query": {"type": "string", "minLength": 1, "maxLength": 500},
                    "k": {"type": "integer", "minimum": 1, "maximum": 10, "default": 5},
                },
                ["query"],
            ),
        ),
        ToolSchema(
            "memory",
            "Add, replace, remove or consolidate entries of memory.md or user.md, or take a note.",
            _object(
                {
                    "action": {"enum": ["add", "replace", "remove", "note", "consolidate"]},
                    "file": {"enum": ["memory", "user"]},
                    "text": {"type": "string"},
                    "old": {"type": "string"},
                    "entries": {"type": "array", "items": {"type": "object"}},
                },
                ["action"],
            ),
        ),
        ToolSchema("clock", "The current date and time in UTC, with the day of the week.", _object({}, [])),
        ToolSchema(
            "find_tool",
            "List the tools you may call with call_tool whose name or description matches the query.",
            _object({"query": {"type": "string", "maxLength": 500}}, []),
        ),
        ToolSchema(
            "http_fetch",
            "Fetch a web page over http or https (GET) and return its status and text.",
            _object({"url": {"type": "string", "format": "uri", "maxLength": 2000}}, ["url"]),
        ),
        ToolSchema(
            "read_file",
            "Read a text file the owner allows, by absolute path.",
            _object({"path": {"type": "string", "maxLength": 4096}}, ["path"]),
        ),
    )
}
