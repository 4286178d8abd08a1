"""Valid Python that tree-sitter-python rejects is read: the statement is checked by Python's
own parser alone and stood in for, so the gates around it survive and the file is no error;
a statement Python rejects too stays a syntax error, and the rest of the file is still read."""

from __future__ import annotations

import ast

import pytest

from auditor.python import recover
from auditor.python.symbols import first_error, parser
from tests.python.test_python_gates import scanned


def gates_and_errors():
    gates, errors = scanned("recover")
    return {(g.file, g.line, g.expression) for g in gates}, {e.file: e.reason for e in errors}


def test_the_star_return_file_keeps_its_gate_and_is_no_error():
    gates, errors = gates_and_errors()
    assert ("star_return.py", 6, "torch.cuda.get_device_capability()[0] >= 9") in gates
    assert "star_return.py" not in errors


def test_gates_before_between_and_after_rejected_statements_survive():
    gates, errors = gates_and_errors()
    assert {(f, line) for f, line, _ in gates if f == "later.py"} == {("later.py", 13), ("later.py", 19)}
    assert "later.py" not in errors


def test_invalid_python_is_still_an_error_and_the_rest_is_read():
    gates, errors = gates_and_errors()
    assert errors == {"invalid.py": "python syntax error at line 8"}
    assert ("invalid.py", 5, "torch.cuda.get_device_capability()[0] == 9") in gates


@pytest.mark.parametrize(
    "source",
    [
        "def f(a, b):\n    return a, *(b)\n",
        "x = 1, *[2]\ny = 3\n",
        "def g(b):\n    yield 0, *(b)\n",
        "for x in 1, *(b):\n    y = (\n  x)\nz = 1\n",
        "import sys\nprint >> sys.stderr, 'shift'\n",
    ],
)
def test_known_tree_sitter_gaps_are_read_with_lines_and_bytes_in_place(source):
    data = source.encode()
    assert first_error(parser().parse(data).root_node, data) is not None  # the gap is real
    ast.parse(source)  # and it is valid Python
    fixed, tree, err = recover.readable(data, parser().parse, first_error)
    assert err is None and not tree.root_node.has_error
    assert len(fixed) == len(data) and [i for i, b in enumerate(fixed) if b == 10] == [
        i for i, b in enumerate(data) if b == 10
    ]


def test_a_return_stays_a_return():
    data = b"def f(a, b):\n    return a, *(b)\n"
    fixed, _, _ = recover.readable(data, parser().parse, first_error)
    assert fixed.split(b"\n")[1].strip() == b"return"
