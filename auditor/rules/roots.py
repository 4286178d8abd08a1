"""One finding per root cause: a definition used at many sites, a vendored file copied many times.

A predicate, flag or derived macro that a condition names carries the decision for every
gate that uses it; a header that three vendored copies of CUTLASS share is one file. Their
findings are folded into one, at the first site, listing the others (``also``) and naming the
root (``root``). Vendored copies are known by their folder (``data/vendored.json``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import replace
from functools import cache

from auditor import datafiles
from auditor.model import Finding, Gate, ResolvedBy

SHOWN = 4
"""Other sites a message names; the rest are counted."""


@cache
def _folders() -> re.Pattern:
    raw = datafiles.read_json("vendored.json")
    return re.compile("|".join(f"(?:{p})" for p in raw["folders"]))


def vendored(path: str) -> tuple[str, str]:
    """(tree, path inside it) for a vendored file; ("", "") for the package's own. The tree is
    the outermost vendored folder (``third_party``); the path starts at the innermost one
    (``cutlass/arch/config.h``), which is what two copies of a library share."""
    folders = [i for i, part in enumerate(path.split("/")[:-1]) if _folders().fullmatch(part)]
    if not folders:
        return "", ""
    parts = path.split("/")
    return parts[folders[0]], "/".join(parts[folders[-1] :])


def root_of(gate: Gate) -> str:
    """The definition a condition names and resolves through (``is_sm100_supported`` in
    ``utils.py:40``), as ``name (file:line)``; "" when the condition is its own root."""
    if gate.resolved_by != ResolvedBy.DEFINITION:
        return ""
    named = sorted(
        {(r.name, r.file, r.line) for r in gate.resolutions if re.search(rf"\b{re.escape(r.name)}\b", gate.expression)}
    )
    return "; ".join(f"`{n}` ({f}:{ln})" for n, f, ln in named)


def _defined(gate: Gate) -> tuple[tuple[str, str, int], ...]:
    if not root_of(gate):
        return ()
    return tuple(
        sorted(
            {
                (r.name, vendored(r.file)[1] or r.file, r.line)
                for r in gate.resolutions
                if re.search(rf"\b{re.escape(r.name)}\b", gate.expression)
            }
        )
    )


def fold(findings: Iterable[Finding], gates: Mapping[str, Gate]) -> list[Finding]:
    """Findings with one per (rule, root cause): copies of a vendored file and uses of one
    definition folded into the first, which lists the others."""
    groups: dict[tuple, list[Finding]] = {}
    for f in findings:
        groups.setdefault(_key(f, gates.get(f.gate)), []).append(f)
    out = []
    for key, group in groups.items():
        group.sort(key=lambda f: (f.file, f.line))
        first = group[0]
        gate = gates.get(first.gate)
        tree = vendored(first.file)[0]
        root = root_of(gate) if gate is not None else ""
        if len(group) == 1 or key[0] == "one":
            out.extend(replace(f, vendored=vendored(f.file)[0]) for f in group)
            continue
        also = tuple((f.file, f.line) for f in group[1:])
        out.append(replace(first, also=also, root=root, vendored=tree, message=first.message + _note(root, also)))
    return out


def _key(f: Finding, gate: Gate | None) -> tuple:
    """What findings of one cause share: the rule and the condition, and the definitions it
    names (a vendored definition by its path inside the tree, so that copies agree), or for a
    vendored file without one, the path inside the tree and the line."""
    if gate is None:
        return ("one", id(f))
    tree, inside = vendored(f.file)
    root = _defined(gate)
    if root:
        return ("root", f.input, f.rule, gate.expression, root)
    if tree:
        return ("copy", f.input, f.rule, inside, gate.line, gate.expression)
    return ("one", id(f))


def _note(root: str, also: tuple[tuple[str, int], ...]) -> str:
    sites = ", ".join(f"{file}:{line}" for file, line in also[:SHOWN])
    more = f" and {len(also) - SHOWN} more" if len(also) > SHOWN else ""
    cause = f"one root cause, {root}; " if root else "identical copies; "
    return f" ({cause}also at {sites}{more})"
