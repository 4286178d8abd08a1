"""List- and flag-shaped gates: what a call, decorator or assignment lists explicitly.

``get_nvcc_flags_list(supported_major_versions=[9, 10])`` admits every capability of those
majors (a compile-target filter); ``@supported_compute_capability([90, 100])`` lists
``major*10+minor``; ``admissible_archs = ["sm_90a"]`` and fixed nvcc flags
(``-gencode=arch=compute_90a,code=sm_90a``, ``TORCH_CUDA_ARCH_LIST="9.0a"``) name nvcc
targets, so they are gates in the *target* domain. Which keyword/call/name means what is
data (``lists`` in predicate-names.json); the nvcc flag syntax is nvcc's.
"""

from __future__ import annotations

import re

from tree_sitter import Node

from auditor import arch
from auditor.facts import code as source_code
from auditor.facts import names as names_mod
from auditor.model import Domain, GateKind, Guards, Resolution, ResolvedBy
from auditor.python.core import Frame
from auditor.python.gates import Found
from auditor.python.interp import Interp
from auditor.python.symbols import Module
from auditor.python.syntax import callee_name, child, context_of, line_of, one_line, text_of
from auditor.python.values import UNKNOWN

_GENCODE = re.compile(r"(?:-gencode|--generate-code)[= ]arch=compute_(\d+[af]?),code=\[?([A-Za-z0-9_,]+)\]?")
_ARCH_FLAG = re.compile(r"(?:^|\s)(?:-arch|--gpu-architecture)[= ](sm|compute)_(\d+[af]?)\b")
_ARCH_LIST_ITEM = re.compile(r"^(\d+)\.(\d)([af]?)(\+PTX)?$")
_NUMBER = re.compile(r"^(?:sm|compute)_(\d+)([af]?)$")


def list_tokens() -> re.Pattern:
    entries = names_mod.table().lists
    words = [_word(e) for e in entries]
    return re.compile(("|".join(map(re.escape, words)) + r"|compute_\d|sm_\d\d|TORCH_CUDA_ARCH_LIST").encode())


def scan_lists(it: Interp, mod: Module) -> list[Found]:
    """Find list/flag gates at the token positions of ``mod`` (no walk of the whole tree)."""
    out: list[Found] = []
    done: set[int] = set()
    by_word = {_word(e): e for e in names_mod.table().lists}
    for m in list_tokens().finditer(mod.data):
        word = m.group(0).decode()
        node = mod.root.descendant_for_byte_range(m.start(), m.end())
        if node is None:
            continue
        entry = by_word.get(word)
        found = _listed(it, mod, node, entry) if entry else _flags(mod, node, word)
        if found is not None and found[0] not in done:
            done.add(found[0])
            out.append(found[1])
    return out


def _word(entry: dict) -> str:
    """The word a list entry of the name table is found by."""
    return entry.get("keyword") or entry.get("call") or entry["assign"]


def _listed(it: Interp, mod: Module, node: Node, entry: dict):
    if "keyword" in entry:
        kw = _up(node, "keyword_argument")
        call = _up(kw, "call") if kw is not None else None
        if kw is None or call is None:
            return None
        value, where = child(kw, "value"), call
    elif "call" in entry:
        call = _up(node, "call")
        if call is None or callee_name(child(call, "function")) != entry["call"]:
            return None
        args = [c for c in child(call, "arguments").named_children if c.type != "comment"]
        if not args:
            return None
        value, where = args[0], call
    else:
        assign = _up(node, "assignment")
        if assign is None or not text_of(child(assign, "left")).endswith(entry["assign"]):
            return None
        right = assign.child_by_field_name("right")
        if right is None:  # an annotation without a value
            return None
        value, where = right, assign
    unit = entry["unit"]
    members = _enum_members(value) if unit == "target" else None
    items, resolution = (members, None) if members else _constant(it, mod, value)
    if items is None:
        return None
    if unit == "target":
        domain = Domain.TARGET
        admits = arch.sort_archs("target", (s for s in items if isinstance(s, str) and s in arch.target_order()))
    else:
        domain = Domain.DEVICE
        admits = tuple(c for c in arch.capabilities() if _listed_cap(c, items, unit))
    decorator = where.parent if where.parent is not None and where.parent.type == "decorator" else None
    body = where
    context_node = where
    guards = Guards.TAKE
    if decorator is not None:
        definition = child(decorator.parent, "definition") if decorator.parent is not None else None
        if definition is not None:
            body = definition
            context_node = child(definition, "body") or definition
            if "check" in entry and not _consulted(mod, text_of(child(definition, "name")), entry["check"]):
                guards = Guards.DEFINE
    elif unit == "target":
        cls = _up(where, "class_definition")
        body = cls or where
    return where.id, Found(
        line=line_of(where),
        col=where.start_point[1],
        end_line=where.end_point[0] + 1,
        kind=GateKind.MAJOR_LIST,
        expression=one_line(mod.text(where), 400),
        domain=domain,
        admits=admits,
        context=context_of(context_node),
        resolved_by=ResolvedBy.DEFINITION if resolution else ResolvedBy.LITERAL,
        resolutions=(resolution,) if resolution else (),
        guards=guards,
        body_lines=(line_of(body), body.end_point[0] + 1),
    )


def _consulted(mod: Module, name: str, check: str) -> bool:
    """Whether the check a decorator attaches to function ``name`` can be consulted: its module
    hands the function on as a value (``common_check=name``, ``{"cudnn": name}``) or calls the
    check on it. A public function decorated only to carry its list (``@supported_compute_capability([120])``
    on an API) attaches metadata: nothing turns a device away there."""
    text = source_code.blank(mod.data.decode("utf-8", "replace"), "python")[
        0
    ]  # docstrings and ``__all__`` name no value
    word = re.escape(name)
    if re.search(rf"\b{word}\s*\.\s*{re.escape(check)}\s*\(", text):
        return True
    for m in re.finditer(rf"(?<![\w.]){word}\b(?!\s*[(.])", text):  # not a call
        line = text[text.rfind("\n", 0, m.start()) + 1 : text.find("\n", m.end())]
        if not re.match(rf"\s*(?:async\s+)?def\s+{word}\b|\s*(?:from\s|import\s)", line):
            return True
    return False


def _enum_members(node: Node) -> tuple[str, ...] | None:
    """``[Arch.sm_100a, Arch.sm_103a]``: members of an arch enum, named for the nvcc targets they
    stand for (CuTe DSL), read by name rather than by the value the enum gives them."""
    if node.type not in ("list", "tuple", "set"):
        return None
    names = []
    for c in node.named_children:
        if c.type == "comment":
            continue
        attr = child(c, "attribute") if c.type == "attribute" else None
        if attr is None or not _NUMBER.match(text_of(attr)):
            return None
        names.append(text_of(attr))
    return tuple(names) or None


def _listed_cap(label: str, items, unit: str) -> bool:
    cap = arch.Capability.parse(label)
    return (cap.major if unit == "major" else cap.number) in items


def _constant(it: Interp, mod: Module, node: Node):
    """The elements of a literal list/tuple/set, or of a module constant naming one."""
    resolution = None
    if node.type == "identifier":
        name = text_of(node)
        bs = mod.bindings.get(name)
        if not bs or not all(b.kind == "value" for b in bs):
            return None, None
        site = bs[-1].node
        assert site is not None  # a value binding has its expression
        resolution = Resolution(name, mod.path, line_of(site), one_line(mod.text(site)))
    elif node.type not in ("list", "tuple", "set"):
        return None, None
    with it.quiet():
        v = it.eval(node, Frame(mod, None))
    if len(v.elems) != 1:
        return None, None
    x = v.only()
    if x is UNKNOWN or not isinstance(x, (tuple, frozenset)):
        return None, None
    return tuple(x), resolution


def _flags(mod: Module, node: Node, word: str):
    """A string literal holding fixed nvcc target flags, or a TORCH_CUDA_ARCH_LIST value."""
    if word == "TORCH_CUDA_ARCH_LIST":
        if node.type == "comment":  # prose about the variable, not a value of it
            return None
        stmt = node
        while stmt.parent is not None and stmt.type not in ("expression_statement", "pair", "keyword_argument", "call"):
            stmt = stmt.parent
        for s in _strings(stmt):
            text = _string_text(s)
            if text is None or text == "TORCH_CUDA_ARCH_LIST" or _prose(s):
                continue
            admits = _arch_list(text)
            if admits is not None:
                return s.id, _flag_gate(mod, s, admits)
        return None
    s = _up(node, "string")
    if s is None or _prose(s):
        return None
    text = _string_text(s)
    if text is None:
        return None
    admits = _gencode(text)
    if admits is None:
        return None
    return s.id, _flag_gate(mod, s, admits)


def _prose(s: Node) -> bool:
    """A string that is a statement of its own (a docstring, a comment written as a string): it
    describes flags, it holds none that a build uses."""
    p = s.parent
    while p is not None and p.type == "concatenated_string":
        p = p.parent
    return p is not None and p.type == "expression_statement" and p.named_child_count == 1


def _flag_gate(mod: Module, s: Node, admits) -> Found:
    stmt = s
    while stmt.parent is not None and stmt.parent.type not in ("block", "module"):
        stmt = stmt.parent
    return Found(
        line=line_of(s),
        col=s.start_point[1],
        end_line=s.end_point[0] + 1,
        kind=GateKind.GENCODE_FLAGS,
        expression=one_line(mod.text(s), 400),
        domain=Domain.TARGET,
        admits=arch.sort_archs("target", admits),
        context=context_of(s),
        body_lines=(line_of(stmt), stmt.end_point[0] + 1),
    )


def _gencode(text: str) -> set[str] | None:
    """Targets a fixed nvcc flag string compiles for (with what its PTX can JIT to)."""
    out: set[str] = set()
    hit = False
    for m in _GENCODE.finditer(text):
        hit = True
        for code in m.group(2).split(","):
            out |= _code(code)
    for m in _ARCH_FLAG.finditer(text):
        hit = True
        number = m.group(2)
        out |= _code(f"sm_{number}") if m.group(1) == "sm" else set()
        out |= _code(f"compute_{number}")
    return out if hit else None


def _arch_list(text: str) -> set[str] | None:
    items = [t for t in re.split(r"[;,\s]+", text.strip()) if t]
    out: set[str] = set()
    for item in items:
        m = _ARCH_LIST_ITEM.match(item)
        if not m:
            return None
        number = f"{m.group(1)}{m.group(2)}{m.group(3)}"
        out |= _code(f"sm_{number}")
        if m.group(4):
            out |= _code(f"compute_{number}")
    return out if items else None


def _code(code: str) -> set[str]:
    """``sm_90a`` -> itself; PTX ``compute_90`` -> every target it can JIT to (:func:`arch.jit_targets`)."""
    if code.startswith("sm_"):
        return {code} if code in arch.device_targets() else set()
    return arch.jit_targets(code) if _NUMBER.match(code) else set()


def _strings(node: Node):
    stack = [node]
    while stack:
        n = stack.pop()
        if n.type == "string":
            yield n
            continue
        stack.extend(reversed(n.named_children))


def _string_text(s: Node) -> str | None:
    if any(c.type == "interpolation" for c in s.children):
        return None
    return "".join((c.text or b"").decode("utf-8", "replace") for c in s.children if c.type == "string_content")


def _up(node: Node | None, kind: str) -> Node | None:
    n = node
    while n is not None and n.type != kind:
        if n.type in ("block", "module"):
            return None
        n = n.parent
    return n
