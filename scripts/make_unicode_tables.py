"""Generate ``src/boxmaker/proto/unicode_tables.py`` (DESIGN 10.6 rules 1 to 4).

The invisible table is Unicode 16's ``Default_Ignorable_Code_Point`` (the 17 merged ranges of
``default-ignorable-unicode16.txt``, 4,174 code points) plus the extra invisible code points that
DESIGN 10.6 rule 3 lists (U+2800, U+2028, U+2029, U+FFF9..U+FFFB, U+13430..U+1343F, U+1D159),
merged and sorted: 4,197 code points. The generated module also carries the fixed tables of
rules 1, 2 and 4 (surrogates, controls, noncharacters), so the check and ``proto.escape`` share one
source.

Usage::

    python scripts/make_unicode_tables.py [SOURCE] [--output PATH] [--check]

SOURCE defaults to ``../shared/data/default-ignorable-unicode16.txt`` beside the checkout.
``--check`` writes nothing and exits 1 when the committed module differs from what the script
would write (for the gate). Style habit 16: generated tables are committed with a header naming the
script that made them.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_SOURCE = REPO / ".." / "shared" / "data" / "default-ignorable-unicode16.txt"
DEFAULT_OUTPUT = REPO / "src" / "boxmaker" / "proto" / "_unicode_data.py"

Range = tuple[int, int]

# DESIGN 10.6 rule 3: invisible without being Default_Ignorable_Code_Point.
EXTRA_INVISIBLE: tuple[Range, ...] = (
    (0x2800, 0x2800),  # BRAILLE PATTERN BLANK
    (0x2028, 0x2028),  # LINE SEPARATOR
    (0x2029, 0x2029),  # PARAGRAPH SEPARATOR
    (0xFFF9, 0xFFFB),  # INTERLINEAR ANNOTATION ANCHOR..TERMINATOR
    (0x13430, 0x1343F),  # EGYPTIAN HIEROGLYPH format controls
    (0x1D159, 0x1D159),  # MUSICAL SYMBOL NULL NOTEHEAD
)
EXPECTED_DICP = (17, 4174)
EXPECTED_INVISIBLE = 4197

SURROGATES: tuple[Range, ...] = ((0xD800, 0xDFFF),)
# C0 except TAB (U+0009) and LF (U+000A), then DEL and the whole C1 block.
CONTROLS: tuple[Range, ...] = ((0x0000, 0x0008), (0x000B, 0x001F), (0x007F, 0x009F))


def noncharacters() -> tuple[Range, ...]:
    """U+FDD0..U+FDEF and the last two code points of each of the 17 planes (66 in all)."""
    planes = [(plane << 16 | 0xFFFE, plane << 16 | 0xFFFF) for plane in range(17)]
    return tuple(sorted([(0xFDD0, 0xFDEF), *planes]))


def parse_ranges(text: str) -> list[Range]:
    """Parse lines ``XXXX`` or ``XXXX..YYYY`` (hex); blank lines and ``#`` comments are skipped."""
    ranges: list[Range] = []
    for number, raw in enumerate(text.split("\n"), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        first, _, last = line.partition("..")
        try:
            pair = (int(first, 16), int(last or first, 16))
        except ValueError:
            raise SystemExit(f"line {number}: not a code point range: {raw!r}") from None
        if pair[0] > pair[1] or pair[1] > 0x10FFFF:
            raise SystemExit(f"line {number}: bad range: {raw!r}")
        ranges.append(pair)
    return ranges


def merge(ranges: Iterable[Range]) -> list[Range]:
    """Sort and merge overlapping or adjacent ranges."""
    merged: list[Range] = []
    for first, last in sorted(ranges):
        if merged and first <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], last))
        else:
            merged.append((first, last))
    return merged


def count(ranges: Iterable[Range]) -> int:
    return sum(last - first + 1 for first, last in ranges)


def _origin(pair: Range, dicp: Sequence[Range]) -> str:
    def overlaps(others: Iterable[Range]) -> bool:
        return any(a <= pair[1] and pair[0] <= b for a, b in others)

    names = [name for name, src in (("DICP", dicp), ("extra", EXTRA_INVISIBLE)) if overlaps(src)]
    return " + ".join(names)


def _rows(ranges: Sequence[Range], dicp: Sequence[Range] | None = None) -> str:
    lines = []
    for first, last in ranges:
        comment = f"  # {_origin((first, last), dicp)}" if dicp is not None else ""
        lines.append(f"    (0x{first:04X}, 0x{last:04X}),{comment}")
    return "\n".join(lines)


def render(source_name: str, source_text: str) -> str:
    """The full text of the generated module."""
    dicp = merge(parse_ranges(source_text))
    if (len(dicp), count(dicp)) != EXPECTED_DICP:
        raise SystemExit(f"{source_name}: expected 17 ranges and 4,174 code points, got {dicp!r}")
    invisible = merge([*dicp, *EXTRA_INVISIBLE])
    if count(invisible) != EXPECTED_INVISIBLE:
        raise SystemExit(f"expected {EXPECTED_INVISIBLE} invisible code points")
    digest = hashlib.sha256(source_text.encode("utf-8")).hexdigest()
    return TEMPLATE.format(
        source=source_name,
        sha256=digest,
        invisible_rows=_rows(invisible, dicp),
        invisible_count=count(invisible),
        nonchar_rows=_rows(noncharacters()),
        nonchar_count=count(noncharacters()),
        control_rows=_rows(CONTROLS),
        surrogate_row="(0x{:04X}, 0x{:04X})".format(*SURROGATES[0]),
    )


TEMPLATE = '''\
# Generated by scripts/make_unicode_tables.py: do not edit by hand, run the script again.
# Source: {source}
#   sha256 {sha256}
#   (Unicode 16 Default_Ignorable_Code_Point: 17 ranges, 4,174 code points),
#   plus the extra invisible code points of DESIGN 10.6 rule 3.
"""Code point tables of the memory-write check (DESIGN 10.6 rules 1 to 4) and ``proto.escape``:
data only; ``proto.unicode_tables`` holds the lookups built on them.

Each table is a sorted tuple of disjoint, non-adjacent ``(first, last)`` inclusive pairs:

- ``INVISIBLE_RANGES`` (rule 3, ``INVISIBLE_COUNT`` code points): Default_Ignorable_Code_Point
  plus U+2800, U+2028, U+2029, U+FFF9..U+FFFB, U+13430..U+1343F and U+1D159;
- ``NONCHARACTER_RANGES`` (rule 4, ``NONCHARACTER_COUNT``): U+FDD0..U+FDEF and U+xxFFFE/U+xxFFFF;
- ``CONTROL_RANGES`` (rule 2): C0 except tab and newline, DEL, C1;
- ``SURROGATE_RANGES`` (rule 1): U+D800..U+DFFF.
"""

from __future__ import annotations

from typing import Final

INVISIBLE_RANGES: Final[tuple[tuple[int, int], ...]] = (
{invisible_rows}
)
INVISIBLE_COUNT: Final = {invisible_count}

NONCHARACTER_RANGES: Final[tuple[tuple[int, int], ...]] = (
{nonchar_rows}
)
NONCHARACTER_COUNT: Final = {nonchar_count}

CONTROL_RANGES: Final[tuple[tuple[int, int], ...]] = (
{control_rows}
)

SURROGATE_RANGES: Final[tuple[tuple[int, int], ...]] = ({surrogate_row},)
'''


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", nargs="?", type=Path, default=DEFAULT_SOURCE)
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    parser.add_argument("--check", action="store_true", help="compare, write nothing")
    args = parser.parse_args(argv)
    source: Path = args.source
    output: Path = args.output
    text = render(source.name, source.read_text(encoding="utf-8"))
    if args.check:
        current = output.read_text(encoding="utf-8") if output.exists() else ""
        if current != text:
            print(f"{output} is out of date: run scripts/make_unicode_tables.py", file=sys.stderr)
            return 1
        print(f"{output} is up to date")
        return 0
    output.write_text(text, encoding="utf-8")
    print(f"wrote {output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
