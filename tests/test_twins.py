"""#55 item 8: the CPU-time cuts left pairs of functions that must agree, each a fast path beside the one it stands
for. A property test per pair, over inputs hypothesis draws: where the fast path answers, it answers as the careful
one does; where it does not, the careful one is what runs."""

import math
import random

import pytest
from hypothesis import given, settings, strategies as st

from rackbench.load import traces
from rackbench.results import requests

pytestmark = pytest.mark.offline


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(0, 300))
def test_skipping_words_leaves_the_generator_where_drawing_them_does(seed, n):
    """`_skip_words` stands for `_words` where a session's text is not needed: the generator's state after it must be
    the same, or every later session of the trace changes."""
    drawn, skipped = random.Random(seed), random.Random(seed)
    text = traces._words(drawn, n)
    assert traces._skip_words(skipped, n) == "" and drawn.getstate() == skipped.getstate()
    assert len(text.split()) == n


VALID = {
    float: st.one_of(st.just(""), st.floats(allow_nan=False, allow_infinity=False).map(repr)),
    int: st.one_of(st.just(""), st.integers(-10**12, 10**12).map(str)),
    bool: st.sampled_from(["0", "1"]),
    str: st.text(min_size=1, max_size=8),
}
BAD = {float: ["nan", "inf", "-inf", "1e400", "x", ""], int: ["1.5", "x", ""], bool: ["2", "true", ""], str: [""]}


@st.composite
def files(draw):
    """A requests file's plan and rows: valid cells, then at most one cell made bad (not a number, not finite, empty
    where every request has one) and at most one row of another width."""
    kinds = dict(requests.COLUMNS)
    header = [name for name, _ in requests.COLUMNS]
    plan = [(i, name, kinds[name], name in requests.NEVER_EMPTY) for i, name in enumerate(header)]
    rows = draw(st.lists(st.fixed_dictionaries({name: VALID[kind] for name, kind in requests.COLUMNS}),
                         max_size=6))
    body = [[row[name] for name in header] for row in rows]
    if body and draw(st.booleans()):
        r, c = draw(st.integers(0, len(body) - 1)), draw(st.integers(0, len(header) - 1))
        body[r][c] = draw(st.sampled_from(BAD[kinds[header[c]]]))
    if body and draw(st.integers(0, 4)) == 0:
        body[draw(st.integers(0, len(body) - 1))].append("extra")          # a row of another width
    return plan, body, len(header)


def _same(a, b) -> bool:
    return a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))


@settings(max_examples=300, deadline=None)
@given(files())
def test_the_column_read_answers_as_the_careful_read_or_leaves_it_to_it(file):
    """`_columns` reads a requests file a column at a time; `_careful` cell by cell, naming the first bad cell. Where
    the column read answers, the careful read gives the same values; where the careful read refuses the file, the
    column read does not answer."""
    plan, body, width = file
    fast = requests._columns(plan, body, width)
    try:
        slow = requests._careful("f.csv", plan, body, width)
    except ValueError:
        assert fast is None
        return
    if fast is not None:
        assert len(fast) == len(slow)
        for a, b in zip(fast, slow):
            assert len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b)), (a, b)
