"""Byte scans over every file of the input search only the lines that can match: they must find
exactly what their regex finds over the whole file (hypothesis writes the files from the pieces
that matter: quotes, dots, extensions, import and main words, parentheses and newlines). A
name's calls are looked for in a syntax tree only where a byte search says one may be: that
search must find every call the tree holds."""

from __future__ import annotations

import ast

from hypothesis import given, settings
from hypothesis import strategies as st

from auditor.facts import binaries
from auditor.facts.code import line_matches
from auditor.pipeline import arguments, builds, reach

PIECES = st.sampled_from(
    [
        b"import",
        b"from",
        b" ",
        b"\t",
        b"\n",
        b"(",
        b")",
        b"'",
        b'"',
        b".",
        b"cu",
        b"cpp",
        b"c",
        b"x",
        b"a.b",
        b"#",
        b",",
        b'.cu"',
        b"'k.c'",
        b"import (a,",
        b"int main(",
        b"void ",
        b"main",
    ]
)
FILES = st.lists(PIECES, max_size=60).map(b"".join)


@settings(max_examples=600, deadline=None)
@given(FILES)
def test_line_matches_are_those_the_regex_finds(data: bytes):
    for pattern, word in ((binaries._IMPORTS, b"import"), (reach._MAIN, b"main")):
        assert [m.span() for m in line_matches(pattern, data, word)] == [m.span() for m in pattern.finditer(data)]


@settings(max_examples=600, deadline=None)
@given(FILES)
def test_source_names_are_those_the_regex_finds(data: bytes):
    found = [(data.count(b"\n", 0, m.start()) + 1, m.group(1).decode()) for m in builds._SOURCE.finditer(data)]
    assert builds._sources_named(data) == found


def test_the_scans_find_what_a_package_writes():
    text = b'from a.b import (c,\n  d)  # import e\nx = "k/moe.cu"; y = f"{n}_sm90.cpp"\n  import f.g as h\n'
    assert [m.group(0) for m in line_matches(binaries._IMPORTS, text, b"import")] == [
        b"from a.b import (c,\n  d)",
        b"  import f.g as h",
    ]
    assert builds._sources_named(text) == [(3, "k/moe.cu"), (3, "{n}_sm90.cpp")]


GAPS = st.lists(
    st.sampled_from([" ", "\t", "\n", "\r\n", "\r", "\\\n", "# c\n", "# (x) # y\r\n", "#\r"]), max_size=6
).map("".join)
"""What may stand between a name and the parenthesis of its call inside brackets."""


@settings(max_examples=600, deadline=None)
@given(GAPS, GAPS, st.sampled_from(["f", "m.f", "(m).f", "g(f)"]))
def test_every_call_of_a_name_is_found_where_the_tree_has_one(before: str, gap: str, callee: str):
    source = f"x = ({before}{callee}{gap}(1,\n 2){before})\n"
    calls = [n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Call)]
    named = [c for c in calls if getattr(c.func, "id", getattr(c.func, "attr", "")) == "f"]
    assert bool(named) == (callee != "g(f)")
    assert not named or arguments._call_of(b"f").search(source.encode())


def test_a_name_with_no_parenthesis_after_it_is_not_parsed_for_calls():
    assert not arguments._call_of(b"f").search(b"x = f  # f\ny = [f], f.g\n")
