"""Valid Python that tree-sitter-python cannot parse: found by Python's own parser, and stood in for.

tree-sitter-python lags the language in a few places (docs/python.md lists the ones known,
such as ``return a, *b``); where it reports an error, the statement that holds it is given to
:func:`ast.parse` alone (parsed, never compiled or run). If Python accepts the statement, it is
replaced in the bytes by a stand-in of the same length and lines that keeps what the walk
needs from it (a ``return`` still ends its path, a ``raise`` still raises), and the file is
parsed again: the rest of the file, the function around the statement included, is read as
written. A statement Python rejects too is a real syntax error, reported as before.
"""

from __future__ import annotations

import ast
import warnings
from collections.abc import Callable

from tree_sitter import Node, Tree

MAX_REPAIRS = 64
"""Statements stood in for per file: past that, the file is read as tree-sitter parsed it."""
_STATEMENT_PARENTS = ("module", "block")


def readable(
    data: bytes, parse: Callable[[bytes], Tree], first_error: Callable[[Node, bytes], Node | None]
) -> tuple[bytes, Tree, Node | None]:
    """The bytes to read (``data``, with stand-ins for valid statements tree-sitter rejects), their
    tree, and the first error left (a statement Python rejects too), or None."""
    tree = parse(data)
    repaired: set[int] = set()
    for _ in range(MAX_REPAIRS):
        err = first_error(tree.root_node, data)
        if err is None:
            return data, tree, None
        rows = dict.fromkeys((err.start_point[0], _first_row(err)))  # its own line first: a
        # compound statement around it (the ``def``) is kept when the line alone is a statement
        found = next((f for f in (_statement_lines(data, r) for r in rows) if f is not None), None)
        if found is None or found[0] in repaired:
            break  # Python rejects it too, or the stand-in did not help
        start, end, stand_in = found
        repaired.add(start)
        data = data[:start] + stand_in + data[end:]
        tree = parse(data)
    return data, tree, first_error(tree.root_node, data)


MAX_LINES = 200
"""Lines one statement Python is asked about may span."""
_CONTINUES = (b"else", b"elif", b"except", b"finally", b"case")
"""Clauses that continue the statement above them."""


def _first_row(err: Node) -> int:
    """The first line of the statement an error lies in: the statement that holds it, or the
    one it interrupts on the same line (``PAIR = 1, *[2]``: tree-sitter ends the assignment at
    ``1`` and starts an error at ``*``)."""
    node = err
    while node.parent is not None and node.parent.type not in _STATEMENT_PARENTS:
        node = node.parent
    before = node.prev_named_sibling
    if before is not None and before.end_point[0] == err.start_point[0]:
        return before.start_point[0]
    return node.start_point[0]


def _statement_lines(data: bytes, row: int) -> tuple[int, int, bytes] | None:
    """From line ``row``: the fewest whole lines Python reads as complete statements, with the
    next line starting a statement of its own (their byte range and stand-in); None if none."""
    lines = data.split(b"\n")
    start = sum(len(line) + 1 for line in lines[:row])
    first = lines[row] if row < len(lines) else b""
    indent = len(first) - len(first.lstrip(b" \t"))
    end = start
    for i in range(row, min(len(lines), row + MAX_LINES)):
        end += len(lines[i]) + (1 if i > row else 0)
        rest = next((lines[j] for j in range(i + 1, len(lines)) if _starts_code(lines[j])), None)
        if rest is not None:
            rest_indent = len(rest) - len(rest.lstrip(b" \t"))
            if rest_indent > indent or (rest_indent == indent and rest.lstrip().startswith(_CONTINUES)):
                continue
        stand_in = _stand_in(data[start:end])
        if stand_in is not None:
            return start, end, stand_in
    return None


def _starts_code(line: bytes) -> bool:
    stripped = line.strip()
    return bool(stripped) and not stripped.startswith(b"#")


def _stand_in(segment: bytes) -> bytes | None:
    """Bytes as long as ``segment``, newlines in place, holding one simple statement of the same
    effect on the control flow; None when Python does not accept ``segment`` either."""
    try:
        text = segment.decode("utf-8")
        indent = text[: len(text) - len(text.lstrip(" \t"))]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # SyntaxWarning on odd escapes: still valid
            # an indented statement is read as the body of an ``if`` (not dedented: lines inside
            # brackets may sit at any indentation)
            body = ast.parse(f"if 1:\n{text}" if indent else text).body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    if indent and body:
        body = body[0].body  # type: ignore[attr-defined]
    if not body:
        return None
    last = body[-1]
    word = "return" if isinstance(last, ast.Return) else "raise" if isinstance(last, ast.Raise) else "pass"
    first_line = segment.split(b"\n", 1)[0]
    code = f"{indent}{word}".encode()
    if len(code) > len(first_line):
        return None
    out = bytearray(b" " * len(segment))
    out[: len(code)] = code
    for i, byte in enumerate(segment):
        if byte in b"\n\r":
            out[i] = byte
    return bytes(out)
