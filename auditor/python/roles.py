"""The role a Python branch plays in its decision, read from what its body does.

A branch that gives up (``raise``, ``pytest.skip``, ``return False, "needs sm90"``,
``unsupported.append(...)``) is a rejection: what matters is what it lets through. A branch
that only logs, or only keeps a reason for an error message, is no code path at all.
Everything else is the code its condition admits.
The names are data (``data/branch-roles.json``), so a library's own idiom is a line there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

from tree_sitter import Node

from auditor import datafiles
from auditor.facts import names
from auditor.model import Guards
from auditor.python.syntax import callee_name, child, context_of, text_of


@dataclass(frozen=True, slots=True)
class _Roles:
    log_calls: re.Pattern
    reject_collections: re.Pattern
    collect_calls: frozenset[str]
    error_returns: frozenset[str]
    neutral: frozenset[str]
    log_owners: frozenset[str]
    message_names: re.Pattern
    reason_returns: frozenset[str]
    fallback_words: re.Pattern
    tuning_names: re.Pattern
    shape_names: re.Pattern


@cache
def _roles() -> _Roles:
    raw = datafiles.read_json("branch-roles.json")

    def either(patterns: list[str], flags: int = 0) -> re.Pattern:
        return re.compile("|".join(f"(?:{p})" for p in patterns), flags)

    return _Roles(
        log_calls=either(raw["log_calls"]),
        reject_collections=either(raw["reject_collections"]),
        collect_calls=frozenset(raw["collect_calls"]),
        error_returns=frozenset(raw["error_returns"]),
        neutral=frozenset(raw["neutral"]),
        log_owners=frozenset(raw["log_owners"]),
        message_names=either(raw["message_names"]),
        reason_returns=frozenset(raw["reason_returns"]),
        fallback_words=either(raw["fallback_words"], re.I),
        tuning_names=either(raw["tuning_names"], re.I),
        shape_names=either(raw["shape_names"], re.I),
    )


def role(block: Node | None) -> Guards:
    """:attr:`Guards.REJECT` when a statement of the block gives up, :attr:`Guards.LOG` when
    every statement that does something only logs, :attr:`Guards.TUNE` when those that do more
    only set tuning values, :attr:`Guards.TAKE` otherwise (and for no block)."""
    if block is None:
        return Guards.TAKE
    kinds = [_statement(s) for s in block.named_children]
    if Guards.REJECT in kinds or _falls_back(block):
        return Guards.REJECT
    acting = {k for k in kinds if k is not None}
    if acting == {Guards.LOG}:
        return Guards.LOG
    return Guards.TUNE if acting and acting <= {Guards.LOG, Guards.TUNE} else Guards.TAKE


def shape_name(name: str) -> bool:
    """Whether a name is a parameter of a problem shape (``num_q_heads``, ``head_dim_qk``, ``page_size``)."""
    return _roles().shape_names.fullmatch(name) is not None


def rejects(stmt: Node) -> bool:
    """Whether one statement gives up (see :func:`role`)."""
    return _statement(stmt) == Guards.REJECT


def _falls_back(block: Node) -> bool:
    """A branch that says it falls back (``logger.warning("…; falling back to SDPA")``) and
    returns, or that only sets a value back and says so (``logger.warning("…, defaulting to FA
    version 2"); fa_version = 2``, also across the arms of an ``if`` inside it): the path its
    condition leads to is the fallback."""
    statements = [s for s in block.named_children if s.type != "comment"]
    if statements and statements[-1].type == "return_statement":
        return _says_fallback(statements[:-1])
    flat = _flat(block)
    sets = {_set_name(s) for s in flat} - {None}
    return len(sets) == 1 and "" not in sets and _says_fallback(flat)


def _says_fallback(statements: list[Node]) -> bool:
    """Whether one of the statements logs that it falls back."""
    return any(
        _statement(s) == Guards.LOG and _roles().fallback_words.search(text_of(s)) is not None for s in statements
    )


def _flat(block: Node) -> list[Node]:
    """The statements of a block and of the arms of the ``if`` statements in it, in order."""
    out = []
    for s in block.named_children:
        if s.type == "if_statement":
            arms = [s, *(c for c in s.named_children if c.type in ("elif_clause", "else_clause"))]
            out += [t for arm in arms if (body := child(arm, "consequence") or child(arm, "body")) for t in _flat(body)]
        elif s.type != "comment":
            out.append(s)
    return out


def _set_name(stmt: Node) -> str | None:
    """What a statement sets: the name a plain assignment sets, None for a log or nothing,
    "" for anything else."""
    kind = _statement(stmt)
    if kind is None or kind == Guards.LOG:
        return None
    expr = stmt.named_children[0] if stmt.type == "expression_statement" and stmt.named_children else None
    if expr is None or expr.type != "assignment" or child(expr, "left") is None:
        return ""
    left = child(expr, "left")
    return text_of(left) if left.type in ("identifier", "attribute") else ""


def _reason_return(stmt: Node) -> bool:
    """``return "device is not SM120"``: a sentence saying why not (``return "fa3"`` names a route)."""
    values = [c for c in stmt.named_children if c.type != "comment"]
    return (
        len(values) == 1
        and values[0].type in _roles().reason_returns
        and any(c.type == "string_content" and " " in text_of(c) for c in values[0].named_children)
    )


def _returns_tuning(stmt: Node) -> bool:
    """``return SAGE_KEY_BLOCK_SIZE``, or ``return 128`` in ``def _key_block_size()``: the
    function answers a tuning value, and the branch chooses which."""
    values = [c for c in stmt.named_children if c.type != "comment"]
    if len(values) != 1:
        return False
    value = values[0]
    if value.type in ("identifier", "attribute"):
        return _roles().tuning_names.fullmatch(text_of(value).rpartition(".")[2]) is not None
    function = context_of(stmt).rpartition(".")[2]  # a return is inside its function
    return value.type in ("integer", "float") and _roles().tuning_names.fullmatch(function.lstrip("_")) is not None


def error_return(stmt: Node) -> bool:
    """``return False, "why"`` (or ``return (False, "why")``): a tuple whose first element is an error shape."""
    if stmt.type != "return_statement":
        return False
    values = [c for c in stmt.named_children if c.type != "comment"]
    if len(values) != 1 or values[0].type not in ("expression_list", "tuple"):
        return False
    first = next((c for c in values[0].named_children if c.type != "comment"), None)
    return first is not None and first.type in _roles().error_returns


def _statement(stmt: Node) -> Guards | None:
    """One statement's part: a rejection, a log call, other code (TAKE), or nothing (None)."""
    table = _roles()
    if stmt.type in table.neutral:
        return None
    if (
        stmt.type == "raise_statement"
        or error_return(stmt)
        or (stmt.type == "return_statement" and _reason_return(stmt))
    ):
        return Guards.REJECT
    if stmt.type == "return_statement" and _returns_tuning(stmt):
        return Guards.TUNE
    if stmt.type != "expression_statement" or not stmt.named_children:
        return Guards.TAKE
    expr = stmt.named_children[0]
    if expr.type == "string" and f"{stmt.type}:string" in table.neutral:
        return None
    if expr.type in ("assignment", "augmented_assignment"):
        return _assigns(child(expr, "left"))
    if expr.type != "call":
        return Guards.TAKE
    function = child(expr, "function")
    name = callee_name(function)
    if names.rejects(name) or _collects_unsupported(function, name):
        return Guards.REJECT
    if table.log_calls.fullmatch(name) or _on_logger(function):
        return Guards.LOG
    return Guards.TAKE


def _assigns(left: Node | None) -> Guards:
    """An assignment's part: keeping a message (LOG), setting tuning values only (TUNE:
    ``BLOCK_N, num_warps = …``, ``self.split_k = 1``), or other code."""
    targets = left.named_children if left is not None and left.type in ("pattern_list", "tuple_pattern") else [left]
    last = [text_of(t).rpartition(".")[2] for t in targets if t is not None]
    if len(last) == 1 and _roles().message_names.fullmatch(last[0]):
        return Guards.LOG
    if last and all(_roles().tuning_names.fullmatch(name) for name in last):
        return Guards.TUNE
    return Guards.TAKE


def _collects_unsupported(function: Node | None, name: str) -> bool:
    """``unsupported.append(...)``, ``self.errors.add(...)``: recording why the case is not supported."""
    if function is None or function.type != "attribute" or name not in _roles().collect_calls:
        return False
    owner = child(function, "object")
    last = text_of(owner).rpartition(".")[2]
    return _roles().reject_collections.fullmatch(last) is not None


def _on_logger(function: Node | None) -> bool:
    """A method of an object that is a logger (``logger.warning_once``, ``log.info``, ``warnings.warn``)."""
    if function is None or function.type != "attribute":
        return False
    return text_of(child(function, "object")).rpartition(".")[2] in _roles().log_owners


_HANDED = ("tuple", "list", "argument_list", "keyword_argument", "expression_list")
"""Where a value is handed to code (a kernel's parameters, a call's arguments), not tested."""


def tuned_with(value: Node) -> bool:
    """A name handed to code that its function unpacked from one configuration together with
    tuning values (``block_h, block_n, splits, trans_qk, num_ctas = config``, then
    ``(…, trans_qk)`` among a kernel's parameters): a setting of that configuration, the same
    code on either side. Most of the other names unpacked with it, two at least, are tuning
    names ('tuning_names')."""
    if value.type != "identifier" or value.parent is None or value.parent.type not in _HANDED:
        return False
    name = text_of(value)
    scope: Node | None = value.parent
    while scope is not None and scope.type != "function_definition":
        scope = scope.parent
    stack = [scope] if scope is not None else []
    while stack:
        node = stack.pop()
        if node.type == "assignment":
            left = child(node, "left")
            if left is not None and left.type in ("pattern_list", "tuple_pattern"):
                others = [text_of(t) for t in left.named_children if t.type == "identifier"]
                if name in others:
                    others.remove(name)
                    tuned = [n for n in others if _roles().tuning_names.fullmatch(n)]
                    if len(tuned) >= 2 and 2 * len(tuned) > len(others):
                        return True
            continue
        stack.extend(c for c in node.named_children if c.type != "function_definition")
    return False
