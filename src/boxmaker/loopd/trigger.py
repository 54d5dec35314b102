"""The compaction trigger (M5d section 3.3 and section 7, "Trigger"; DESIGN 11): when a session's last
request left its slot full enough that the next turn waits on compaction, and (issue 19) when it is
full enough for the memory flush that goes a little before it.

Pure: numbers in, a yes or no out. The depth is what the slot holds after the epoch's last request
(``cache_n + prompt_n + predicted_n`` of its last `usage` record, `Session.depth`), in tokens.
"""

from __future__ import annotations

from fractions import Fraction


def compaction_due(depth: int | None, n_ctx: int | None, threshold: float) -> bool:
    """True when `depth` tokens are at or above `threshold` x `n_ctx` ("at 85% the next turn waits on
    compaction"; at 84% the epoch stays). False when either number is unknown (None): no usage yet, or a
    server that does not say its context size, where only a context-full error compacts.

    Args:
        depth: tokens the slot holds after the last request, or None.
        n_ctx: the context per slot in tokens, or None.
        threshold: the fraction of `n_ctx`, in (0, 1] (`[compact] threshold`).

    The comparison is exact for the decimal the owner wrote: 0.07 x 100 is 7.000000000000001 in floating
    point, which would leave a slot at exactly 7% uncompacted, so the threshold is read as the fraction
    its shortest decimal form names (7/100) and compared in integers.
    """
    if depth is None or n_ctx is None:
        return False
    fraction = Fraction(str(threshold))
    return depth * fraction.denominator >= fraction.numerator * n_ctx


def flush_due(depth: int | None, n_ctx: int | None, threshold: float, margin: float) -> bool:
    """True when `depth` tokens are at or above (`threshold` - `margin`) x `n_ctx`: the memory flush
    before compaction is due (issue 19; `[compact] flush_margin`, 0.05 by default, so 80% of the slot
    for the default threshold). Each decimal is read exactly, as in `compaction_due` (0.85 - 0.05 is
    0.7999999999999999 in floating point, not 0.8); a margin at or above the threshold makes any known
    depth due. False when either number is unknown.
    """
    if depth is None or n_ctx is None:
        return False
    fraction = max(Fraction(str(threshold)) - Fraction(str(margin)), Fraction(0))
    return depth * fraction.denominator >= fraction.numerator * n_ctx
