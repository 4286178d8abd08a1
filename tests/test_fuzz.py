"""Fuzzed evaluators: generated conditions, answered by archaudit and by an independent judge.

Preprocessor: hypothesis writes files of nested ``#if/#ifdef/#ifndef/#elif/#else`` groups whose
conditions use the arch macros, ``defined``, every operator (alternative tokens too), integer
literals in every base and suffix, character constants, ``?:`` and the comma operator. Each
branch's admitted set from archaudit (directive scanner, branch structure, three-valued
evaluator) must equal the set of targets on which g++'s preprocessor keeps the branch, given
exactly the macros nvcc defines for each target. One g++ run per example covers every target:
the example's file is repeated once per target between ``#define``s and ``#undef``s.

Python: conditions on ``major, minor = torch.cuda.get_device_capability()`` (comparisons,
tuples, chains, membership, indexing, arithmetic, ``and/or/not``, ``x if c else y``, in
``if/elif/else`` chains); each gate's ``admits`` must equal the capabilities on which Python's
own ``eval`` of the branch's effective condition is true.

``ARCHAUDIT_FUZZ_EXAMPLES`` sets the number of examples per test (default 200, the "ci"
settings profile); docs/testing.md has the long-run command.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from auditor import arch
from auditor.cuda import cexpr
from auditor.cuda.directives import scan
from auditor.cuda.macros import Evaluator, MacroTable
from auditor.cuda.structure import structure
from auditor.model import SourceFile
from auditor.python import extract as python_gates

GXX = shutil.which("g++")
EXAMPLES = int(os.environ.get("ARCHAUDIT_FUZZ_EXAMPLES", "200"))
settings.register_profile(
    "ci",
    max_examples=EXAMPLES,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)
CI = settings.get_profile("ci")

TARGETS = arch.target_order()
MACROS = arch.target_macros()
ARCH_NAMES = sorted({n for m in MACROS.values() for n in m}) + [
    "__CUDA_ARCH_FEAT_SM89_ALL",
    "__CUDA_ARCH_FEAT_SM130_ALL",
]  # arch-looking, defined nowhere
NUMBERS = [
    0,
    1,
    2,
    3,
    7,
    10,
    63,
    64,
    65,
    100,
    750,
    800,
    860,
    870,
    880,
    890,
    900,
    1000,
    1030,
    1100,
    1200,
    1210,
    1300,
    2**31 - 1,
    2**31,
    2**32,
    2**63 - 1,
    2**63,
    2**64 - 1,
]
SUFFIXES = ["", "", "", "u", "U", "l", "L", "ul", "UL", "lu", "LU", "ll", "LL", "ull", "ULL", "llu", "LLU"]
CHARS = ["'A'", "'0'", "'\\n'", "'\\0'", "'\\377'", "'\\x7f'", "'\\x80'", "'ab'", "'\\''", "L'\\xff'", "'\\e'"]
UNARY = ["!", "~", "-", "+", "not", "compl"]
BINARY = [
    "*",
    "/",
    "%",
    "+",
    "-",
    "<<",
    ">>",
    "<",
    ">",
    "<=",
    ">=",
    "==",
    "!=",
    "&",
    "^",
    "|",
    "&&",
    "||",
    "and",
    "or",
    "bitand",
    "bitor",
    "xor",
    "not_eq",
]


# --- C preprocessor conditions -----------------------------------------------------------------


def _separated(digits: str, draw) -> str:
    """Digit separators (C++14) between some digits."""
    if len(digits) < 2 or not draw(st.booleans()):
        return digits
    cut = draw(st.integers(1, len(digits) - 1))
    return digits[:cut] + "'" + digits[cut:]


@st.composite
def number(draw) -> str:
    value = draw(st.sampled_from(NUMBERS) | st.integers(0, 2000))
    base = draw(st.sampled_from(["dec", "dec", "hex", "HEX", "oct", "bin"]))
    if base == "dec":
        text = _separated(str(value), draw)
    elif base in ("hex", "HEX"):
        digits = f"{value:x}" if base == "hex" else f"{value:X}"
        text = draw(st.sampled_from(["0x", "0X"])) + _separated(digits, draw)
    elif base == "oct":
        text = "0" + _separated(f"{value:o}", draw) if value else "0"
    else:
        text = "0b" + _separated(f"{value:b}", draw)
    return text + draw(st.sampled_from(SUFFIXES))


@st.composite
def atom(draw) -> str:
    kind = draw(st.sampled_from(["macro", "macro", "macro", "defined", "number", "number", "char", "bool"]))
    if kind == "macro":
        return draw(st.sampled_from(ARCH_NAMES))
    if kind == "defined":
        name = draw(st.sampled_from(ARCH_NAMES))
        return draw(st.sampled_from([f"defined({name})", f"defined {name}", f"defined ( {name} )"]))
    if kind == "number":
        return draw(number())
    if kind == "char":
        return draw(st.sampled_from(CHARS))
    return draw(st.sampled_from(["true", "false"]))


def _combine(children):
    @st.composite
    def build(draw) -> str:
        shape = draw(st.sampled_from(["unary", "binary", "binary", "binary", "ternary", "divide", "comma", "paren"]))
        if shape == "unary":
            return f"{draw(st.sampled_from(UNARY))} {draw(children)}"
        if shape == "paren":
            return f"({draw(children)})"
        if shape == "ternary":
            return f"({draw(children)} ? {draw(children)} : {draw(children)})"
        if shape == "comma":
            return f"({draw(children)}, {draw(children)})"
        left, right = draw(children), draw(children)
        if shape == "divide":  # never by zero: a divisor with its low bit set
            return f"({left} {draw(st.sampled_from(['/', '%']))} (({right}) | 1))"
        op = draw(st.sampled_from([b for b in BINARY if b not in ("/", "%")]))
        return f"({left} {op} {right})" if draw(st.booleans()) else f"{left} {op} {right}"

    return build()


CONDITION = st.recursive(atom(), _combine, max_leaves=10)


@dataclass
class Group:
    """``#if`` ... ``#endif``: each branch is (keyword, condition, nested groups)."""

    branches: list[tuple[str, str, list[Group]]] = field(default_factory=list)


@st.composite
def group(draw, depth: int = 0) -> Group:
    n_elif = draw(st.integers(0, 2))
    opener = draw(st.sampled_from(["if", "if", "if", "ifdef", "ifndef"]))
    keywords = [opener] + [
        draw(st.sampled_from(["elif", "elif", "elif", "elifdef", "elifndef"])) for _ in range(n_elif)
    ]
    if draw(st.booleans()):
        keywords.append("else")
    g = Group()
    for kw in keywords:
        if kw in ("if", "elif"):
            cond = draw(CONDITION)
        elif kw == "else":
            cond = ""
        else:
            cond = draw(st.sampled_from(ARCH_NAMES))
        nested = draw(st.lists(group(depth + 1), max_size=2 - depth)) if depth < 2 else []
        g.branches.append((kw, cond, nested))
    return g


@st.composite
def layout(draw, keyword: str, cond: str) -> tuple[list[str], int]:
    """How a directive is written (spacing, comments, continuation lines): its physical lines."""
    hash_ = draw(st.sampled_from(["#", "#", "# ", "  #  ", "\t#"]))
    comment = draw(st.sampled_from(["", "", " // trailing", " /* block */", " /* two\n   lines */"]))
    if cond and draw(st.booleans()) and " " in cond:
        spaces = [i for i, c in enumerate(cond) if c == " "]
        cut = draw(st.sampled_from(spaces))
        cond = cond[:cut] + " \\\n   " + cond[cut + 1 :]
    text = f"{hash_}{keyword}{' ' if cond else ''}{cond}{comment}"
    lines = text.split("\n")
    return lines, len(lines)


@st.composite
def source(draw) -> tuple[str, list[int]]:
    """A file of groups; returns its text and the first line of every branch opener."""
    lines: list[str] = []
    openers: list[tuple[int, int]] = []  # (first line, last line) of each branch directive

    def emit(g: Group) -> None:
        for kw, cond, nested in g.branches:
            written, n = draw(layout(kw, cond))
            first = len(lines) + 1
            lines.extend(written)
            openers.append((first, first + n - 1))
            lines.append("int body;")
            for inner in nested:
                emit(inner)
        lines.append(draw(st.sampled_from(["#endif", "# endif", "#endif // done"])))

    for g in draw(st.lists(group(), min_size=1, max_size=3)):
        emit(g)
        lines.append("")
    return "\n".join(lines) + "\n", openers


def gxx_admitted(text: str, openers: list[tuple[int, int]]) -> dict[int, set[str]]:
    """First line of each branch -> the targets on which g++ keeps it (one g++ run, every target)."""
    src_lines = text.split("\n")
    after = {last: first for first, last in openers}
    unit: list[str] = []
    for ti, target in enumerate(TARGETS):
        unit += [f"#define {k} {v}" for k, v in MACROS[target].items()]
        for number, line in enumerate(src_lines, 1):
            unit.append(line)
            if number in after:
                unit.append(f"@@T{ti}_L{after[number]}")
        unit += [f"#undef {k}" for k in MACROS[target]]
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "fuzz.cpp")
        with open(path, "w") as fh:
            fh.write("\n".join(unit) + "\n")
        proc = subprocess.run(
            [GXX, "-E", "-P", "-undef", "-std=gnu++23", "-x", "c++", path], capture_output=True, text=True
        )
    errors = [ln for ln in proc.stderr.splitlines() if "error" in ln]
    assert proc.returncode == 0 and not errors, "g++ rejected the generated file:\n" + proc.stderr[:2000] + text
    out: dict[int, set[str]] = {first: set() for first, _ in openers}
    for m in re.finditer(r"@@T(\d+)_L(\d+)", proc.stdout):
        out[int(m.group(2))].add(TARGETS[int(m.group(1))])
    return out


def archaudit_admitted(text: str) -> dict[int, set[str]]:
    """First line of each branch -> the targets on which archaudit says it may be compiled."""
    evaluator = Evaluator(MacroTable())
    out = {}
    for b in structure(scan(text), text.count("\n") + 1).branches:
        reach, unknowns, derived = evaluator.effective(b.inherited + b.local)
        assert not unknowns and not derived
        assert None not in reach, f"line {b.line}: undecided on {[t for t, r in zip(TARGETS, reach) if r is None]}"
        out[b.line] = {t for t, r in zip(TARGETS, reach) if r}
    return out


@pytest.mark.skipif(GXX is None, reason="needs g++ as the oracle")
@settings(CI)
@given(source())
def test_preprocessor_agrees_with_gxx(generated):
    text, openers = generated
    truth = gxx_admitted(text, openers)
    ours = archaudit_admitted(text)
    assert set(ours) == set(truth), text
    wrong = {line: sorted(ours[line] ^ truth[line]) for line in truth if ours[line] != truth[line]}
    assert not wrong, f"disagreements (line: targets): {wrong}\n{text}"


@settings(CI)
@given(CONDITION)
def test_condition_text_round_trips_through_the_parser(cond):
    """Every generated condition parses, and names only arch macros."""
    node = cexpr.parse(cond)
    assert all(n in ARCH_NAMES for n in cexpr.identifiers(node))


# Disagreements the fuzzer found, kept as known answers (each was a bug in auditor/cexpr.py).
REGRESSIONS = [
    ("(1 ? -1 : 0u) > 0", True),  # ?: has the common type of both arms: unsigned here
    ("(0 ? 0u : -1) > 0", True),
    ("(__CUDA_ARCH__ ? 1 : 0u) - 2 > 0", True),
    ("(1 << 64) == 0", True),  # a shift by 64 or more: 0, as GCC computes it
    ("(1 << -1) == 0", True),  # a negative count shifts the other way
    ("(-8 >> 100) == -1", True),
    ("(-8 << -1) == -4", True),
    ("(1u << 63 >> 63) == 1", True),
    ("'\\377' < 0 && '\\x41' == 65 && 'ab' == 24930 && L'\\xff' == 255", True),  # escapes, multi-char
    ("(1, __CUDA_ARCH__ >= 900)", None),  # the comma operator: g++ accepts it
]


@pytest.mark.parametrize("cond,host_value", REGRESSIONS)
def test_regressions_match_gxx(cond, host_value, tmp_path):
    ev = Evaluator(MacroTable()).evaluate(cond)
    assert None not in ev.values
    if host_value is not None:
        assert ev.values[0] is host_value
    if GXX is not None:
        text = f"#if {cond}\nint x;\n#endif\n"
        truth = gxx_admitted(text, [(1, 1)])[1]
        assert {t for t, v in zip(TARGETS, ev.values) if v} == truth


# --- Python capability conditions --------------------------------------------------------------

CAPS = [tuple(int(p) for p in c.split(".")) for c in arch.capabilities()]


@st.composite
def scalar(draw) -> str:
    base = draw(st.sampled_from(["major", "minor", "cap[0]", "cap[1]", "major", "minor"]))
    shape = draw(st.sampled_from(["plain", "plain", "plain", "scaled", "shift"]))
    if shape == "scaled":
        other = "minor" if base in ("major", "cap[0]") else "major"
        return f"{base} * 10 + {other}" if base in ("major", "cap[0]") else f"{other} * 10 + {base}"
    if shape == "shift":
        return f"{base} {draw(st.sampled_from(['+', '-']))} {draw(st.integers(0, 3))}"
    return base


@st.composite
def comparison(draw) -> str:
    shape = draw(st.sampled_from(["cmp", "cmp", "cmp", "rcmp", "tuple", "chain", "in", "tuple_in", "truthy"]))
    op = draw(st.sampled_from(["<", "<=", ">", ">=", "==", "!="]))
    if shape in ("cmp", "rcmp"):
        s = draw(scalar())
        k = draw(st.integers(0, 13)) if "* 10" not in s else draw(st.sampled_from([70, 80, 86, 89, 90, 100, 120, 121]))
        return f"{s} {op} {k}" if shape == "cmp" else f"{k} {op} {s}"
    if shape == "tuple":
        left = draw(st.sampled_from(["(major, minor)", "cap", "torch.cuda.get_device_capability()"]))
        return f"{left} {op} ({draw(st.integers(7, 13))}, {draw(st.integers(0, 3))})"
    if shape == "chain":
        lo, hi = sorted(draw(st.lists(st.integers(6, 13), min_size=2, max_size=2)))
        return f"{lo} {draw(st.sampled_from(['<', '<=']))} major {draw(st.sampled_from(['<', '<=']))} {hi}"
    if shape == "in":
        values = draw(st.lists(st.integers(7, 13), min_size=1, max_size=3, unique=True))
        neg = draw(st.sampled_from(["in", "not in"]))
        return f"major {neg} {tuple(values) if len(values) > 1 else f'({values[0]},)'}"
    if shape == "tuple_in":
        values = draw(st.lists(st.sampled_from(CAPS), min_size=1, max_size=3, unique=True))
        return f"(major, minor) in {values}"
    return draw(st.sampled_from(["minor", "not minor", "major - 12"]))


PY_CONDITION = st.recursive(
    comparison(),
    lambda children: st.one_of(
        st.tuples(children, children).map(lambda p: f"({p[0]} and {p[1]})"),
        st.tuples(children, children).map(lambda p: f"({p[0]} or {p[1]})"),
        children.map(lambda c: f"not ({c})"),
        st.tuples(children, children, children).map(lambda p: f"({p[0]} if {p[1]} else {p[2]})"),
    ),
    max_leaves=5,
)

PY_HEADER = (
    "import torch\nmajor, minor = torch.cuda.get_device_capability()\ncap = torch.cuda.get_device_capability()\n"
)


def _truth(cond: str) -> list[str]:
    def names(c):
        return {"major": c[0], "minor": c[1], "cap": c, "torch": _Torch(c)}

    return [f"{c[0]}.{c[1]}" for c in CAPS if eval(cond, names(c))]  # noqa: S307 - generated here


class _Torch:
    """Just enough of ``torch`` for ``torch.cuda.get_device_capability()`` under eval."""

    def __init__(self, cap):
        self.cuda = type("cuda", (), {"get_device_capability": staticmethod(lambda *a: cap)})


@settings(CI)
@given(st.lists(PY_CONDITION, min_size=1, max_size=3), st.booleans())
def test_python_conditions_agree_with_eval(conditions, with_else):
    lines = PY_HEADER.splitlines()
    expected: dict[int, list[str]] = {}
    earlier: list[str] = []
    for i, cond in enumerate(conditions):
        lines.append(f"{'if' if i == 0 else 'elif'} {cond}:")
        effective = " and ".join([f"not ({c})" for c in earlier] + [f"({cond})"])
        expected[len(lines)] = _truth(effective)
        lines.append(f"    x = {i}")
        earlier.append(cond)
    if with_else:
        lines.append("else:")
        expected[len(lines)] = _truth(" and ".join(f"not ({c})" for c in earlier))
        lines.append("    x = -1")
    text = "\n".join(lines) + "\n"
    gates, errors = python_gates.extract([SourceFile("fuzz.py", text.encode(), "python")])
    assert errors == []
    got = {g.line: list(g.admits) for g in gates}
    assert set(got) <= set(expected), text
    # A branch taken on every capability restricts nothing: it may be left out of the gates.
    everything = [f"{c[0]}.{c[1]}" for c in CAPS]
    assert {line: got.get(line, everything) for line in expected} == expected, text
