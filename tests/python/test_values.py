"""The abstract domain: sets of concrete values with a taint, under Python's own semantics."""

from __future__ import annotations

from auditor.model import GateKind, ResolvedBy
from auditor.python.values import (
    ANY,
    BOOL,
    FALSY,
    MAX_ELEMS,
    NOTHING,
    TRUTHY,
    UNKNOWN,
    Cap,
    Val,
    binary,
    bool_and,
    bool_not,
    bool_or,
    capability,
    compare,
    is_boolish,
    items_of,
    join,
    make,
    pick,
    product,
    taint,
    truth,
    val,
)

T = taint(GateKind.CAPABILITY_COMPARE, ResolvedBy.LITERAL)


def test_comparison_is_taken_element_by_element():
    assert compare(">=", val(8, 9, 10), val(9)).elems == {True, False}
    assert compare(">=", val(9, 10), val(9)).elems == {True}


def test_an_element_that_raises_drops_out():
    # (8, 0) <= (None, None) raises in Python: that path contributes nothing
    assert compare("<=", val((8, 0)), val((None, None))).elems == frozenset()
    assert binary("//", val(1, 2), val(0, 1)).elems == {1, 2}


def test_opaque_operands_compare_either_way():
    assert compare("==", ANY, val(3)).elems == {True, False}
    assert compare("==", val((UNKNOWN, 128)), val((128, 128))).elems == {True, False}


def test_a_capability_is_never_none_and_that_is_not_about_the_arch():
    # the audited device is a CUDA device: its capability query never returns None (#17)
    v = compare("is", val(Cap((9, 0)), taint=T), val(None))
    assert v.elems == {False}
    assert v.taint is None
    assert compare("is not", val(Cap((9, 0)), taint=T), val(None)).elems == {True}
    assert compare("is", ANY, val(None)).elems == {True, False}


def test_taint_survives_operations():
    v = compare(">=", val(Cap((9, 0)), taint=T), val((9, 0)))
    assert v.elems == {True}
    assert v.taint is not None and GateKind.CAPABILITY_COMPARE in v.taint.kinds


def test_short_circuit_evaluates_the_right_side_only_when_needed():
    called = []

    def right() -> Val:
        called.append(True)
        return val(7)

    assert bool_and(val(0), right).elems == {0}
    assert not called
    assert bool_or(val(0), right).elems == {7}
    assert called


def test_unknown_truth_is_kept_as_truthy_or_falsy():
    assert bool_or(ANY, lambda: val(False)).elems == {TRUTHY, False}
    assert truth(val(TRUTHY)) == {True}
    assert truth(val(FALSY)) == {False}
    assert bool_not(BOOL).elems == {True, False}


def test_too_many_possibilities_become_unknown():
    assert make(range(MAX_ELEMS)).elems != ANY.elems
    assert make(range(MAX_ELEMS + 1)).elems == ANY.elems
    assert product([val(*range(5)), val(*range(5)), val(*range(5))]).elems == ANY.elems


def test_join_unions_elements_and_taints():
    v = join(val(1), val(2, taint=T), NOTHING)
    assert v.elems == {1, 2} and v.taint == T


def test_destructuring_follows_the_assignment_path():
    v = val((1, (2, 3)), (4, (5, 6)))
    assert pick(v, (1, 0)).elems == {2, 5}
    assert pick(val((1,)), (3,)).elems == frozenset()  # too short to unpack: that path raises
    assert pick(ANY, (0,)).elems == {UNKNOWN}


def test_items_of_a_small_known_sequence():
    items = items_of(val((1, 2, 3)))
    assert items is not None and [i.only() for i in items] == [1, 2, 3]
    assert items_of(val((1,), (2,))) is None
    assert items_of(val(tuple(range(100)))) is None


def test_truth_valued_values():
    assert is_boolish(val(True, None))
    assert not is_boolish(val(None))
    assert not is_boolish(val(1))


def test_capability_from_label():
    assert capability("12.1") == Cap((12, 1))
    assert capability("12.1") == (12, 1)
