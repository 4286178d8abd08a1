"""Parameters that hold the device capability, and the form in which a function's body reads them.

A function that tests such a parameter (``return capability.major in [9, 10]``, ``if
compute_capability < 100: return False, ...``) is a predicate of it: a scan evaluates its body
with the parameter bound to each capability, so the test is a gate at the definition, and
each call with a known argument is evaluated on that argument as before. Which parameters
qualify is data (``api.parameters`` in the name table: names and annotation types); the
form — a capability ``(major, minor)``, ``major*10+minor`` or the major alone — is read off
how the body uses the name, as a reader would.
"""

from __future__ import annotations

from enum import Enum

from tree_sitter import Node

from auditor.facts.names import Table
from auditor.python.syntax import child, text_of


class Form(Enum):
    """How a capability parameter holds the capability."""

    CAPABILITY = "capability"
    """``(major, minor)`` with ``.major``, ``.minor``, ``.to_int()``: a platform's ``DeviceCapability``."""
    NUMBER = "number"
    """``major * 10 + minor``: 90, 100, 120."""
    MAJOR = "major"
    """The major alone: 9, 10, 12."""


_CAP_ATTRS = frozenset({"major", "minor", "to_int", "as_version_str"})
_NOT_CAPABILITY = ("str", "bool", "float", "dict", "Callable")
"""Annotations that say a parameter is something else, whatever its name."""
NUMBER_FROM = 20
"""An integer compared with a parameter is ``major*10+minor`` from here on (the smallest is 70)."""


def capability_parameters(node: Node, table: Table) -> dict[str, Form]:
    """The parameters of a ``def`` that hold the device capability, with their form; {} for
    a function with none (most)."""
    params = node.child_by_field_name("parameters")
    body = child(node, "body") if node.type == "function_definition" else None
    if params is None or body is None:
        return {}
    fname = child(node, "name")
    if fname is not None and text_of(fname).lstrip("_") in table.tests:
        return {}  # the model of an API test says what its argument is: a threshold
    device: frozenset[str] | None = None  # walked for only where a parameter qualifies (few)
    out: dict[str, Form] = {}
    for p in params.named_children:
        name_node = p if p.type == "identifier" else p.child_by_field_name("name")
        if name_node is None and p.type == "typed_parameter":
            name_node = next((c for c in p.named_children if c.type == "identifier"), None)
        if name_node is None or name_node.type != "identifier":
            continue
        name = text_of(name_node)
        ann = p.child_by_field_name("type")
        annotation = text_of(ann) if ann is not None else ""
        typed = any(t in annotation for t in table.capability_types)
        if not typed and (table.parameters.fullmatch(name) is None or any(w in annotation for w in _NOT_CAPABILITY)):
            continue
        if device is None:
            device = _device_names(body, table)
        form = _form_of_uses(body, name, table, device)
        if form is None:
            continue
        if form is _ANY:
            form = Form.NUMBER if _integer(annotation) and not typed else Form.CAPABILITY
        out[name] = form
    return out


def _integer(annotation: str) -> bool:
    """``int``, ``int | None``, ``Optional[int]``: a number, not a ``tuple[int, int]``."""
    return "int" in annotation and "uple" not in annotation


_ANY = object()
"""No use says which form: the annotation (or the capability itself) decides."""


def _device_names(body: Node, table: Table) -> frozenset[str]:
    """Names a body assigns from a capability source (``current = self.get_device_capability()``):
    a parameter compared with one of them is a threshold, not the capability."""
    out = set()
    stack = [body]
    while stack:
        n = stack.pop()
        if n.type in ("function_definition", "class_definition", "lambda"):
            continue
        if n.type == "assignment":
            left, right = n.child_by_field_name("left"), n.child_by_field_name("right")
            if left is not None and left.type == "identifier" and right is not None and _reads_device(right, table, ()):
                out.add(text_of(left))
        stack.extend(n.named_children)
    return frozenset(out)


def _reads_device(node: Node, table: Table, device) -> bool:
    """Whether an operand is (a part of) the device's capability as a source gives it."""
    n = node
    while n.type in ("attribute", "subscript", "call", "parenthesized_expression"):
        if n.type == "call":
            f = child(n, "function")
            if f is not None and text_of(f).rsplit(".", 1)[-1] in table.sources:
                return True
            n = f
        elif n.type == "parenthesized_expression":
            n = n.named_children[0] if n.named_children else n
            if n.type == "parenthesized_expression":
                break
        else:
            n = n.named_children[0]
        if n is None:
            return False
    return n.type == "identifier" and text_of(n) in device


def _compared_with_device(n: Node, table: Table, device: frozenset[str]) -> bool:
    """``current.to_int() // 10 == capability // 10``: the parameter (through arithmetic) on
    one side of a comparison whose other side is the device's own capability."""
    mine, p = n, n.parent
    while p is not None and p.type in ("binary_operator", "parenthesized_expression", "unary_operator"):
        mine, p = p, p.parent
    if p is None or p.type != "comparison_operator":
        return False
    return any(c.id != mine.id and _reads_device(_bare(c), table, device) for c in p.named_children)


def _bare(node: Node) -> Node:
    """An operand without the arithmetic around what it reads (``current.to_int() // 10``)."""
    while node.type in ("binary_operator", "parenthesized_expression") and node.named_children:
        node = node.named_children[0]
    return node


def _form_of_uses(body: Node, name: str, table: Table, device: frozenset[str] = frozenset(), seen=frozenset()):
    """The form the uses of ``name`` in ``body`` read (a use as a string means it is none); a
    value copied to another name (``cc = get_major() if cc_arg is None else cc_arg``) has the
    form the uses of that name read."""
    votes: set = set()
    stack = [body]
    seen = seen | {name}
    while stack:
        n = stack.pop()
        if n.type in ("function_definition", "class_definition", "lambda"):
            continue
        if n.type == "identifier" and text_of(n) == name:
            copy = _copied_to(n)
            if copy is not None and copy not in seen:
                vote = _form_of_uses(body, copy, table, device, seen)
                vote = None if vote is _ANY else vote
            else:
                vote = _use(n, table, device)
            if vote is False:
                return None
            if vote is not None:
                votes.add(vote)
            continue
        stack.extend(n.named_children)
    if not votes:
        return _ANY
    for form in (Form.CAPABILITY, Form.NUMBER, Form.MAJOR):
        if form in votes:
            return form
    return _ANY


def _copied_to(n: Node) -> str | None:
    """The name a use is assigned to whole, directly or as an arm of a conditional expression."""
    p = n
    while p.parent is not None and (
        p.parent.type == "parenthesized_expression"
        or (p.parent.type == "conditional_expression" and p.parent.named_children.index(p) != 1)
    ):
        p = p.parent
    a = p.parent
    if a is None or a.type != "assignment" or a.child_by_field_name("right") != p:
        return None
    left = a.child_by_field_name("left")
    return text_of(left) if left is not None and left.type == "identifier" else None


def _use(n: Node, table: Table, device: frozenset[str]):
    """What one use of the parameter says of its form: a Form, False (not a capability), or None."""
    p = n.parent
    if p is None:
        return None
    if _compared_with_device(n, table, device):
        return False
    if p.type == "attribute" and child(p, "object").id == n.id:
        return Form.CAPABILITY if text_of(child(p, "attribute")) in _CAP_ATTRS else None
    if p.type == "subscript" and child(p, "value").id == n.id:
        return Form.CAPABILITY
    if p.type == "comparison_operator":
        membership = any(text_of(c).split()[-1] == "in" for c in p.children if not c.is_named)
        for other in p.named_children:
            if other.id != n.id:
                vote = _members_form(other, table) if membership else _literal_form(other, table)
                if vote is not None:
                    return vote
    return None


def _members_form(node: Node, table: Table):
    """``cc in (100, 103)``: the form of the members of a literal container."""
    if node.type not in ("tuple", "list", "set"):
        return _literal_form(node, table)
    return _first_form(_literal_form(c, table) for c in node.named_children if c.type != "comment")


def _first_form(votes):
    forms = set(votes) - {None}
    if False in forms:
        return False
    for form in (Form.CAPABILITY, Form.NUMBER, Form.MAJOR):
        if form in forms:
            return form
    return None


def _literal_form(node: Node, table: Table):
    """The form a value compared with the parameter implies."""
    t = node.type
    if t == "integer":
        try:
            return Form.NUMBER if int(text_of(node).replace("_", ""), 0) >= NUMBER_FROM else Form.MAJOR
        except ValueError:
            return None
    if t == "string":
        return False
    if t == "call":
        f = child(node, "function")
        last = text_of(f).rsplit(".", 1)[-1] if f is not None else ""
        return Form.CAPABILITY if last in table.capability_types else None
    if t == "tuple":
        items = [c for c in node.named_children if c.type != "comment"]
        if len(items) == 2 and all(_literal_form(c, table) is Form.MAJOR for c in items):
            return Form.CAPABILITY  # (9, 0)
    if t == "parenthesized_expression":
        return _first_form(_literal_form(c, table) for c in node.named_children)
    return None
