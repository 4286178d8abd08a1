"""Expressions evaluated to sets of values, one capability at a time."""

from __future__ import annotations

from auditor.model import GateKind
from auditor.python.values import ANY, Func
from tests.python.program import expression


def test_literals_and_arithmetic():
    assert expression("1_000 + 0x10").only() == 1016
    assert expression("-(3 * 4) // 5").only() == -3
    assert expression("(1, 2) + (3,)").only() == (1, 2, 3)
    assert expression("{3, 1}").only() == frozenset({1, 3})
    assert expression("{'a': x}", prelude="x = f()") == ANY  # a value not written out


def test_a_dict_of_constants_is_read_by_key():
    table = "T = {'is_sm100': 'is_sm100_supported', (12, 0): 'sm120'}"
    assert expression("T.get('is_sm100')", prelude=table).only() == "is_sm100_supported"
    assert expression("T.get('nope') or 'x'", prelude=table).only() == "x"
    assert expression("T[(12, 0)]", prelude=table).only() == "sm120"
    assert expression("(12, 0) in T", prelude=table).only() is True
    assert expression("'is_sm90' not in T", prelude=table).only() is True
    assert expression("'a' in {}").only() is False  # an empty cache: its misses run the real work


def test_strings():
    assert expression("'sm_' + '90a'").only() == "sm_90a"
    assert expression("f'{9}.{0}'").only() == "9.0"
    assert expression("'a' 'b'").only() == "ab"
    assert expression(r"'\x41'").only() == "A"
    assert expression(r"r'\x41'").only() == r"\x41"
    assert expression("b'x'") == ANY


def test_chained_comparison():
    assert expression("1 < 2 < 3").only() is True
    assert expression("1 < 3 < 2").only() is False


def test_subscripts_and_slices():
    assert expression("(7, 8, 9)[1]").only() == 8
    assert expression("'sm_90a'[3:5]").only() == "90"
    assert expression("(1, 2)[5]").elems == frozenset()  # raises: no value


def test_conditional_expression_follows_the_condition():
    assert expression("'a' if x else 'b'", prelude="x = 0").only() == "b"
    assert expression("'a' if x else 'b'", prelude="x = f()").elems == {"a", "b"}


def test_comprehension_over_a_known_sequence():
    assert expression("[i * 10 for i in (8, 9) if i > 8]").only() == (90,)
    assert expression("[i for i in xs]", prelude="xs = g()") == ANY


def test_builtins_and_str_methods():
    assert expression("max(len('abc'), 2)").only() == 3
    assert expression("'SM90'.lower().startswith('sm')").only() is True
    assert expression("tuple(range(3))").only() == (0, 1, 2)


def test_the_capability_read_through_a_platform_api():
    v = expression("torch.cuda.get_device_capability() >= (9, 0)", cap="8.0", prelude="import torch")
    assert v.only() is False
    assert v.taint is not None and v.taint.kinds == {GateKind.CAPABILITY_COMPARE}
    assert expression("torch.cuda.get_device_capability()[0]", cap="12.1", prelude="import torch").only() == 12


def test_an_unknown_operand_that_may_decide_a_gate_is_noted():
    v = expression(
        "flag and major >= 9", prelude="import torch\nmajor = torch.cuda.get_device_capability()[0]\nflag = g()"
    )
    assert v.taint is not None and v.taint.unknowns == ("flag",)


def test_walrus_binds_in_the_frame():
    # at module level there are no locals: the value is still the assigned one
    assert expression("(n := 4) + 1").only() == 5


def test_await_is_its_operand_and_a_lambda_a_function():
    assert expression("await c", prelude="c = 3").only() == 3
    assert isinstance(expression("lambda: 1").only(), Func)
