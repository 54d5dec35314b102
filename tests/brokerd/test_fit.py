"""Results are cut to fit the frame after JSON escaping (issue 15 item 9): a 2 MB page of control
characters reaches the model as a cut page, not as a misleading "brokerd failed"."""

from __future__ import annotations

from pathlib import Path

import pytest

from boxmaker.brokerd.fetch import FetchLimits
from boxmaker.brokerd.local import LocalRuntime
from boxmaker.brokerd.service import Brokerd
from boxmaker.proto import messages
from boxmaker.proto.fit import escaped_size, fit
from boxmaker.proto.frame import MAX_FRAME
from brokerd.brokerd_helpers import grant_text, request, write_grant


@pytest.mark.parametrize(
    ("char", "size"), [("a", 1), ('"', 2), ("\n", 2), ("\x01", 6), ("\x7f", 6), ("é", 6), ("😀", 12)]
)
def test_escaped_sizes_match_the_encoder(char: str, size: int) -> None:
    assert escaped_size(char) == size
    assert (
        len(messages.encode(messages.ToolResponse("c", char * 10, "ok", None)))
        - len(messages.encode(messages.ToolResponse("c", "", "ok", None)))
        == 10 * size
    )


@pytest.mark.parametrize("char", ["\x01", "😀", "\x00", '"', "a"])
def test_a_fitted_text_always_fits_the_frame(char: str) -> None:
    text = fit(char * 2_000_000)
    encoded = messages.encode(messages.ToolResponse("call-1", text, "ok", None))
    assert len(encoded) <= MAX_FRAME
    if escaped_size(char) * 2_000_000 > MAX_FRAME:
        assert "[cut to fit the 4 MiB message limit" in text
    else:
        assert text == char * 2_000_000


def test_a_page_of_control_characters_is_cut_not_failed(home: Path, broker: Brokerd) -> None:
    folder = home.parent / "pages"
    folder.mkdir()
    (folder / "page.txt").write_bytes(bytes(range(1, 9)) * 250_000)
    write_grant(home, "pages", grant_text("read_file", paths=[str(folder)], result_class="private"))
    broker.runtime = LocalRuntime(FetchLimits(), read_max_bytes=3_000_000)
    response = broker.tool_call(request("read_file", {"path": str(folder / "page.txt")}))
    assert response.code == "ok"
    assert len(messages.encode(response)) <= MAX_FRAME
    assert "[cut to fit the 4 MiB message limit" in response.output
