"""Plain-text report: gates grouped by file, with a compact admitted set and per-target verdicts."""

from __future__ import annotations

import re
from collections import Counter
from itertools import groupby

from auditor import arch
from auditor.arch import Capability
from auditor.facts.features import is_around
from auditor.model import SEVERITIES, AuditResult, Finding, Loadability, Verdict
from auditor.render import counts
from auditor.rules.roots import SHOWN, vendored
from auditor.verdicts import toolkit_notes, verdicts

INVISIBLE = r"\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2066-\u2069\ufeff"
"""A character class body: C1 controls, bidi marks and overrides, line separators (C0 aside)."""
_UNPRINTABLE = re.compile(rf"[\x00-\x1f{INVISIBLE}]")


def printable(text: str, keep: str = "") -> str:
    """``text`` with control characters written as escapes (``\\x1b``, ``\\u202e``).

    Paths, conditions and messages come from the scanned code: an ESC sequence or a bidi
    override in a file name must reach the terminal (or a browser, or a PR comment) as
    text, not act on it. Characters in ``keep`` (a tab in a source excerpt) stay as they are.
    Every report that shows scanned text goes through this one function.
    """
    return _UNPRINTABLE.sub(lambda m: m.group() if m.group() in keep else ascii(m.group())[1:-1], text)


def binaries_section(result: AuditResult) -> list[str]:
    """ "GPU code in binaries": per package, the best verdict per target and what was found."""
    if not result.binaries:
        return []
    lines = ["GPU code in binaries (native: SASS runs, jit: PTX only, none: cannot load)"]
    for (inp, package), grouped in groupby(result.binaries, key=lambda b: (b.input, b.package)):
        group = list(grouped)
        gpu = [b for b in group if b.verdicts]
        where = f"  [{inp}]" if len(result.inputs) > 1 else ""
        if not gpu:
            lines.append(f"  {package}{where}: {len(group)} binaries, no GPU code")
            continue
        best = {t.label: max((dict(b.verdicts)[t.label] for b in gpu), key=lambda v: v.rank) for t in result.targets}
        codes = sorted({e.target for b in gpu for e in b.entries})
        lines.append(
            f"  {package}{where}: "
            + "  ".join(f"{t}:{v}" for t, v in best.items())
            + f"   ({len(gpu)} of {len(group)} binaries with GPU code: {', '.join(codes[:12])}"
            + (", ..." if len(codes) > 12 else "")
            + ")"
        )
        lines += _built_for_a_sibling(gpu, result)
    lines.append("")
    return lines


def _built_for_a_sibling(gpu: list, result: AuditResult) -> list[str]:
    """Per target, the binaries it cannot load that carry code for another part of its major
    (``sm_120a`` alone: 12.0 loads it, 12.1 does not): a build that named one part of a
    generation, which the package line's best verdict can hide behind a sibling binary."""
    lines = []
    for t in result.targets:
        major = _major(t.capability)
        lost = [
            (b.path, sorted({e.target for e in b.entries if _major(arch.capability_of(e.target)) == major}))
            for b in gpu
            if dict(b.verdicts).get(t.label) == Loadability.NONE
        ]
        lost = [(path, sibling) for path, sibling in lost if sibling]
        if lost:
            parts = ", ".join(sorted({arch.capability_of(x) for _, sibling in lost for x in sibling}))
            shown = ", ".join(f"{path} ({' '.join(sibling)})" for path, sibling in lost[:SHOWN])
            more = f" and {len(lost) - SHOWN} more" if len(lost) > SHOWN else ""
            lines.append(f"    {t.label} cannot load these, built for {parts} only: {shown}{more}")
    return lines


def _major(capability: str) -> int:
    return Capability.parse(capability).major


def render(result: AuditResult, only_excluding: bool = False) -> str:
    """Text for people; ``only_excluding`` keeps gates that turn a target away."""
    targets = result.targets
    lines: list[str] = []
    findings: dict[str, list[Finding]] = {}
    for f in result.findings:
        findings.setdefault(f.gate, []).append(f)
    shown = [g for g in result.gates if not only_excluding or Verdict.EXCLUDES in verdicts(g, targets).values()]
    marked = {f.file for f in result.findings if f.vendored}  # a project's own --vendored globs

    def is_vendored(path: str) -> bool:
        return path in marked or bool(vendored(path)[0])

    shown.sort(key=lambda g: is_vendored(g.file))  # the package's own code first, then vendored trees
    heading = False
    for (inp, path), group in groupby(shown, key=lambda g: (g.input, g.file)):
        if not heading and is_vendored(path):
            heading = True
            lines.append("vendored trees (copies of other projects' code, after the package's own):")
        lines.append(f"{path}" + (f"  [{inp}]" if len(result.inputs) > 1 else ""))
        for g in group:
            v = verdicts(g, targets)
            verdict = "  ".join(f"{t}:{'ok' if x == Verdict.ADMITS else 'EXCLUDED'}" for t, x in v.items())
            lines.append(f"  {g.line:>5}  {g.kind:<18} {g.expression}")
            lines.append(f"         admits {arch.compact(g.domain, g.admits)}   {verdict}")
            if g.unknowns:
                lines.append(f"         depends on {', '.join(g.unknowns)}")
            notes = toolkit_notes(g, targets, result.toolkits)
            if notes:
                lines.append("         admitted with " + "; ".join(f"{t}: {n}" for t, n in notes.items()))
            for r in g.resolutions[:3]:
                lines.append(f"         via {r.name} ({r.file}:{r.line})")
            inside = [f for f in g.features if not is_around(f)]
            around = [f for f in g.features if is_around(f)]
            if inside:
                lines.append("         uses " + ", ".join(f.token for f in inside[:6]))
            if around:
                lines.append("         inside code that uses " + ", ".join(f.token for f in around[:6]))
            if g.reach:
                lines.append(f"         not judged: {counts.REACH[g.reach]}")
            for f in findings.get(g.id, []):
                lines.append(f"         [{f.severity}] {f.rule}: {f.message}")
        lines.append("")
    gateless = [f for f in result.findings if not f.gate]
    if gateless:
        lines.append("findings about no gate (suppressions that suppress nothing):")
        lines += [f"  {f.file}:{f.line}  [{f.severity}] {f.rule}: {f.message}" for f in gateless]
        lines.append("")
    lines += binaries_section(result)
    for e in result.errors:
        lines.append(f"error: {e.file + ': ' if e.file else ''}{e.reason}")
    head = counts.headline(result)
    severities = Counter(f.severity for f in result.findings)
    by_severity = ", ".join(f"{severities[s]} {s}" for s in reversed(SEVERITIES) if severities[s])
    lines.append(counts.sentence(head, ", ".join(t.label for t in targets)))
    lines.append(
        f"{head.gates} gates, {head.excluding} exclude {'/'.join(t.label for t in targets)}, "
        f"{len(result.findings)} findings{f' ({by_severity})' if by_severity else ''}, {len(result.errors)} errors"
    )
    if head.unreached:
        lines.append(counts.unreached_note(head))
    return "\n".join(map(printable, lines)) + "\n"
