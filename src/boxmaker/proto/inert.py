"""Chat-template markup made inert in text that reaches a model inside another message.

A server that renders the chat template and then tokenizes the prompt with special tokens parsed
(llama-server does) reads ``<|im_end|>\\n<|im_start|>system`` inside a tool result or a carried summary
as a real end of turn and a real system turn. Text recorded from one conversation and shown in
another (a compaction summary, a tool-output summary, a recall hit) goes through `inert_tags` first;
the memory write check refuses the same markup outright (``memoryd.check.rules``, rule ``template``).

``inert_tags(text)``:

- a tag ``<|name|>`` (ASCII bars, or the full-width bars U+FF5C of DeepSeek's tokens) becomes
  ``[name]``; so does ``<name ...>`` and ``</name>`` for the turn and tool tags of the common
  templates (``think``, ``tool_call``, ``tool_response``, ``tools``, ``system``, ``user``,
  ``assistant``, ``im_start``, ``im_end``, ``start_of_turn``, ``end_of_turn`` in any case; ``s``,
  ``bos``, ``eos``, ``pad`` in lower case only, as their tokens are, so ``Vec<S>`` stays);
- Mistral's and Llama 2's bracketed control tokens (``[INST]``, ``[/INST]``, ``[SYSTEM_PROMPT]``,
  ``[TOOL_CALLS]``, ``[AVAILABLE_TOOLS]``, ``[TOOL_RESULTS]``, ``[TOOL_CONTENT]``, ``[THINK]`` and
  their closing forms, in any case) become ``(INST)``, ``(/INST)``, ...;
- any ``<|``, ``|>``, ``<｜`` or ``｜>`` left is split by a space.

Plain markup (``<b>text</b>``, ``Vec<S>``) is left as it is. Pure; never raises for any ``str``; the
result is never longer than the text by more than one character per bar split.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["inert_tags"]

_BAR: Final = "|\uff5c"
_TAG: Final = re.compile(
    rf"<[{_BAR}][^<>{_BAR}]{{0,40}}[{_BAR}]>"
    r"|</?(?:think|thinking|tool_call|tool_response|tools|system|user|assistant|"
    r"im_start|im_end|start_of_turn|end_of_turn|(?-i:s|bos|eos|pad))\b[^<>]{0,40}>",
    re.IGNORECASE,
)
_BRACKETED: Final = re.compile(
    r"\[(/?(?:inst|system_prompt|tool_calls|available_tools|tool_results|tool_content|think))\]",
    re.IGNORECASE,
)


def inert_tags(text: str) -> str:
    """`text` with chat-template tags made inert (module docstring); pure."""
    text = _TAG.sub(lambda m: "[" + m.group().strip("<>").strip(_BAR) + "]", text)
    text = _BRACKETED.sub(lambda m: f"({m.group(1)})", text)
    for bar in _BAR:
        text = text.replace(f"<{bar}", f"< {bar}").replace(f"{bar}>", f"{bar} >")
    return text
