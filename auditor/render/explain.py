"""``archaudit explain``: one gate's evaluation, step by step, as text.

Where a location points (``FILE:LINE`` or ``INPUT::FILE:LINE``), which gate it means (the
gate on that line, else the innermost gate whose guarded region holds it), and a pure
rendering of that gate: its condition chain, what each derived macro or predicate resolved
to and where it is defined, the admitted set per capability, the guarded features with
their arch needs, and the findings.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from auditor import arch, verdicts
from auditor.arch import HOST
from auditor.facts.features import is_around
from auditor.model import Domain, Finding, Gate, Target
from auditor.verdicts import classify

_PROJECT_MARKERS = (".git", "pyproject.toml", "setup.py", "setup.cfg")


@dataclass(frozen=True, slots=True)
class Location:
    """What ``explain`` was asked about."""

    input: str
    """The input to scan (directory, archive or ``name==version``)."""
    file: str
    """Path relative to that input's root, '/'-separated."""
    line: int


def parse_location(text: str) -> Location:
    """``INPUT::FILE:LINE``, or ``FILE:LINE`` scanned within its project (nearest ``.git``/``pyproject.toml``)."""
    where, sep, number = text.rpartition(":")
    if not sep or not number.isdigit() or int(number) < 1 or not where:
        raise ValueError(f"{text!r}: expected FILE:LINE or INPUT::FILE:LINE")
    line = int(number)
    if "::" in where:
        spec, _, file = where.partition("::")
        if not spec or not file:
            raise ValueError(f"{text!r}: expected INPUT::FILE:LINE")
        return Location(spec, file.replace("\\", "/").removeprefix("./"), line)
    path = Path(where)
    if not path.is_file():
        raise ValueError(f"{where}: no such file (for a file inside an archive or package use INPUT::FILE:LINE)")
    path = path.resolve()
    root = next((d for d in path.parents if any((d / m).exists() for m in _PROJECT_MARKERS)), path.parent)
    return Location(str(root), path.relative_to(root).as_posix(), line)


def pick(gates: Iterable[Gate], file: str, line: int) -> list[Gate]:
    """The gates at ``line`` of ``file``; else the innermost one whose condition or region holds it."""
    in_file = [g for g in gates if g.file == file]
    if not in_file:
        raise ValueError(f"{file}: no architecture gates found in this file")
    exact = [g for g in in_file if g.line == line]
    if exact:
        return exact
    holding = [g for g in in_file if g.line <= line <= max(g.end_line, g.body_lines[1])]
    if not holding:
        nearest = sorted({g.line for g in in_file}, key=lambda n: (abs(n - line), n))[:5]
        raise ValueError(
            f"{file}:{line}: no gate here (gates of this file start on lines {', '.join(map(str, sorted(nearest)))})"
        )
    innermost = max(g.line for g in holding)
    return [g for g in holding if g.line == innermost]


def _admitted_table(gate: Gate, targets: Sequence[Target]) -> list[str]:
    requested = {t.capability: t for t in targets}
    admitted = set(gate.admits)
    if gate.domain == Domain.TARGET:
        caps: dict[str, list[str]] = {}
        for t in arch.device_targets():
            caps.setdefault(arch.capability_of(t), []).append(t)
    else:
        caps = {c: [c] for c in arch.capabilities()}
    rows = [f"    {'capability':<12}{'admitted':<28}verdict"]
    for cap, variants in caps.items():
        taken = [v for v in variants if v in admitted]
        shown = (" ".join(taken) if gate.domain == Domain.TARGET else "yes") if taken else "-"
        asked = requested.get(cap)
        verdict = ("EXCLUDES" if verdicts.turns_away(gate, asked) else "admits") if asked else ""
        rows.append(f"    {cap + (' *' if asked else ''):<12}{shown:<28}{verdict}".rstrip())
    if gate.domain == Domain.TARGET:
        rows.append(f"    {'host':<12}{'yes' if HOST in admitted else '-'}")
    return rows


def render(gate: Gate, findings: Sequence[Finding], targets: Sequence[Target], toolkits: tuple[str, ...] = ()) -> str:
    """One gate, step by step, for people (``toolkits``: the CUDA releases the scan chose)."""
    out = [f"{gate.file}:{gate.line}  {gate.kind} ({gate.language})  gate {gate.id}", f"  condition: {gate.expression}"]
    if gate.context:
        out.append(f"  inside: {gate.context}")
    if gate.guards:
        out.append(f"  guards: {gate.guards} path")
    if gate.chain:
        out.append("  effective condition, outermost first:")
        out += [f"    {i}. {c}" for i, c in enumerate(gate.chain, 1)]
    if gate.resolutions:
        out.append(f"  resolved through ({gate.resolved_by}):")
        out += [f"    {r.name}  {r.file}:{r.line}" + (f"  {r.detail}" if r.detail else "") for r in gate.resolutions]
    elif gate.resolved_by == "name":
        out.append("  resolved by the predicate's NAME: its definition is not in the scanned input")
    if gate.name_implies:
        out.append(f"  the name promises: {', '.join(gate.name_implies)}")
    if gate.unknowns:
        out.append(
            f"  unknown identifiers (may be true or false; the verdict can depend on them): {', '.join(gate.unknowns)}"
        )
    out.append(f"  admits ({gate.domain} domain): {arch.compact(gate.domain, gate.admits)}")
    out += _admitted_table(gate, targets)
    if gate.toolkits:
        out.append(
            "  each target as its newest chosen CUDA toolkit answers; where toolkits disagree, the ones that admit:"
        )
        out += [f"    {member}: {', '.join(releases)}" for member, releases in gate.toolkits]
        out += [f"    {label} *: {note}" for label, note in verdicts.toolkit_notes(gate, targets, toolkits).items()]
    first, last = gate.body_lines
    if gate.features:
        out.append(f"  guarded region (lines {first}-{last}) uses:")
        for f in gate.features:
            on = "  ".join(f"{cap}: {status}" for cap, status in f.on_target)
            around = f"; {f.notes}" if is_around(f) else ""
            out.append(
                f"    {f.token}  line {f.line}  {f.feature}; needs {f.min_arch}" + (f"; {on}" if on else "") + around
            )
    elif last >= first > 0:
        out.append(f"  guarded region (lines {first}-{last}) uses no feature from the fact table")
    kind = classify(gate, targets)
    if kind:
        out.append(f"  classification: {kind}")
    out.append("  findings:" if findings else "  findings: none")
    out += [f"    [{f.severity}] {f.rule}: {f.message}" for f in findings]
    return "\n".join(out) + "\n"
