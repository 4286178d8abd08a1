"""The function around a C/CUDA gate: code a turned-away target cannot run makes the gate moot.

``#if CAKE_ARRIVE_FIRST`` inside a kernel whose loads are ``cp.async.bulk.tensor …
.cta_group::2`` guards one ``mbarrier.arrive``: the guarded line alone assembles for sm_120,
but 12.x cannot run the kernel it sits in, so "widen it, it is likely to compile" points the
wrong way. What the target compiles of the enclosing free function (its lines outside this
gate's body and outside the bodies of other gates that turn the target away) is read for
features; those it lacks join the gate's features, marked as around the gate, and the gate
guards code the target cannot run (:func:`auditor.verdicts.classify`).
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import replace

from auditor import verdicts
from auditor.facts.features import AROUND, scan_region
from auditor.model import Classification, Feature, Gate, Language, SourceFile, Target
from auditor.pipeline.calls import Function, free_functions


def with_surroundings(gates: Sequence[Gate], files: Sequence[SourceFile], targets: Sequence[Target]) -> list[Gate]:
    """The gates, each C/CUDA gate not already guarding code a target lacks with what the rest
    of its function needs that every target it turns away lacks."""
    capabilities = tuple(dict.fromkeys(t.capability for t in targets))
    by_path = {f.path: f for f in files}
    candidates: dict[str, list[int]] = {}
    for i, g in enumerate(gates):
        if g.language != Language.PYTHON and g.file in by_path and _open(g, targets):
            candidates.setdefault(g.file, []).append(i)
    out = list(gates)
    by_file: dict[str, list[Gate]] = {}
    for g in gates:
        if g.file in candidates:
            by_file.setdefault(g.file, []).append(g)
    for path, indices in candidates.items():
        text = by_path[path].data.decode("utf-8", "replace")
        functions = free_functions(text)
        starts = [f.first for f in functions]
        lines = text.split("\n")
        usable: dict[int, dict[str, list[Feature]]] = {}
        for i in indices:
            g = gates[i]
            k = bisect.bisect_right(starts, g.line) - 1
            if k < 0 or not functions[k].first <= g.line <= functions[k].last:
                continue
            if k not in usable:
                f = functions[k]
                region = "\n".join(lines[f.first - 1 : f.last])
                features = [feature for _, feature in scan_region(region, f.first, "cuda", capabilities)]
                usable[k] = _usable(features, by_file[path], targets, f)
            lacking = _lacking(g, usable[k], targets, functions[k])
            if lacking:
                out[i] = replace(g, features=g.features + lacking)
    return out


def _open(gate: Gate, targets: Sequence[Target]) -> bool:
    """A gate that turns a target away without guarding code known to be out of its reach."""
    return verdicts.classify(gate, targets) not in (Classification.NONE, Classification.HARDWARE)


def _usable(
    features: list[Feature], gates: list[Gate], targets: Sequence[Target], function: Function
) -> dict[str, list[Feature]]:
    """Per target, the function's features the target compiles (no gate in the function turns
    it away from their line) and lacks: computed once per function, not once per gate."""
    inside = [g for g in gates if function.first <= g.line <= function.last]
    out: dict[str, list[Feature]] = {}
    for t in targets:
        away = [g.body_lines for g in inside if verdicts.turns_away(g, t)]
        out[t.label] = [
            f
            for f in features
            if verdicts.availability(dict(f.on_target).get(t.capability, "")) == "no"
            and not any(a <= f.line <= b for a, b in away)
        ]
    return out


def _lacking(
    gate: Gate, usable: dict[str, list[Feature]], targets: Sequence[Target], function: Function
) -> tuple[Feature, ...]:
    """The features of the function, outside the gate's body, that every target the gate turns
    away compiles and lacks (:func:`_usable`; the gate's own body is outside either way)."""
    excluded = [t for t in targets if verdicts.turns_away(gate, t)]
    if not excluded:
        return ()
    first, last = gate.body_lines
    common = [f for f in usable[excluded[0].label] if not first <= f.line <= last]
    for t in excluded[1:]:
        ids = {id(f) for f in usable[t.label]}
        common = [f for f in common if id(f) in ids]
    out = [replace(f, notes=AROUND.format(function.name)) for f in common]
    return tuple({f.token: f for f in out}.values())
