"""A flag a caller passes in: the capability test at the call settles the branch it feeds.

``FullTopKIndexer.__init__`` writes ``self.use_deep_select = not use_deep_gemm and
is_deep_select_supported()``, and its one caller passes ``use_deep_gemm=is_sm100_or_newer()``.
Read alone, the branch is an allow-list of 9.0, 10.0 and 10.3 with an unknown beside it; but
on 12.x the caller's test is true, so ``not use_deep_gemm`` is false there and the branch is
never taken, whatever ``is_deep_select_supported()`` says: the decision is made at the call
(``Gate.settled``), and widening the predicate gives 12.x nothing.

Only a parameter of the gate's function, or of its class's ``__init__`` (a flag kept on
``self``), that is a top-level ``and`` operand of the condition or of the flag's assignment,
and whose every call site passes a capability test the scan evaluated exactly (or a constant)
is read. The scanned code is parsed, never run.
"""

from __future__ import annotations

import ast
import re
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from functools import lru_cache
from itertools import islice

from auditor import verdicts
from auditor.model import Gate, Guards, Language, SourceFile, Target

MAX_CALLS = 8
"""A function called from more places than this is a shared utility: its callers are not read."""
AST_BYTES = 2 << 20
"""Source bytes whose ``ast`` trees are kept (≈ 36 bytes of tree per byte of source); the least
recently used beyond it are parsed again when asked for. Kept all, a large input's callers
cost a gigabyte."""
_OPERAND = re.compile(r"(not\s+)?([A-Za-z_]\w*)")


def with_arguments(gates: Sequence[Gate], files: Sequence[SourceFile], targets: Sequence[Target]) -> list[Gate]:
    """The gates, each Python branch that a turned-away target never takes because of a flag
    its callers pass with the capabilities that settles it (:attr:`Gate.settled`)."""
    python = {f.path: f.data for f in files if f.language == "python"}
    candidates = [
        i
        for i, g in enumerate(gates)
        if g.language == Language.PYTHON
        and g.unknowns
        and g.guards != Guards.REJECT
        and g.file in python
        and any(verdicts.turns_away(g, t) for t in targets)
    ]
    if not candidates:
        return list(gates)
    at = {(g.file, g.line, _squeezed(g.expression)): g for g in gates if g.language == Language.PYTHON}
    trees: OrderedDict[str, ast.Module | None] = OrderedDict()  # least recently used first

    def tree(path: str) -> ast.Module | None:
        if path in trees:
            trees.move_to_end(path)
            return trees[path]
        trees[path] = _parsed(python[path])
        held = sum(len(python[p]) for p in trees)
        while held > AST_BYTES and len(trees) > 1:
            held -= len(python[trees.popitem(last=False)[0]])
        return trees[path]

    calls: dict[str, list[tuple[str, ast.Call]]] = {}

    def calls_of(callee: str) -> list[tuple[str, ast.Call]]:
        """Up to one more than :data:`MAX_CALLS` calls of a name (more is too many: not parsed),
        found once per name: each target, and each gate of a function, asks again."""
        if callee not in calls:
            calls[callee] = list(islice(_calls(python, tree, callee), MAX_CALLS + 1))
        return calls[callee]

    out = list(gates)
    for i in candidates:
        g = out[i]
        settled = [
            t.capability
            for t in targets
            if verdicts.turns_away(g, t) and t.capability not in g.settled and _never_taken(g, t, tree, calls_of, at)
        ]
        if settled:
            out[i] = replace(g, settled=(*g.settled, *settled))
    return out


Trees = Callable[[str], "ast.Module | None"]
"""A Python file's syntax tree by path (:data:`AST_BYTES` of them kept)."""
Calls = Callable[[str], "list[tuple[str, ast.Call]]"]
"""The calls of a name in the input's Python, up to one more than :data:`MAX_CALLS`."""


def _never_taken(g: Gate, t: Target, tree: Trees, calls_of: Calls, at: dict) -> bool:
    """Whether an unknown ``and`` operand of the gate's condition is a flag every caller passes
    false for the target."""
    operands = [(unknown, m) for unknown in g.unknowns if (m := _OPERAND.fullmatch(unknown.strip()))]
    module = tree(g.file) if operands else None  # no flag among the unknowns: nothing to parse
    if module is None:
        return False
    owner, method = _owner(module, g.context)
    if method is None:
        return False
    conditions = [_expr(g.chain[-1] if g.chain else g.expression)]
    conditions += _assigned(owner or method, g.expression)
    for unknown, m in operands:
        if not any(_operand_of_and(c, unknown) for c in conditions if c is not None):
            continue
        negated, name = bool(m.group(1)), m.group(2)
        passed = _passed(calls_of, at, owner, method, name, t)
        if passed is not None and passed == negated:  # `not x` with x true, `x` with x false
            return True
    return False


def _owner(tree: ast.Module, context: str) -> tuple[ast.ClassDef | None, ast.FunctionDef | None]:
    """The class and function a gate's context names (``Indexer.__init__``, ``pick``); for a
    method, its class's ``__init__`` holds the flags kept on ``self``."""
    parts = context.split(":")[0].split(".")
    if len(parts) == 1:
        return None, _function(tree.body, parts[0])
    cls = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == parts[0]), None)
    return (cls, _function(cls.body, "__init__")) if cls is not None and len(parts) == 2 else (None, None)


def _function(body: list[ast.stmt], name: str) -> ast.FunctionDef | None:
    return next((n for n in body if isinstance(n, ast.FunctionDef) and n.name == name), None)


def _assigned(scope: ast.AST, expression: str) -> list[ast.expr]:
    """What a flag the condition tests is assigned (``self.use_x = a and b``) in the scope."""
    name = expression.strip().strip("()")
    if not re.fullmatch(r"(?:self\.)?[A-Za-z_]\w*", name):
        return []
    return [
        n.value for n in ast.walk(scope) if isinstance(n, ast.Assign) and any(_written(t) == name for t in n.targets)
    ]


def _written(target: ast.expr) -> str | None:
    """An assignment target as written, when it is a name or one's attribute (``self.use_x``):
    what :func:`ast.unparse` gives for them, without unparsing every target of a class."""
    if isinstance(target, ast.Name):
        return target.id
    if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name):
        return f"{target.value.id}.{target.attr}"
    return None


def _operand_of_and(condition: ast.expr, operand: str) -> bool:
    """Whether ``operand`` is a top-level operand of an ``and`` chain."""
    return (
        isinstance(condition, ast.BoolOp)
        and isinstance(condition.op, ast.And)
        and any(_squeezed(ast.unparse(v)) == _squeezed(operand) for v in condition.values)
    )


def _passed(
    calls_of: Calls,
    at: dict,
    owner: ast.ClassDef | None,
    method: ast.FunctionDef,
    name: str,
    t: Target,
) -> bool | None:
    """The value every call of the function (of the class, for ``__init__``) passes for a
    parameter on the target; None when some call passes none, an unknown, or too many call."""
    params = [a.arg for a in method.args.args]
    if name not in params and name not in [a.arg for a in method.args.kwonlyargs]:
        return None
    index = params.index(name) - (owner is not None) if name in params else None
    callee = owner.name if owner is not None else method.name
    values: set[bool] = set()
    calls = calls_of(callee)
    if not calls or len(calls) > MAX_CALLS:
        return None
    for path, call in calls:
        arg = next((k.value for k in call.keywords if k.arg == name), None)
        if arg is None and index is not None and index < len(call.args):
            arg = call.args[index]
        value = _value(path, arg, at, t) if arg is not None else None
        if value is None:
            return None
        values.add(value)
    return values.pop() if len(values) == 1 else None


def _calls(python: dict[str, bytes], tree: Trees, callee: str) -> Iterator[tuple[str, ast.Call]]:
    """The calls of a name in the input's Python (``Name(...)``, ``mod.Name(...)``)."""
    needle = callee.encode()
    called = _call_of(needle)
    for path, data in python.items():
        if needle not in data or not called.search(data):
            continue  # parsed only where the name is followed by a parenthesis
        module = tree(path)
        for n in ast.walk(module) if module is not None else ():
            if isinstance(n, ast.Call):
                f = n.func
                if (isinstance(f, ast.Name) and f.id == callee) or (isinstance(f, ast.Attribute) and f.attr == callee):
                    yield path, n


@lru_cache(maxsize=4096)
def _call_of(name: bytes) -> re.Pattern[bytes]:
    """Where a name may be called: it, then blanks, comments or line continuations, then ``(``;
    every call in the file's syntax tree is found by it (and some that are none, in strings)."""
    return re.compile(re.escape(name) + rb"(?:\s|\\|#[^\r\n]*[\r\n])*\(")  # a comment ends only at its line's end


def _value(path: str, arg: ast.expr, at: dict, t: Target) -> bool | None:
    """An argument's truth on the target: a constant, or a capability test the scan evaluated
    exactly at that line."""
    if isinstance(arg, ast.Constant) and isinstance(arg.value, bool):
        return arg.value
    gate = at.get((path, arg.lineno, _squeezed(ast.unparse(arg))))
    if gate is None or gate.unknowns:
        return None
    return not verdicts.turns_away(gate, t)


def _expr(text: str) -> ast.expr | None:
    try:
        return ast.parse(text.strip(), mode="eval").body
    except SyntaxError:
        return None


def _parsed(data: bytes) -> ast.Module | None:
    try:
        return ast.parse(data)
    except (SyntaxError, ValueError, RecursionError):
        return None


def _squeezed(text: str) -> str:
    """A condition without its spaces and outer parentheses, to compare two writings of it."""
    return re.sub(r"\s+", "", text).strip("()")
