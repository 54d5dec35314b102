"""Where a decided call runs, and the label of its result (M5a section 8).

`Runtime.run` returns an `Output`; `Runtime.run_labelled` returns it with the runtime's own label, or
None (its default calls `run` and returns None). `run_decided` answers with the stricter of the
grant's label and the runtime's: labels only get stricter. A refused output carries no label.

`CompositeRuntime` sends ``recall`` and ``memory`` to memoryd (`MemoryRuntime`, a ``memory_call``
carrying the session's label as brokerd held it when deciding) and every other tool to the local
runtime (`LocalRuntime`: ``clock``, ``find_tool``, ``http_fetch``, ``read_file``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from boxmaker.brokerd import sentences
from boxmaker.brokerd.grants import Grant, GrantSet
from boxmaker.brokerd.sentences import Code
from boxmaker.proto import wire
from boxmaker.proto.errors import PeerError
from boxmaker.proto.labels import Label
from boxmaker.proto.messages import MemoryCall, ToolRequest, ToolResponse

MEMORY_TOOLS = frozenset({"recall", "memory"})


@dataclass(frozen=True, slots=True)
class RunSpec:
    """A decided call: the request, the grant that allowed it, the session's label at decision time,
    and the grants in force (find_tool lists them)."""

    request: ToolRequest
    grant: Grant
    session: Label
    grants: GrantSet


@dataclass(frozen=True, slots=True)
class Output:
    """What a runtime answers: the text the model reads and the code (``ok`` or ``refused:…``)."""

    text: str
    code: str = "ok"

    @property
    def refused(self) -> bool:
        """True for a ``refused:<reason>`` code."""
        return self.code.startswith("refused:")


class Runtime:
    """Runs decided calls. Subclasses implement `run`, or `run_labelled` when they know a label.

    The base class is the refusing runtime (M5a section 8): it runs nothing and says so.
    """

    def run(self, spec: RunSpec) -> Output:
        """Run the call and return its output (here: refuse it, naming the tool)."""
        refusal = sentences.no_runtime(spec.request.tool)
        return Output(refusal.sentence, refusal.code)

    def run_labelled(self, spec: RunSpec) -> tuple[Output, Label | None]:
        """Run the call; return its output and the runtime's own label (None: the grant's applies)."""
        return self.run(spec), None


def combine(grant: Label, runtime: Label | None) -> Label:
    """The stricter of the grant's label and the runtime's (the grant's when the runtime has none)."""
    return grant if runtime is None else grant.stricter(runtime)


def run_decided(runtime: Runtime, spec: RunSpec) -> ToolResponse:
    """Run a decided call and label its result: stricter of grant and runtime; refusals unlabelled."""
    output, label = runtime.run_labelled(spec)
    final = None if output.refused else combine(spec.grant.label, label)
    return ToolResponse(call_id=spec.request.call_id, output=output.text, code=output.code, label=final)


class MemoryRuntime(Runtime):
    """Sends ``recall`` and ``memory`` to memoryd's broker socket as a ``memory_call``."""

    def __init__(self, socket: Path, timeout_s: float = 30.0) -> None:
        self.socket = socket
        self.timeout_s = timeout_s

    def run_labelled(self, spec: RunSpec) -> tuple[Output, Label | None]:
        """memoryd's answer and label; unreachable or silent for `timeout_s` -> memoryd-unreachable."""
        body = MemoryCall(
            request=spec.request, taint=spec.session.data_class, untrusted=spec.session.untrusted
        )
        try:
            reply = wire.call(self.socket, body, timeout=self.timeout_s)
        except PeerError as exc:
            if exc.code == "unreachable":
                return Output(sentences.MEMORYD_UNREACHABLE, Code.MEMORYD_UNREACHABLE), None
            return Output(f"memoryd refused the call: {exc.message}", Code.MEMORYD_ERROR), None
        if not isinstance(reply, ToolResponse):
            why = "memoryd answered with something other than a tool_response"
            return Output(why, Code.MEMORYD_ERROR), None
        return Output(reply.output, reply.code), reply.label


class CompositeRuntime(Runtime):
    """recall and memory to `memory`, everything else to `local`."""

    def __init__(self, memory: Runtime, local: Runtime) -> None:
        self.memory = memory
        self.local = local

    def run_labelled(self, spec: RunSpec) -> tuple[Output, Label | None]:
        """Route by tool name."""
        target = self.memory if spec.request.tool in MEMORY_TOOLS else self.local
        return target.run_labelled(spec)
