"""One finding per root cause: a definition used at many sites, a vendored file copied many times.

A predicate, flag or derived macro that a condition names carries the decision for every
gate that uses it (a flag tested at several places of one function is one decision); a header that three vendored copies of CUTLASS share is one file. Their
findings are folded into one, at the first site, listing the others (``also``) and naming the
root (``root``). Vendored copies are known by their folder (``data/vendored.json``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import replace
from functools import cache

from auditor import datafiles
from auditor.model import Finding, Gate, Resolution, ResolvedBy

SHOWN = 4
"""Other sites a message names; the rest are counted."""
_FLAG = re.compile(r"(?:not\s+)?[A-Za-z_][\w.]*")
"""A condition that is one flag (``use_psum_layout``, ``not self.use_fused``): its uses in one
function are one decision made once, where the flag is set."""
_CALL_ARGS = re.compile(r"\((?:[^()]|\([^()]*\))*\)")
"""A call's arguments: ``fusion(x.shape[0])`` and ``fusion(n)`` are one use of one definition."""


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


def named_definitions(gate: Gate) -> tuple[Resolution, ...]:
    """The definitions a condition names and resolves through (``is_sm100_supported``, a
    derived macro), in order; none for a literal condition."""
    if gate.resolved_by != ResolvedBy.DEFINITION:
        return ()
    found = {r for r in gate.resolutions if re.search(rf"\b{re.escape(r.name)}\b", gate.expression)}
    return tuple(sorted(found, key=lambda r: (r.name, r.file, r.line)))


def root_of(gate: Gate) -> str:
    """The root cause a condition names, as ``name (file:line)``; "" when it is its own root."""
    return "; ".join(f"`{r.name}` ({r.file}:{r.line})" for r in named_definitions(gate))


def _defined(gate: Gate) -> tuple[tuple[str, str, int], ...]:
    """The named definitions, a vendored one by its path inside the tree (copies agree)."""
    return tuple(sorted({(r.name, vendored(r.file)[1] or r.file, r.line) for r in named_definitions(gate)}))


def fold(findings: Iterable[Finding], gates: Mapping[str, Gate]) -> list[Finding]:
    """Findings with one per (rule, root cause): copies of a vendored file and uses of one
    definition folded into the first, which lists the others. When the definition itself
    carries a finding of the same rule (the allow-list inside ``apply_fusion()``), its call
    sites are folded into that one."""
    groups: dict[tuple, list[Finding]] = {}
    for f in findings:
        groups.setdefault(_key(f, gates.get(f.gate)), []).append(f)
    inside = _inside_definitions(groups, gates)
    for key in [k for k in groups if k[0] == "root"]:
        first = groups[key][0]
        gate = gates[first.gate]
        homes = [inside.get((r.name, r.file, first.rule)) for r in named_definitions(gate)]
        home = next((h for h in homes if h is not None and h != key and h in groups), None)
        if home is not None:
            groups[home] += groups.pop(key)
    out: list[Finding] = []
    for key, group in groups.items():
        group.sort(key=lambda f: (f.file, f.line))
        first = group[0]
        if len(group) == 1 or key[0] == "one":
            out.extend(replace(f, vendored=vendored(f.file)[0]) for f in group)
            continue
        roots = [root_of(g) for f in group if (g := gates.get(f.gate)) is not None]
        root = next((r for r in roots if r), "")
        if not root and key[0] == "flag":
            root = f"the flag `{key[5].removeprefix('not ').strip()}` in `{key[4]}`"
        also = tuple((f.file, f.line) for f in group[1:])
        tree = vendored(first.file)[0]
        out.append(replace(first, also=also, root=root, vendored=tree, message=first.message + _note(root, also)))
    return out


def _inside_definitions(groups: Mapping[tuple, list[Finding]], gates: Mapping[str, Gate]) -> dict[tuple, tuple]:
    """(name, file, rule) of a function that holds a finding -> that finding's group key: where
    the call sites of a definition with a finding of its own go."""
    out: dict[tuple, tuple] = {}
    for key, group in groups.items():
        for f in group:
            gate = gates.get(f.gate)
            if gate is not None and gate.context:
                out.setdefault((gate.context.rpartition(".")[2], gate.file, f.rule), key)
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
        return ("root", f.input, f.rule, _CALL_ARGS.sub("()", gate.expression), gate.admits, root)
    if gate.context and _FLAG.fullmatch(gate.expression):
        return ("flag", f.input, f.rule, f.file, gate.context, gate.expression, gate.admits)
    if tree:
        return ("copy", f.input, f.rule, inside, gate.line, gate.expression)
    return ("one", id(f))


def _note(root: str, also: tuple[tuple[str, int], ...]) -> str:
    sites = ", ".join(f"{file}:{line}" for file, line in also[:SHOWN])
    more = f" and {len(also) - SHOWN} more" if len(also) > SHOWN else ""
    cause = f"one root cause, {root}; " if root else "identical copies; "
    return f" ({cause}also at {sites}{more})"
