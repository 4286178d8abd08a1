"""Statements in call mode: live paths only, what an arch-dependent branch decides tainted, and
the steps shared with scan mode (where branches meet, where a loop body starts)."""

from __future__ import annotations

import textwrap

import pytest

from auditor.python.core import FUEL, State
from auditor.python.values import UNKNOWN, val
from tests.python.program import interp, program, value

HEAD = "import torch\nmajor = torch.cuda.get_device_capability()[0]\n"


def returns(body: str, cap: str = "9.0"):
    """What ``f()`` returns on ``cap``."""
    prog = program(**{"m.py": HEAD + "def f():\n" + textwrap.indent(textwrap.dedent(body), "    ") + "R = f()\n"})
    return value(interp(prog), prog.by_path["m.py"], "R", cap=cap)


BRANCH = """
if major >= 9:
    x = "new"
else:
    x = "old"
return x
"""


def test_only_the_live_branch_runs_and_the_choice_taints_the_result():
    assert returns(BRANCH, "9.0").elems == {"new"}
    old = returns(BRANCH, "8.0")
    assert old.elems == {"old"}
    assert old.taint is not None  # literals, but chosen by the arch


def test_a_raise_or_failed_assert_ends_the_path():
    assert returns("if major < 9:\n    raise RuntimeError\nreturn 1\n", "8.0").elems == frozenset()
    assert returns("assert major >= 9\nreturn 1\n", "8.0").elems == frozenset()
    assert returns("assert major >= 9\nreturn 1\n", "9.0").elems == {1}


def test_falling_off_the_end_returns_none():
    assert returns("if major >= 9:\n    return True\n", "8.0").elems == {None}


def test_what_a_loop_body_assigns_is_unknown_after_it():
    v = returns("n = 0\nfor i in (1, 2):\n    n = n + i\nreturn n\n")
    assert UNKNOWN in v.elems


def test_a_handler_starts_where_the_try_began_or_anywhere_in_it():
    v = returns("ok = None\ntry:\n    ok = True\n    g()\nexcept Exception:\n    return ok\nreturn 'done'\n")
    assert v.elems == {None, True, "done"}


def test_with_match_and_else_of_a_loop():
    assert returns("with open(p) as fh:\n    y = 2\nreturn y\n").elems == {2}
    # case patterns are not matched: any case may run
    assert returns("match major:\n    case 9:\n        y = 'h'\n    case _:\n        y = 'o'\nreturn y\n").elems == {
        "h",
        "o",
    }
    assert returns("while False:\n    pass\nelse:\n    return 'else'\n").elems == {"else"}


def test_a_long_body_runs_out_of_fuel():
    body = "x = 1\n" * (FUEL + 1) + "return x\n"
    assert returns(body).elems == {UNKNOWN}
    assert returns("x = 1\n" * 10 + "return x\n").elems == {1}


def test_where_branches_meet_the_live_ones_are_joined():
    it = interp(program(**{"m.py": ""}))
    a, b = val(1), val(2)
    joined = it.join_states([State({"x": a}, True), State({"x": b}, True), State({"x": val(3)}, False)])
    assert joined.live and joined.env["x"].elems == {1, 2}
    dead = it.join_states([State({"x": a}, False), State({"x": b}, False)])
    assert not dead.live and dead.env["x"].elems == {1, 2}  # in dead code, all of them


SUPPORTED = """
import torch

def _v3():
    return torch.cuda.get_device_capability()[0] == 9

def _v4():
    return torch.cuda.get_device_capability()[0] in (9, 10, 11)

def supported(v):
    if v == 2:
        return True
    elif v == 3:
        return _v3()
    elif v == 4:
        return _v4()
    raise ValueError(v)

def chosen(override):
    major = torch.cuda.get_device_capability()[0]
    v = 3 if major == 9 else 4 if major == 10 else 2
    if override is not None:
        v = override
    CHECK
    return v

R = chosen(OVERRIDE)
"""


@pytest.mark.parametrize("check", ["assert supported(v)", "if not supported(v):\\n        raise RuntimeError(v)"])
@pytest.mark.parametrize(
    ("override", "cap", "expected"),
    [
        ("None", "12.0", {2}),
        ("4", "12.0", set()),  # 4 is not supported there: the path fails
        ("4", "10.0", {4}),
        ("unknown_override()", "12.0", {2}),  # an unknown override is only ever a supported version
        ("unknown_override()", "9.0", {2, 3, 4}),
    ],
)
def test_a_checked_value_keeps_only_what_passes_the_check(check, override, cap, expected):
    text = SUPPORTED.replace("CHECK", check.replace("\\n", "\n")).replace("OVERRIDE", override)
    prog = program(**{"m.py": text})
    assert value(interp(prog), prog.by_path["m.py"], "R", cap=cap).elems == expected


def test_an_unchecked_unknown_stays_unknown():
    text = SUPPORTED.replace("CHECK", "pass").replace("OVERRIDE", "unknown_override()")
    prog = program(**{"m.py": text})
    assert UNKNOWN in value(interp(prog), prog.by_path["m.py"], "R", cap="12.0").elems


RUNNER = """\
import torch


class Runner:
    def __init__(self, device):
        arch = torch.cuda.get_device_capability(device)
        self._supports_tc = arch in ((10, 0), (10, 3))
        if not self._supports_tc and arch not in ((8, 0), (9, 0), (12, 0)):
            raise NotImplementedError("requires SM80, SM90, SM100, SM103 or SM120")
        self.ready = True
"""


def test_a_flag_a_method_sets_on_its_instance_is_known_at_its_later_tests():
    """``self._supports_tc = arch in (…)`` then ``if not self._supports_tc and …: raise``: the
    rejection is certain on 12.1, as it would be with a local."""
    from tests.conftest import audit_texts

    gates, _ = audit_texts({"pkg/runner.py": RUNNER})
    (check,) = [g for g in gates if g.line == 8]
    assert "12.1" in check.surely and "12.0" not in check.surely and "10.0" not in check.surely
