"""C preprocessor conditions: parse ``#if`` expressions and evaluate them in three-valued logic.

A hand-written parser rather than tree-sitter: tree-sitter-cpp mis-parses alternative
tokens (``and``, ``not``, ``bitand``) and ``defined X`` inside ``#if`` (measured), while the
preprocessor expression grammar is small and must be evaluated exactly as the compiler does:
64-bit ``intmax_t``/``uintmax_t`` arithmetic with the usual conversions, short-circuit
``&&``/``||``/``?:``, undefined identifiers as 0. An identifier whose value is not known
(a build flag, a toolkit version) evaluates to ``None``, and ``None`` propagates except where
the known operand alone decides the result (``0 && x``, ``1 || x``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Optional

MASK = (1 << 64) - 1

_TOKEN = re.compile(
    r"""\s*(?:
      (?P<num>(?:0[xX][0-9a-fA-F']+|0[bB][01']+|\d[0-9']*)[uUlL]*)
    | (?P<chr>L?'(?:\\.|[^'\\])+')
    | (?P<id>[A-Za-z_]\w*)
    | (?P<op>&&|\|\||<<|>>|<=|>=|==|!=|[-+*/%<>&|^!~?:(),])
    )""",
    re.X,
)
_ALTERNATIVE = {"and": "&&", "or": "||", "not": "!", "bitand": "&", "bitor": "|",
                "xor": "^", "compl": "~", "not_eq": "!="}
_BINARY = {  # precedence, higher binds tighter
    "||": 1, "&&": 2, "|": 3, "^": 4, "&": 5, "==": 6, "!=": 6,
    "<": 7, ">": 7, "<=": 7, ">=": 7, "<<": 8, ">>": 8, "+": 9, "-": 9, "*": 10, "/": 10, "%": 10,
}


class ConditionError(ValueError):
    """A condition the preprocessor would reject (syntax), with a short reason."""


# AST nodes are tuples for speed and hashability:
#   ("num", value, unsigned) ("id", name) ("defined", name) ("call", name, args_text)
#   ("un", op, x) ("bin", op, a, b) ("cond", c, a, b)
Node = tuple


def tokenize(text: str) -> list[tuple[str, str]]:
    """Split a condition into (kind, text) tokens; alternative tokens become operators."""
    out: list[tuple[str, str]] = []
    pos, n = 0, len(text)
    while pos < n:
        if text[pos].isspace():
            pos += 1
            continue
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise ConditionError(f"unexpected character {text[pos]!r}")
        kind = m.lastgroup or ""
        tok = m.group(kind)
        if kind == "id" and tok in _ALTERNATIVE:
            kind, tok = "op", _ALTERNATIVE[tok]
        out.append((kind, tok))
        pos = m.end()
    return out


def _number(tok: str) -> Node:
    digits = tok.rstrip("uUlL")
    unsigned = "u" in tok[len(digits):].lower()
    body = digits.replace("'", "")
    if body[:2] in ("0x", "0X"):
        value = int(body[2:], 16)
    elif body[:2] in ("0b", "0B"):
        value = int(body[2:], 2)
    elif len(body) > 1 and body[0] == "0":
        value = int(body, 8)
    else:
        value = int(body)
    if value > MASK:
        raise ConditionError(f"integer constant too large: {tok}")
    # A decimal/hex constant that does not fit intmax_t is unsigned, as in C.
    return ("num", value, unsigned or value > (MASK >> 1))


def _char(tok: str) -> Node:
    body = tok[tok.index("'") + 1 : -1]
    escapes = {"n": 10, "t": 9, "r": 13, "0": 0, "\\": 92, "'": 39, '"': 34, "a": 7, "b": 8, "f": 12, "v": 11}
    if body.startswith("\\"):
        value = escapes.get(body[1:], None)
        if value is None:
            raise ConditionError(f"unsupported character constant {tok}")
    elif len(body) == 1:
        value = ord(body)
    else:
        raise ConditionError(f"multi-character constant {tok}")
    return ("num", value, False)


class _Parser:
    def __init__(self, text: str):
        self.text = text
        self.toks = tokenize(text)
        self.i = 0

    def peek(self) -> tuple[str, str]:
        return self.toks[self.i] if self.i < len(self.toks) else ("end", "")

    def take(self, tok: Optional[str] = None) -> tuple[str, str]:
        cur = self.peek()
        if tok is not None and cur[1] != tok:
            raise ConditionError(f"expected {tok!r}, found {cur[1] or 'end of condition'!r}")
        if cur[0] == "end":
            raise ConditionError("condition ends too early")
        self.i += 1
        return cur

    def parse(self) -> Node:
        if not self.toks:
            raise ConditionError("empty condition")
        node = self.ternary()
        if self.peek()[0] != "end":
            raise ConditionError(f"unexpected {self.peek()[1]!r}")
        return node

    def ternary(self) -> Node:
        cond = self.binary(1)
        if self.peek() == ("op", "?"):
            self.take()
            a = self.ternary()
            self.take(":")
            b = self.ternary()
            return ("cond", cond, a, b)
        return cond

    def binary(self, min_prec: int) -> Node:
        left = self.unary()
        while True:
            kind, tok = self.peek()
            prec = _BINARY.get(tok) if kind == "op" else None
            if prec is None or prec < min_prec:
                return left
            self.take()
            right = self.binary(prec + 1)
            left = ("bin", tok, left, right)

    def unary(self) -> Node:
        # Iterative over prefix operators so 10,000 `!` do not exhaust the stack.
        ops = []
        while self.peek()[0] == "op" and self.peek()[1] in "!~-+":
            ops.append(self.take()[1])
        node = self.primary()
        for op in reversed(ops):
            node = ("un", op, node)
        return node

    def primary(self) -> Node:
        kind, tok = self.take()
        if kind == "num":
            return _number(tok)
        if kind == "chr":
            return _char(tok)
        if kind == "op" and tok == "(":
            node = self.ternary()
            self.take(")")
            return node
        if kind == "id":
            if tok == "defined":
                paren = self.peek() == ("op", "(")
                if paren:
                    self.take()
                k, name = self.take()
                if k != "id":
                    raise ConditionError("'defined' needs a macro name")
                if paren:
                    self.take(")")
                return ("defined", name)
            if self.peek() == ("op", "("):
                start = self.i
                self.take()
                depth = 1
                while depth:
                    k, t = self.take()
                    depth += {"(": 1, ")": -1}.get(t, 0) if k == "op" else 0
                args = " ".join(t for _, t in self.toks[start + 1 : self.i - 1])
                return ("call", tok, args)
            if tok == "true":
                return ("num", 1, False)
            if tok == "false":
                return ("num", 0, False)
            return ("id", tok)
        raise ConditionError(f"unexpected {tok!r}")


def parse(text: str) -> Node:
    """Parse one ``#if`` condition; raises ConditionError on a syntax error."""
    import sys

    limit = sys.getrecursionlimit()
    try:
        if limit < 20000:
            sys.setrecursionlimit(20000)
        return _Parser(text).parse()
    except RecursionError:
        raise ConditionError("condition nested too deeply") from None
    finally:
        sys.setrecursionlimit(limit)


def identifiers(node: Node, acc: Optional[set[str]] = None) -> set[str]:
    """Every macro name a condition mentions (in ``defined``, as a value or a call)."""
    acc = set() if acc is None else acc
    stack = [node]
    while stack:
        n = stack.pop()
        tag = n[0]
        if tag in ("id", "defined", "call"):
            acc.add(n[1])
        elif tag == "un":
            stack.append(n[2])
        elif tag == "bin":
            stack.extend((n[2], n[3]))
        elif tag == "cond":
            stack.extend((n[1], n[2], n[3]))
    return acc


def value_identifiers(node: Node) -> set[str]:
    """Names used as values or calls, not only under ``defined``."""
    acc: set[str] = set()
    stack = [node]
    while stack:
        n = stack.pop()
        tag = n[0]
        if tag in ("id", "call"):
            acc.add(n[1])
        elif tag == "un":
            stack.append(n[2])
        elif tag == "bin":
            stack.extend((n[2], n[3]))
        elif tag == "cond":
            stack.extend((n[1], n[2], n[3]))
    return acc


Value = Optional[tuple[int, bool]]
"""(value, unsigned), or None when unknown."""


@dataclass(frozen=True, slots=True)
class Env:
    """How one target answers for identifiers: ``defined`` -> True/False/None, value -> Value."""

    defined: Callable[[str], Optional[bool]]
    value: Callable[[str], Value]
    call: Callable[[str, str], Value]


def _signed(v: int) -> int:
    v &= MASK
    return v - (1 << 64) if v >> 63 else v


def _bool(v: Value) -> Optional[bool]:
    return None if v is None else v[0] != 0


def _mk(value: int, unsigned: bool) -> tuple[int, bool]:
    return ((value & MASK) if unsigned else _signed(value), unsigned)


def evaluate(node: Node, env: Env) -> Value:
    """Evaluate with C preprocessor semantics; ``None`` where unknown identifiers decide."""
    tag = node[0]
    if tag == "num":
        return _mk(node[1], node[2])
    if tag == "id":
        return env.value(node[1])
    if tag == "defined":
        d = env.defined(node[1])
        return None if d is None else (int(d), False)
    if tag == "call":
        return env.call(node[1], node[2])
    if tag == "un":
        x = evaluate(node[2], env)
        if x is None:
            return None
        op, (v, u) = node[1], x
        if op == "!":
            return (int(v == 0), False)
        if op == "~":
            return _mk(~v, u)
        if op == "-":
            return _mk(-v, u)
        return x
    if tag == "cond":
        c = _bool(evaluate(node[1], env))
        if c is not None:
            return evaluate(node[2] if c else node[3], env)
        a, b = evaluate(node[2], env), evaluate(node[3], env)
        return a if a is not None and a == b else None
    op = node[1]
    if op in ("&&", "||"):
        left = _bool(evaluate(node[2], env))
        if op == "&&" and left is False:
            return (0, False)
        if op == "||" and left is True:
            return (1, False)
        right = _bool(evaluate(node[3], env))
        if op == "&&":
            if right is False:
                return (0, False)
            return None if left is None or right is None else (1, False)
        if right is True:
            return (1, False)
        return None if left is None or right is None else (0, False)
    a = evaluate(node[2], env)
    b = evaluate(node[3], env)
    if op == "*" and ((a is not None and a[0] == 0) or (b is not None and b[0] == 0)):
        return (0, bool((a and a[1]) or (b and b[1])))
    if a is None or b is None:
        return None
    return _arith(op, a, b)


def _arith(op: str, a: tuple[int, bool], b: tuple[int, bool]) -> tuple[int, bool]:
    unsigned = a[1] or b[1]
    if op in ("<<", ">>"):
        unsigned = a[1]  # shifts take the left operand's type
        x, n = (a[0] & MASK if a[1] else a[0]), b[0] if not b[1] else b[0] & MASK
        if n < 0 or n >= 64:
            raise ConditionError("shift count out of range")
        return _mk(x << n if op == "<<" else x >> n, unsigned)
    x = a[0] & MASK if unsigned else a[0]
    y = b[0] & MASK if unsigned else b[0]
    if op in ("/", "%"):
        if y == 0:
            raise ConditionError("division by zero in condition")
        q = abs(x) // abs(y)
        q = q if (x >= 0) == (y >= 0) else -q  # C truncates toward zero
        return _mk(q if op == "/" else x - q * y, unsigned)
    if op in ("<", ">", "<=", ">=", "==", "!="):
        res = {"<": x < y, ">": x > y, "<=": x <= y, ">=": x >= y, "==": x == y, "!=": x != y}[op]
        return (int(res), False)
    res = {"+": x + y, "-": x - y, "*": x * y, "&": x & y, "|": x | y, "^": x ^ y}[op]
    return _mk(res, unsigned)
