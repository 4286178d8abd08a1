"""One finding per root cause: a definition used at many sites, a condition written many times.

A predicate, flag or derived macro that a condition names carries the decision for every gate
that uses it; when the definition holds a finding of its own (the decision that sets the flag),
the uses fold into that one. A flag tested at several places of one function is one decision;
the same condition repeated in one file (or in copies of one vendored file) is one cause. The
folded finding lists the other sites (``also``) and names the root (``root``). A class whose
constructor or support check surely rejects a target is the one cause of its methods' gates for
that target: the target never reaches them. Rules that judge routes (ARCH001-003, ARCH007) say
one thing of a decision and fold together; the others by rule. Vendored copies are known by
their folder (``data/vendored.json``).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from functools import cache

from auditor import datafiles, verdicts
from auditor.facts import causes
from auditor.model import Classification, Finding, Gate, Guards, Resolution, Severity, Target

SHOWN = 4
"""Other sites a message names; the rest are counted."""
_FLAG = re.compile(r"(?:not\s+)?([A-Za-z_][\w.]*)")
"""A condition that is one flag (``use_psum_layout``, ``not self.use_fused``): its uses in one
function are one decision made once, where the flag is set."""


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
    """The root cause a condition names, as ``name (file:line)``; "" when it is its own root."""
    return "; ".join(f"`{r.name}` ({r.file}:{r.line})" for r in causes.named_definitions(gate))


def _defined(gate: Gate) -> tuple[tuple[str, str, int], ...]:
    """The named definitions, a vendored one by its path inside the tree and not its line (two
    releases of CUTLASS define ``CUTLASS_ARCH_TCGEN_ENABLED`` in one header, lines apart)."""
    return tuple(sorted({_where(r) for r in causes.named_definitions(gate)}))


def _where(r: Resolution) -> tuple[str, str, int]:
    inside = vendored(r.file)[1]
    return (r.name, inside, 0) if inside else (r.name, r.file, r.line)


def fold(findings: Iterable[Finding], gates: Mapping[str, Gate], targets: Sequence[Target] = ()) -> list[Finding]:
    """Findings with one per root cause, listing the other sites (``also``).

    Findings group by what they share (:func:`_key`); a group whose condition resolves through
    a definition that carries a finding of its own (the decision inside
    ``_compute_enable_deep_gemm()``, the assignment ``use_x = …``) joins that finding's group,
    transitively, whatever the use's own condition text (``X``, ``not X``, ``X and not Y``).
    A group in the methods of a class whose constructor or support check surely rejects every
    target it turns away joins that rejection's group: those targets never reach its methods.
    """
    groups: dict[tuple, list[Finding]] = {}
    for f in findings:
        groups.setdefault(_key(f, gates.get(f.gate)), []).append(f)
    homes = _homes(groups, gates)
    parent = {key: key for key in groups}

    def top(key: tuple) -> tuple:
        while parent[key] != key:
            key = parent[key]
        return key

    via: dict[tuple, str] = {}
    for key, group in groups.items():
        gate = gates.get(group[0].gate)
        if key[0] != "root" or gate is None:
            continue
        found = next(((r, h) for r in causes.through(gate) if (h := _home(homes, key[1], key[2], r))), None)
        if found is None and key[2] != "route":
            found = next(((r, h) for r in gate.resolutions if (h := _louder_route(homes, groups, group, r))), None)
        if found is not None and top(found[1]) != top(key):
            r, home = found
            via.setdefault(top(home), f"`{r.name}` ({r.file}:{r.line})")
            parent[top(key)] = top(home)
    after, moot = _after_first_checks(groups, gates, targets)
    for key, (home, where) in after.items():
        if top(home) != top(key):
            via.setdefault(top(home), where)
            parent[top(key)] = top(home)
    same: dict[tuple, tuple] = {}
    shared: set[tuple] = set()
    """Groups that share a cause with another, none the other's home: the best site speaks for all."""
    for key, group in groups.items():  # one cause under two spellings: a predicate, or flags set from it
        gate = gates.get(group[0].gate)
        cause = _cause(key, gate) if gate is not None else None
        if cause is None or top(same.setdefault(cause, key)) == top(key):
            continue
        if cause[0] == "fork" and not (vendored(group[0].file)[0] or vendored(groups[same[cause]][0].file)[0]):
            continue  # the same condition in two modules of the package's own: two decisions
        parent[top(key)] = top(same[cause])
        shared.add(top(same[cause]))
    members: dict[tuple, list[Finding]] = {}
    for key, group in groups.items():
        if key not in moot:
            members.setdefault(top(key), []).extend(group)
    return [
        f
        for key, group in members.items()
        for f in _folded(key, group if key in shared else groups[key], group, gates, via.get(key, ""))
    ]


def _home(homes: Mapping[tuple, tuple], input: str, family: str, r: Resolution) -> tuple | None:
    """The group of a finding of ``family`` inside the definition ``r`` (a function by name, an
    assignment by line)."""
    return homes.get(("def", input, family, r.file, r.name)) or homes.get(("at", input, family, r.file, r.line))


def _louder_route(
    homes: Mapping[tuple, tuple], groups: Mapping[tuple, list[Finding]], group: list[Finding], r: Resolution
) -> tuple | None:
    """The route finding (ARCH001-003, ARCH007) inside a definition a group's evaluation went
    through, when it outranks every finding of the group: the decision is made there, and a
    caller that only passes its answer on (``if not _supports(...)`` over ``_has_runtime``'s
    ``capability == (12, 0)``) says nothing of its own in a quieter rule."""
    home = _home(homes, group[0].input, "route", r)
    if home is None:
        return None
    loudest = max(Severity(f.severity).rank for f in groups[home])
    return home if all(Severity(f.severity).rank < loudest for f in group) else None


def _folded(key: tuple, own: list[Finding], group: list[Finding], gates: Mapping[str, Gate], via: str) -> list[Finding]:
    """One finding for a group: the best of the root's own findings, the others as ``also``."""
    if key[0] == "one":
        return [replace(f, vendored=vendored(f.file)[0]) for f in group]
    first = min(own, key=_rank)
    also = tuple(sorted({(f.file, f.line) for f in group} - {(first.file, first.line)}))
    tree = vendored(first.file)[0]
    if not also:
        return [replace(first, vendored=tree)]
    root = via or next((r for f in group if (g := gates.get(f.gate)) is not None and (r := root_of(g))), "")
    if not root and key[0] == "flag":
        root = f"the flag `{key[5]}` in `{key[4]}`"
    copies = key[0] == "text" and all(line == first.line and vendored(file)[1] for file, line in also)
    return [replace(first, also=also, root=root, vendored=tree, message=first.message + _note(root, also, copies))]


def _after_first_checks(
    groups: Mapping[tuple, list[Finding]], gates: Mapping[str, Gate], targets: Sequence[Target]
) -> tuple[dict[tuple, tuple[tuple, str]], set[tuple]]:
    """The groups that an earlier check keeps their targets from, each with that check's group
    and how the check is named; and the groups behind a check that carries no finding (the
    rules accept it), which say nothing more.

    The check is a sure rejection of every target the group turns away, either earlier in the
    same function (``if capability != (12, 0): raise`` before ``if not sm120a_available():
    raise``), or, with a finding of its own, in a method of ``first_methods``
    (``data/branch-roles.json``) of the same class (``FrostRunner._check_support`` rejects 12.1
    before ``get_valid_tactics`` can run), for groups whose gates are all in that class of that
    file (after the check, in its method). Only the functions and classes findings are in are
    read: a handful of a scan's rejections, not all of them."""
    at: dict[str, tuple] = {f.gate: key for key, group in groups.items() for f in group}
    first_at: dict[str, tuple] = {}
    """A finding's gate -> the group it first comes in: of several first checks of a class, the
    first speaks."""
    for key, group in groups.items():
        for f in group:
            first_at.setdefault(f.gate, key)
    order = {gid: i for i, gid in enumerate(first_at)}
    places = {(g.file, g.context) for gid in at if (g := gates.get(gid)) is not None and g.context}
    classes = {(file, context.rpartition(".")[0]) for file, context in places}
    in_function: dict[tuple[str, str], list[tuple[Gate, frozenset[str]]]] = {}
    in_class: dict[tuple[str, str], tuple[int, Gate, frozenset[str]]] = {}
    for g in gates.values():
        cls, _, method = g.context.rpartition(".")
        first = g.id in at and bool(cls) and (g.file, cls) in classes and _first_method().fullmatch(method)
        if g.guards != Guards.REJECT or not g.context or not ((g.file, g.context) in places or first):
            continue
        rejected = frozenset(t.label for t in targets if verdicts.turns_away(g, t))
        if not rejected:
            continue
        in_function.setdefault((g.file, g.context), []).append((g, rejected))
        if first and order[g.id] < in_class.get((g.file, cls), (len(order),))[0]:
            in_class[(g.file, cls)] = (order[g.id], g, rejected)
    after: dict[tuple, tuple[tuple, str]] = {}
    moot: set[tuple] = set()
    for key, group in groups.items():
        members = [m for f in group if (m := gates.get(f.gate)) is not None]
        away = {t.label for g in members for t in targets if verdicts.turns_away(g, t)}
        if key[0] == "one" or not away:
            continue
        if len({(g.file, g.context) for g in members}) == 1:
            start = min(members, key=lambda g: g.line)
            check = next(
                (
                    e
                    for e, rejected in in_function.get((start.file, start.context), ())
                    if e.line < start.line and away <= rejected
                ),
                None,
            )
            if check is not None:
                if check.id in at:
                    after[key] = (at[check.id], f"this check, which {', '.join(sorted(away))} never passes")
                else:
                    moot.add(key)
                continue
        owners = {(g.file, g.context.rpartition(".")[0]) for g in members}
        found = in_class.get(owners.pop()) if len(owners) == 1 else None
        if found is None:
            continue
        _, check, rejected = found
        home = first_at[check.id]
        if (
            home != key
            and away <= rejected
            and not any(g.context == check.context and g.line < check.line for g in members)
        ):
            after[key] = (home, f"this check in `{check.context}`, which {', '.join(sorted(rejected))} never passes")
    return after, moot


@cache
def _first_method() -> re.Pattern:
    return re.compile("|".join(f"(?:{p})" for p in datafiles.read_json("branch-roles.json")["first_methods"]))


def _cause(key: tuple, gate: Gate) -> tuple | None:
    """What a group's decision finally rests on, when two spellings can share it: the
    definitions at the end of its chain (``is_sm90_supported() or is_sm100_supported()`` and
    ``_is_sm90 or _is_sm100`` where ``_is_sm90 = is_cuda() and is_sm90_supported()``), or, for
    a condition of its own, the condition in a function of that name (a fork of a vendored
    file and its upstream copy; merged only when one side is vendored), or outside any function
    the condition in files of one folder (``#if __CUDA_ARCH__ == 1030`` in five variants of one
    kernel)."""
    if key[0] == "root":
        ends = {_where(r) for r in causes.leaves(gate)}
        return ("leaves", *key[1:3], tuple(sorted(ends))) if ends else None
    if key[0] == "text" and gate.context:
        return ("fork", *key[1:3], key[4], gate.context.rpartition(".")[2], gate.admits)
    if key[0] == "text":
        return ("siblings", *key[1:3], key[4], posixpath.dirname(gate.file), gate.admits)
    return None


def _rank(f: Finding) -> tuple:
    """Which finding of a group speaks for it: the package's own code, then severity, then the
    one whose guarded code shows what the target lacks (the helper's ``asm``, not its caller),
    then place."""
    return (
        bool(vendored(f.file)[0]),
        -Severity(f.severity).rank,
        f.classification != Classification.HARDWARE,
        f.file,
        f.line,
    )


def _homes(groups: Mapping[tuple, list[Finding]], gates: Mapping[str, Gate]) -> dict[tuple, tuple]:
    """Where a definition's uses go: the group of a finding inside a function (``def``, by
    name) or on a line (``at``: an assignment), per input and rule family."""
    out: dict[tuple, tuple] = {}
    for key, group in groups.items():
        if key[0] == "one":
            continue
        for f in group:
            gate = gates[f.gate]
            if gate.context:
                out.setdefault(("def", *key[1:3], gate.file, gate.context.rpartition(".")[2]), key)
            for line in range(gate.line, max(gate.end_line, gate.line) + 1):
                out.setdefault(("at", *key[1:3], gate.file, line), key)
    return out


def _family(f: Finding) -> str:
    """Rules that judge routes say one thing of a decision (its route for the target); the
    others are grouped by rule."""
    return "route" if f.decision else f.rule


def _key(f: Finding, gate: Gate | None) -> tuple:
    """What findings of one cause share: the input, the rule family, and the definitions the
    condition names (a vendored one by its path inside the tree, so that copies agree); or one
    flag in one function; or the same condition in one file (copies of a vendored file are one
    file)."""
    if gate is None:
        return ("one", id(f))
    root = _defined(gate)
    if root:
        return ("root", f.input, _family(f), root)
    flag = _FLAG.fullmatch(gate.expression)
    if gate.context and flag:
        return ("flag", f.input, _family(f), f.file, gate.context, flag.group(1))
    where = vendored(f.file)[1] or f.file
    return ("text", f.input, _family(f), where, " ".join(gate.expression.split()), gate.admits)


def _note(root: str, also: tuple[tuple[str, int], ...], copies: bool = False) -> str:
    sites = ", ".join(f"{file}:{line}" for file, line in also[:SHOWN])
    more = f" and {len(also) - SHOWN} more" if len(also) > SHOWN else ""
    cause = f"one root cause, {root}; " if root else ("identical copies; " if copies else "the same condition; ")
    return f" ({cause}also at {sites}{more})"
