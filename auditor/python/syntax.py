"""Reading the syntax tree: lines, one-line texts, the parts of compound statements, the
name a call is made by. Shared by the evaluator, the scan and the gate reading.
"""

from __future__ import annotations

import ast
import re
from typing import TYPE_CHECKING

from tree_sitter import Node

if TYPE_CHECKING:

    def child(node: Node, name: str) -> Node:
        """The child in a field the grammar requires (``name`` of a ``def``, ``body`` of a loop).
        Units that failed to parse are not read, so it is there; tree-sitter types every field
        as optional."""
        ...

else:
    child = Node.child_by_field_name  # no wrapper: it is on every evaluation's path


def text_of(node: Node) -> str:
    """A node's source text (trees are parsed from bytes, so it has one)."""
    raw = node.text
    assert raw is not None
    return raw.decode()


def line_of(node: Node) -> int:
    return node.start_point[0] + 1


def one_line(text: str, limit: int = 160) -> str:
    """The text on one line without its layout: no space inside brackets, no trailing comma."""
    s = " ".join(text.split())
    s = _OPEN_SPACE.sub(r"\1", s)
    s = _CLOSE_SPACE.sub(r"\1", s)
    return s if len(s) <= limit else s[: limit - 1] + "…"


_OPEN_SPACE = re.compile(r"([(\[{]) ")
_CLOSE_SPACE = re.compile(r",? ([)\]}])")


def callee_name(fnode: Node | None) -> str:
    """The last name of what a call calls (``f``, ``obj.f``), or ``""``: how predicates and
    rejecting calls are known."""
    if fnode is None:
        return ""
    if fnode.type == "identifier":
        return text_of(fnode)
    if fnode.type == "attribute":
        return text_of(child(fnode, "attribute"))
    return ""


def if_clauses(s: Node):
    """``[(condition, block), ...]`` of an ``if``/``elif`` chain, and the ``else`` block or None."""
    clauses = [(child(s, "condition"), child(s, "consequence"))]
    other = None
    for alt in s.children_by_field_name("alternative"):
        if alt.type == "elif_clause":
            clauses.append((child(alt, "condition"), child(alt, "consequence")))
        else:
            other = child(alt, "body")
    return clauses, other


def case_bodies(s: Node) -> list[Node]:
    body = s.child_by_field_name("body")
    cases = [c for c in body.named_children if c.type == "case_clause"] if body is not None else []
    return [b for b in (c.child_by_field_name("consequence") for c in cases) if b is not None]


def clause_body(clause: Node) -> list[Node]:
    """The statements of an ``except`` or ``finally`` clause."""
    block = next((b for b in clause.named_children if b.type == "block"), None)
    return block.named_children if block is not None else []


def try_parts(s: Node) -> tuple[list[Node], list[Node], list[Node]]:
    """The ``except`` clauses of a ``try``, and the statements of its ``else`` and ``finally``
    (both walkers run them in this order)."""
    handlers: list[Node] = []
    other: list[Node] = []
    final: list[Node] = []
    for c in s.named_children:
        if c.type in ("except_clause", "except_group_clause"):
            handlers.append(c)
        elif c.type == "else_clause":
            other = child(c, "body").named_children
        elif c.type == "finally_clause":
            final = clause_body(c)
    return handlers, other, final


def method_kind(fn: Node) -> str:
    """``self`` (plain method), ``class`` (classmethod), ``static`` or ``property``."""
    p = fn.parent
    kind = "self"
    if p is not None and p.type == "decorated_definition":
        for d in p.named_children:
            if d.type != "decorator":
                continue
            text = text_of(d)
            if "staticmethod" in text:
                return "static"
            if "classmethod" in text:
                kind = "class"
            elif text.rstrip().endswith("property"):
                kind = "property"
    return kind


def context_of(node: Node) -> str:
    """``Class.method`` (or ``function.inner``) around ``node``; "" at module level."""
    parts = []
    p = node.parent
    while p is not None:
        if p.type in ("function_definition", "class_definition"):
            parts.append(text_of(child(p, "name")))
        p = p.parent
    return ".".join(reversed(parts))


_EQUALITY = ("==", "!=", "in", "not in")
_LITERALS = ("integer", "string", "tuple", "list", "set")


def compared_literals(node: Node) -> set:
    """The int and str literals that ``node`` compares anything with for equality or
    membership (``v == 2``, ``v in (3, 4)``): the values a test tells apart."""
    out: set = set()
    for n in descendants(node):
        if n.type == "comparison_operator" and any(text_of(c) in _EQUALITY for c in n.children if not c.is_named):
            for c in n.named_children:
                if c.type in _LITERALS:
                    out |= _literal_items(text_of(c))
    return out


def descendants(node: Node):
    """``node`` and the named nodes inside it, in source order."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(reversed(n.named_children))


def _literal_items(text: str) -> set:
    try:
        v = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return set()
    items = v if isinstance(v, (tuple, list, set)) else (v,)
    return {x for x in items if isinstance(x, (int, str)) and not isinstance(x, bool)}


def identifiers_in(node: Node) -> list[str]:
    """Names ``node`` reads as plain variables (not attribute names, not called names), in order."""
    out: list[str] = []
    for n in descendants(node):
        p = n.parent
        if n.type != "identifier" or (
            p is not None
            and (
                (p.type == "attribute" and p.child_by_field_name("attribute") == n)
                or (p.type == "call" and p.child_by_field_name("function") == n)
                or (p.type == "keyword_argument" and p.child_by_field_name("name") == n)
            )
        ):
            continue
        name = text_of(n)
        if name not in out:
            out.append(name)
    return out


def calls_in(node: Node) -> list[Node]:
    """The calls inside ``node``, itself included."""
    return [n for n in descendants(node) if n.type == "call"]


def self_attribute(node: Node) -> bool:
    """``self.x``: an attribute of the method's own instance, one level deep."""
    obj = child(node, "object")
    return obj is not None and obj.type == "identifier" and text_of(obj) == "self"
