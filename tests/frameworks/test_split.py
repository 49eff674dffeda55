"""``split_by_weight``: largest remainders (reference §3.5), checked as properties."""

from __future__ import annotations

from fractions import Fraction

from hypothesis import given
from hypothesis import strategies as st

from t9k_jobs.frameworks.base import split_by_weight


def test_examples() -> None:
    assert split_by_weight(4, [1, 2]) == [1, 3]
    assert split_by_weight(5, [1, 1]) == [3, 2]
    assert split_by_weight(5, [3, 1]) == [4, 1]
    assert split_by_weight(3, [0, 0]) == [2, 1]
    assert split_by_weight(2, [0, 1, 1]) == [0, 1, 1]
    assert split_by_weight(0, [1, 2]) == [0, 0]


@given(st.integers(0, 500), st.lists(st.integers(0, 50), min_size=1, max_size=8))
def test_shares_are_the_exact_ones_rounded_by_largest_remainder(total: int, weights: list[int]) -> None:
    shares = split_by_weight(total, weights)
    assert sum(shares) == total
    used = weights if sum(weights) > 0 else [1] * len(weights)
    exact = [Fraction(total * w, sum(used)) for w in used]
    for share, e, w in zip(shares, exact, used):
        assert share in (int(e), int(e) + 1)  # floor or one more
        if w == 0:
            assert share == 0
    # No entry that got one more has a smaller remainder than one that did not.
    up = [e - int(e) for s, e in zip(shares, exact) if s > int(e)]
    down = [e - int(e) for s, e, w in zip(shares, exact, used) if s == int(e) and w > 0]
    if up and down:
        assert min(up) >= max(down)
