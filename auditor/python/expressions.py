"""Expressions: literals, operators, containers, comprehensions, subscripts.

Each handler maps one kind of syntax node onto the operations of :mod:`values`; names,
attributes and calls are :mod:`resolve`'s and :mod:`calls`'. In scan mode both arms of a
choice (``and``/``or``, ``x if c else y``) are evaluated, so that every operand is recorded.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass

from tree_sitter import Node

from auditor.model import GateKind, ResolvedBy
from auditor.python.core import Core, Frame
from auditor.python.syntax import child, one_line, text_of
from auditor.python.values import (
    ANY,
    NOTHING,
    UNKNOWN,
    Func,
    Table,
    Taint,
    Val,
    along,
    binary,
    bool_and,
    bool_not,
    bool_or,
    compare,
    is_data,
    items_of,
    join,
    make,
    merge,
    product,
    taint,
    taints,
    truth,
    unary,
    val,
)


class Expressions(Core):
    """Handlers for the node types that are plain expressions (see ``_DISPATCH`` in :mod:`interp`)."""

    def e_paren(self, node: Node, fr: Frame) -> Val:
        inner = [c for c in node.named_children if c.type != "comment"]
        if len(inner) == 1:
            return self.eval(inner[0], fr)
        return product([self.eval(c, fr) for c in inner])

    def e_integer(self, node: Node, fr: Frame) -> Val:
        text = text_of(node).replace("_", "").rstrip("lLjJ")
        try:
            return val(int(text, 0))
        except ValueError:
            return ANY

    def e_float(self, node: Node, fr: Frame) -> Val:
        try:
            return val(float(text_of(node).replace("_", "")))
        except ValueError:
            return ANY

    def e_true(self, node, fr):
        return val(True)

    def e_false(self, node, fr):
        return val(False)

    def e_none(self, node, fr):
        return val(None)

    def e_string(self, node: Node, fr: Frame) -> Val:
        parts: list[Val] = []
        start = node.child(0)
        prefix = text_of(start).lower() if start is not None else ""
        if "b" in prefix.replace('"', "").replace("'", ""):
            return ANY
        for c in node.children:
            if c.type == "string_content":
                parts.append(val(_unescape(fr.mod.text(c), "r" in prefix)))
            elif c.type == "escape_sequence":
                parts.append(val(_unescape(fr.mod.text(c), "r" in prefix)))
            elif c.type == "interpolation":
                expr = c.child_by_field_name("expression")
                v = self.eval(expr, fr) if expr is not None else ANY
                if (
                    c.child_by_field_name("format_specifier") is not None
                    or c.child_by_field_name("type_conversion") is not None
                ):
                    parts.append(Val(ANY.elems, v.taint))
                else:
                    parts.append(
                        make(
                            (
                                str(x) if is_data(x) and not isinstance(x, (tuple, frozenset)) else UNKNOWN
                                for x in v.elems
                            ),
                            v.taint,
                        )
                    )
        return _concat(parts)

    def e_concat(self, node: Node, fr: Frame) -> Val:
        return _concat([self.eval(c, fr) for c in node.named_children if c.type == "string"])

    def e_tuple(self, node: Node, fr: Frame) -> Val:
        items = [c for c in node.named_children if c.type != "comment"]
        if any(c.type in _SPLATS for c in items):
            # ``[*([A] if major == 9 else []), B]``: what is spread is evaluated (and recorded)
            vals = [
                self.eval(c.named_children[0], fr) if c.type in _SPLATS and c.named_children else self.eval(c, fr)
                for c in items
            ]
            return Val(ANY.elems, taints(vals))
        return product([self.eval(c, fr) for c in items])

    def e_set(self, node: Node, fr: Frame) -> Val:
        v = self.e_tuple(node, fr)
        return make((frozenset(x) if isinstance(x, tuple) else UNKNOWN for x in v.elems), v.taint)

    def e_dict(self, node: Node, fr: Frame) -> Val:
        """A :class:`Table` when every key and value is a literal; else unknown as a whole. A
        scan evaluates the values, so that a flag passed as one (``{"USE_GDC": use_gdc}``) is a
        gate at that use."""
        pairs = [c for c in node.named_children if c.type != "comment"]
        if all(c.type == "pair" and _literal(child(c, "key")) and _literal(child(c, "value")) for c in pairs):
            items = [(self.eval(child(c, "key"), fr).only(), self.eval(child(c, "value"), fr).only()) for c in pairs]
            if all(is_data(k) and is_data(v) for k, v in items):
                return val(Table(tuple(items)))
        if self.recording:
            for pair in pairs:
                if pair.type == "pair":
                    self.eval(child(pair, "value"), fr)
        return ANY

    def e_bool(self, node: Node, fr: Frame) -> Val:
        left = child(node, "left")
        right = child(node, "right")
        op = child(node, "operator").type
        a = self.eval(left, fr)
        box: list[Val] = []

        def rhs() -> Val:
            if not box:
                box.append(self.eval(right, fr))
            return box[0]

        if self.recording:
            rhs()
        out = bool_and(a, rhs) if op == "and" else bool_or(a, rhs)
        return self._note_unknowns(out, (left, a), (right, box[0] if box else None))

    def _note_unknowns(self, out: Val, *operands) -> Val:
        """A tainted result that an untainted unknown operand may decide lists that operand."""
        if out.taint is None:
            return out
        notes = []
        for n, v in operands:
            if v is not None and v.taint is None and len(truth(v)) == 2:
                notes.append(_short(n))
        if not notes:
            return out
        return Val(out.elems, out.taint.merge(Taint(unknowns=tuple(notes))))

    def e_not(self, node: Node, fr: Frame) -> Val:
        return bool_not(self.eval(child(node, "argument"), fr))

    def e_compare(self, node: Node, fr: Frame) -> Val:
        operands: list[Node] = []
        ops: list[str] = []
        for i, c in enumerate(node.children):
            if node.field_name_for_child(i) == "operators":
                ops.append(" ".join(text_of(c).split()))
            elif c.is_named and c.type != "comment":
                operands.append(c)
        vals = [self.eval(c, fr) for c in operands]
        out = compare(ops[0], vals[0], vals[1])
        for i in range(1, len(ops)):
            nxt = compare(ops[i], vals[i], vals[i + 1])
            out = bool_and(out, lambda nxt=nxt: nxt)
        return out

    def e_binary(self, node: Node, fr: Frame) -> Val:
        a = self.eval(child(node, "left"), fr)
        b = self.eval(child(node, "right"), fr)
        return binary(child(node, "operator").type, a, b)

    def e_unary(self, node: Node, fr: Frame) -> Val:
        return unary(child(node, "operator").type, self.eval(child(node, "argument"), fr))

    def e_conditional(self, node: Node, fr: Frame) -> Val:
        kids = [c for c in node.named_children if c.type != "comment"]
        if len(kids) != 3:
            return ANY
        body, cond, alt = kids
        c = self.eval(cond, fr)
        tr = truth(c)
        if self.recording:
            a, b = self.eval(body, fr), self.eval(alt, fr)
            chosen = [v for v, t in ((a, True), (b, False)) if t in tr]
        else:
            chosen = [self.eval(n, fr) for n, t in ((body, True), (alt, False)) if t in tr]
        if len(chosen) == 2 and c.taint is None:
            device = _device_arm(*chosen)
            if device is not None:
                return Val(device.elems, merge(device.taint, Taint(unknowns=(_short(cond),))))
        return along(join(*chosen), c.taint) if chosen else NOTHING

    def e_subscript(self, node: Node, fr: Frame) -> Val:
        base = self.eval(child(node, "value"), fr)
        subs = [c for c in node.children_by_field_name("subscript")]
        if len(subs) != 1:
            return Val(ANY.elems, base.taint)
        sub = subs[0]
        if sub.type == "slice":
            key = self._slice(sub, fr)
        else:
            key = self.eval(sub, fr)
        out: set = set()
        for x in base.elems:
            for k in key.elems:
                if isinstance(x, Table) and is_data(k):
                    if k in x:
                        out.add(x[k])
                elif isinstance(x, (tuple, str)) and isinstance(k, (int, _Slice)) and not isinstance(k, bool):
                    try:
                        r = x[slice(*k.parts)] if isinstance(k, _Slice) else x[k]
                    except Exception:
                        continue
                    out.add(tuple(r) if isinstance(r, tuple) else r)
                else:
                    out.add(UNKNOWN)
        return make(out, merge(base.taint, key.taint))

    def _slice(self, node: Node, fr: Frame) -> Val:
        parts: list = [None]
        for c in node.children:
            if c.type == ":":
                parts.append(None)
            elif c.is_named:
                v = self.eval(c, fr).only()
                parts[-1] = v if isinstance(v, int) else UNKNOWN
        if any(p is UNKNOWN for p in parts) or len(parts) > 3:
            return ANY
        return Val(frozenset({_Slice(tuple(parts))}))

    def _capabilities_in(self, target: Node | None) -> list[Val] | None:
        """``for major_minor_tuple in self.TARGET_CUDA_ARCHS``: a scan reads an unknown
        collection whose items the name table says are capabilities as holding the device's."""
        if target is None or target.type != "identifier" or self.table.parameters.fullmatch(text_of(target)) is None:
            return None
        self.dep = True
        return [val(self.cap, taint=_ITEM)]

    def e_lambda(self, node: Node, fr: Frame) -> Val:
        return val(Func(fr.mod.name, node.start_byte, "<lambda>"))

    def e_walrus(self, node: Node, fr: Frame) -> Val:
        v = self.eval(child(node, "value"), fr)
        if fr.env is not None:
            fr.env[text_of(child(node, "name"))] = v
        return v

    def e_await(self, node: Node, fr: Frame) -> Val:
        kids = node.named_children
        return self.eval(kids[0], fr) if kids else ANY

    def e_comprehension(self, node: Node, fr: Frame) -> Val:
        body = child(node, "body")
        clauses = [c for c in node.named_children if c.type in ("for_in_clause", "if_clause")]
        fors = [c for c in clauses if c.type == "for_in_clause"]
        if body is None or len(fors) != 1 or body.type == "pair":
            return ANY
        it = self.eval(child(fors[0], "right"), fr)
        target = child(fors[0], "left")
        items = items_of(it)
        if items is None and self.recording:
            items = self._capabilities_in(target)
        env = dict(fr.env or {})
        sub = Frame(fr.mod, env, fr.cls, fr)
        results: list[Val] = []
        t = it.taint
        definite = items is not None
        for item in items if items is not None else [ANY]:
            self.bind(target, item, env)
            keep = True
            for c in clauses[1:]:
                if c.type == "if_clause" and c.named_children:
                    cv = self.eval(c.named_children[0], sub)
                    t = merge(t, cv.taint)
                    tr = truth(cv)
                    if tr == {False} or not tr:
                        keep = False
                    elif len(tr) == 2:
                        definite = False
            v = self.eval(body, sub)
            t = merge(t, v.taint)
            if keep:
                results.append(v)
        if not definite:
            return Val(ANY.elems, t)
        out = product(results)
        if node.type == "set_comprehension":
            out = make((frozenset(x) if isinstance(x, tuple) else UNKNOWN for x in out.elems), out.taint)
        return out.with_taint(t)


def _device_arm(a: Val, b: Val) -> Val | None:
    """``get_cap() if override is None else override``: of two arms that a condition unrelated
    to the arch chooses between, the one that reads the device when the other is wholly
    unknown (a caller's override says nothing about the device; joined with it, every test of
    the result would go either way on every capability)."""
    for mine, other in ((a, b), (b, a)):
        if mine.taint is not None and other.taint is None and other.elems == ANY.elems:
            return mine
    return None


_SPLATS = ("list_splat", "parenthesized_list_splat", "dictionary_splat")


_ITEM = taint(GateKind.CAPABILITY_COMPARE, ResolvedBy.LITERAL)


@dataclass(frozen=True, slots=True)
class _Slice:
    parts: tuple


def _short(node: Node) -> str:
    n = node
    while n.type == "parenthesized_expression" and n.named_children:
        n = n.named_children[0]
    if n.type == "not_operator":
        return "not " + _short(child(n, "argument"))
    if n.type == "call":
        return one_line(text_of(child(n, "function")), 60) + "()"
    return one_line((n.text or b"").decode("utf-8", "replace"), 60)


def _concat(parts: list[Val]) -> Val:
    out = product(parts) if parts else val("")
    return make(
        ("".join(x) if isinstance(x, tuple) and all(isinstance(p, str) for p in x) else UNKNOWN for x in out.elems),
        out.taint,
    )


def _unescape(text: str, raw: bool) -> str:
    if raw or "\\" not in text:
        return text
    try:
        return codecs.decode(text, "unicode_escape")
    except Exception:
        return text


_LITERALS = frozenset({"integer", "float", "true", "false", "none"})


def _literal(node: Node | None) -> bool:
    """A constant written out: a number, a string without interpolation, a tuple of those."""
    if node is None:
        return False
    if node.type == "string":
        return not any(c.type == "interpolation" for c in node.children)
    if node.type == "tuple":
        return all(_literal(c) for c in node.named_children)
    return node.type in _LITERALS
