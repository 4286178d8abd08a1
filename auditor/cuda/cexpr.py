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
from collections.abc import Callable, Iterator
from dataclasses import dataclass

MASK = (1 << 64) - 1

_TOKEN = re.compile(
    r"""\s*(?:
      (?P<num>(?:0[xX][0-9a-fA-F']+|0[bB][01']+|\d[0-9']*)[uUlL]*)
    | (?P<chr>(?:u8|[LuU])?'(?:\\.|[^'\\])+')
    | (?P<id>[A-Za-z_]\w*)
    | (?P<op>&&|\|\||<<|>>|<=|>=|==|!=|[-+*/%<>&|^!~?:(),])
    )""",
    re.X,
)
_ALTERNATIVE = {
    "and": "&&",
    "or": "||",
    "not": "!",
    "bitand": "&",
    "bitor": "|",
    "xor": "^",
    "compl": "~",
    "not_eq": "!=",
}
_BINARY = {  # precedence, higher binds tighter
    "||": 1,
    "&&": 2,
    "|": 3,
    "^": 4,
    "&": 5,
    "==": 6,
    "!=": 6,
    "<": 7,
    ">": 7,
    "<=": 7,
    ">=": 7,
    "<<": 8,
    ">>": 8,
    "+": 9,
    "-": 9,
    "*": 10,
    "/": 10,
    "%": 10,
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
    unsigned = "u" in tok[len(digits) :].lower()
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


_SIMPLE_ESCAPES = {
    "n": 10,
    "t": 9,
    "r": 13,
    "\\": 92,
    "'": 39,
    '"': 34,
    "?": 63,
    "a": 7,
    "b": 8,
    "f": 12,
    "v": 11,
    "e": 27,
    "E": 27,
}
_CHAR_TYPES = {"": (8, True), "u8": (8, True), "L": (32, True), "u": (16, False), "U": (32, False)}
"""Prefix -> (bits, signed) as g++ on Linux x86-64: ``char`` is signed, ``wchar_t`` a signed int."""


def _char(tok: str) -> Node:
    """A character constant's value as GCC computes it in ``#if`` (escapes, multi-character)."""
    quote = tok.index("'")
    prefix, body = tok[:quote], tok[quote + 1 : -1]
    width, signed = _CHAR_TYPES[prefix]
    units: list[int] = []
    i = 0
    while i < len(body):
        c = body[i]
        if c != "\\":
            units.extend(c.encode("utf-8") if width == 8 else [ord(c)])
            i += 1
            continue
        e = body[i + 1 : i + 2]
        if e in _SIMPLE_ESCAPES:
            units.append(_SIMPLE_ESCAPES[e])
            i += 2
        elif e and e in "01234567":
            digits = re.match(r"[0-7]{1,3}", body[i + 1 :]).group()  # type: ignore[union-attr]
            units.append(int(digits, 8))
            i += 1 + len(digits)
        elif e == "x" and re.match(r"[0-9a-fA-F]", body[i + 2 :]):
            digits = re.match(r"[0-9a-fA-F]+", body[i + 2 :]).group()  # type: ignore[union-attr]
            units.append(int(digits, 16))
            i += 2 + len(digits)
        elif e in ("u", "U") and re.fullmatch(
            rf"[0-9a-fA-F]{{{4 if e == 'u' else 8}}}", body[i + 2 : i + (6 if e == "u" else 10)]
        ):
            point = int(body[i + 2 : i + (6 if e == "u" else 10)], 16)
            units.extend(chr(point).encode("utf-8") if width == 8 and point < 0x110000 else [point])
            i += 6 if e == "u" else 10
        else:
            raise ConditionError(f"unsupported character constant {tok}")
    if not units:
        raise ConditionError(f"empty character constant {tok}")
    if width == 8 and len(units) > 1:
        width, value = 32, 0  # a multi-character constant is an int: the last four bytes
        for u in units:
            value = (value << 8) | (u & 0xFF)
    else:
        value = units[-1]
    value &= (1 << width) - 1
    if signed and value >> (width - 1):
        value -= 1 << width
    return ("num", value, False)


class _Parser:
    def __init__(self, text: str):
        self.text = text
        self.toks = tokenize(text)
        self.i = 0

    def peek(self) -> tuple[str, str]:
        return self.toks[self.i] if self.i < len(self.toks) else ("end", "")

    def take(self, tok: str | None = None) -> tuple[str, str]:
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
        node = self.expression()
        if self.peek()[0] != "end":
            raise ConditionError(f"unexpected {self.peek()[1]!r}")
        return node

    def expression(self) -> Node:
        return self.commas(self.ternary())

    def commas(self, node: Node) -> Node:
        """The comma operator (GCC accepts it in ``#if``): the value of the last operand.

        Called with the first operand already parsed, so that each level of parentheses
        costs no more Python frames than before (4,000 levels stay within the limit).
        """
        while self.peek() == ("op", ","):
            self.take()
            node = ("bin", ",", node, self.ternary())
        return node

    def ternary(self) -> Node:
        cond = self.binary(1)
        if self.peek() == ("op", "?"):
            self.take()
            a = self.commas(self.ternary())
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
            node = self.commas(self.ternary())
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


def identifiers(node: Node, acc: set[str] | None = None) -> set[str]:
    """Every macro name a condition mentions (in ``defined``, as a value or a call)."""
    return _names(node, ("id", "defined", "call"), set() if acc is None else acc)


def value_identifiers(node: Node) -> set[str]:
    """Names used as values or calls, not only under ``defined``."""
    return _names(node, ("id", "call"), set())


def _names(node: Node, tags: tuple[str, ...], acc: set[str]) -> set[str]:
    """Adds to ``acc`` the name of every node tagged one of ``tags``."""
    acc.update(n[1] for n in nodes(node) if n[0] in tags)
    return acc


def nodes(node: Node) -> Iterator[Node]:
    """Every node of a condition, ``node`` first (an explicit stack: no recursion limit)."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        tag = n[0]
        if tag == "un":
            stack.append(n[2])
        elif tag == "bin":
            stack.extend((n[2], n[3]))
        elif tag == "cond":
            stack.extend((n[1], n[2], n[3]))


Value = tuple[int, bool] | None
"""(value, unsigned), or None when unknown."""


@dataclass(frozen=True, slots=True)
class Env:
    """How one target answers for identifiers: ``defined`` -> True/False/None, value -> Value."""

    defined: Callable[[str], bool | None]
    value: Callable[[str], Value]
    call: Callable[[str, str], Value]


def _signed(v: int) -> int:
    v &= MASK
    return v - (1 << 64) if v >> 63 else v


def _bool(v: Value) -> bool | None:
    return None if v is None else v[0] != 0


def _mk(value: int, unsigned: bool) -> tuple[int, bool]:
    return ((value & MASK) if unsigned else _signed(value), unsigned)


def evaluate(node: Node, env: Env) -> Value:
    """Evaluate with C preprocessor semantics; ``None`` where unknown identifiers decide."""
    import sys

    limit = sys.getrecursionlimit()
    try:
        if limit < 20000:
            sys.setrecursionlimit(20000)  # as deep as :func:`parse` accepts
        return _evaluate(node, env)
    except RecursionError:
        raise ConditionError("condition nested too deeply") from None
    finally:
        sys.setrecursionlimit(limit)


def _evaluate(node: Node, env: Env) -> Value:
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
        # Chains of prefix operators (10,000 `!`) are walked, not recursed.
        ops = []
        while node[0] == "un":
            ops.append(node[1])
            node = node[2]
        x = _evaluate(node, env)
        for op in reversed(ops):
            if x is None:
                return None
            v, u = x
            if op == "!":
                x = (int(v == 0), False)
            elif op == "~":
                x = _mk(~v, u)
            elif op == "-":
                x = _mk(-v, u)
        return x
    if tag == "cond":
        # The result has the common type of both arms (unsigned if either is), as in GCC,
        # although only one arm is evaluated: `(1 ? -1 : 0u) > 0` is true.
        c = _bool(_evaluate(node[1], env))
        if c is not None:
            arm = _evaluate(node[2] if c else node[3], env)
            if arm is not None and not arm[1] and _unsigned_type(node[3] if c else node[2], env):
                arm = _mk(arm[0], True)
            return arm
        a, b = _evaluate(node[2], env), _evaluate(node[3], env)
        if a is None or b is None:
            return None
        if a[1] or b[1]:
            a, b = _mk(a[0], True), _mk(b[0], True)
        return a if a == b else None
    leaf, spine = _left_spine(node)
    acc = _evaluate(leaf, env)
    for n in spine:
        acc = _binary(n[1], acc, n[3], env)
    return acc


def _left_spine(node: Node) -> tuple[Node, list[Node]]:
    """The parser builds ``a || b || c ...`` left-deep: its leftmost operand and the binary
    nodes above it, innermost first, to walk instead of recursing 50,000 levels down."""
    spine = []
    while node[0] == "bin":
        spine.append(node)
        node = node[2]
    return node, spine[::-1]


_INT_RESULT = frozenset({"&&", "||", "<", ">", "<=", ">=", "==", "!="})


def _unsigned_type(node: Node, env: Env) -> bool | None:
    """Whether an expression has an unsigned type, without evaluating it (None: not known)."""
    tag = node[0]
    if tag == "num":
        return node[2]
    if tag == "defined":
        return False
    if tag in ("id", "call"):
        v = env.value(node[1]) if tag == "id" else env.call(node[1], node[2])
        return None if v is None else v[1]
    if tag == "un":
        return False if node[1] == "!" else _unsigned_type(node[2], env)
    if tag == "cond":
        return _either(_unsigned_type(node[2], env), _unsigned_type(node[3], env))
    leaf, spine = _left_spine(node)
    acc = _unsigned_type(leaf, env)
    for n in spine:
        op = n[1]
        if op in _INT_RESULT:
            acc = False
        elif op == ",":
            acc = _unsigned_type(n[3], env)
        elif op not in ("<<", ">>"):  # a shift has its left operand's type
            acc = _either(acc, _unsigned_type(n[3], env))
    return acc


def _either(a: bool | None, b: bool | None) -> bool | None:
    if a or b:
        return True
    return None if a is None or b is None else False


def _binary(op: str, a: Value, right: Node, env: Env) -> Value:
    """``a op right`` where the left operand is already evaluated (short-circuit kept)."""
    if op == ",":
        return _evaluate(right, env)
    if op in ("&&", "||"):
        left = _bool(a)
        if op == "&&" and left is False:
            return (0, False)
        if op == "||" and left is True:
            return (1, False)
        rb = _bool(_evaluate(right, env))
        if op == "&&":
            if rb is False:
                return (0, False)
            return None if left is None or rb is None else (1, False)
        if rb is True:
            return (1, False)
        return None if left is None or rb is None else (0, False)
    b = _evaluate(right, env)
    if op == "*" and ((a is not None and a[0] == 0) or (b is not None and b[0] == 0)):
        return (0, bool((a and a[1]) or (b and b[1])))
    if a is None or b is None:
        return None
    return _arith(op, a, b)


def _arith(op: str, a: tuple[int, bool], b: tuple[int, bool]) -> tuple[int, bool]:
    unsigned = a[1] or b[1]
    if op in ("<<", ">>"):
        # GCC's rules: the left operand's type; a negative count shifts the other way; a count
        # of 64 or more leaves 0 (or -1 for a negative signed value shifted right).
        unsigned = a[1]
        x, n = (a[0] & MASK if a[1] else a[0]), b[0] if not b[1] else b[0] & MASK
        if n < 0:
            op, n = (">>" if op == "<<" else "<<"), -n
        if n >= 64:
            return _mk(-1 if op == ">>" and x < 0 else 0, unsigned)
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
        holds = {"<": x < y, ">": x > y, "<=": x <= y, ">=": x >= y, "==": x == y, "!=": x != y}[op]
        return (int(holds), False)
    res = {"+": x + y, "-": x - y, "*": x * y, "&": x & y, "|": x | y, "^": x ^ y}[op]
    return _mk(res, unsigned)
