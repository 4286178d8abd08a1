"""The data table's token patterns run in RE2 (one pass over every Python file of an input):
they must find exactly what Python's bytes patterns of the same text find, on any bytes
(hypothesis writes them from the tokens' pieces, digits, word characters and bytes past ASCII)."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from auditor import datafiles
from auditor.facts import names

RAW = datafiles.read_json("predicate-names.json")
PATTERNS = {
    "tokens": "|".join(RAW["tokens"]),
    "relevant": "|".join(RAW["tokens"] + RAW["toolkit"]["tokens"]),
}
PIECES = st.sampled_from(
    [b"is_sm", b"is_sm_", b"sm_", b"compute_", b"capability", b"Capability", b"version.cuda", b"version", b".cuda"]
    + [b"cuda", b"1", b"0", b"9", b"_", b"a", b"Z", b" ", b"\n", b".", b"\xff", b"\xc3\xa9", b"\x00", b"\xe2\x82"]
)
DATA = st.lists(PIECES, max_size=40).map(b"".join)


@settings(max_examples=800, deadline=None)
@given(DATA)
def test_the_re2_patterns_match_where_pythons_do(data: bytes):
    table = names.table()
    for field, text in PATTERNS.items():
        python = [m.span() for m in re.compile(text.encode()).finditer(data)]
        assert [m.span() for m in getattr(table, field).finditer(data)] == python, field
