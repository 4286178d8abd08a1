"""Rules applied to evaluated gates: findings, inline suppressions, and the baseline.

``apply`` matches each rule's ``when`` against each gate, renders the message, drops what an
``archaudit: ignore[ID]`` comment (on the gate's lines or the line above) suppresses, reports
suppressions that suppressed nothing, and drops what the baseline already lists. A baseline
matches findings by rule id and the gate's fingerprint, so it survives lines moving.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from auditor import fingerprint
from auditor.facts.binaries import evidence
from auditor.model import Finding, Gate, ResolvedBy, Severity, SourceFile, Target
from auditor.rules.decisions import decisions
from auditor.rules.roots import fold
from auditor.rules.rulebook import Rule
from auditor.rules.vocabulary import FIELDS, GateView, Relatives, relatives, speed_choices

UNUSED_SUPPRESSION = "ARCH000"
"""Built-in: an ``archaudit: ignore`` comment that suppressed nothing (info)."""
BASELINE_SCHEMA = "archaudit-baseline/1"
_MARKER = re.compile(r"archaudit:\s*ignore(?:\[([^\]]*)\])?")


class _Fields(Mapping):
    """A gate's message fields, rendered only when a message asks for them."""

    def __init__(self, view: GateView):
        self.view = view

    def __getitem__(self, key: str) -> str:
        return FIELDS[key](self.view)

    def __iter__(self) -> Iterator[str]:
        return iter(FIELDS)

    def __len__(self) -> int:
        return len(FIELDS)


def known_ids(rules: Iterable[Rule]) -> frozenset[str]:
    """Ids ``--select``/``--ignore`` accept."""
    return frozenset(r.id for r in rules) | {UNUSED_SUPPRESSION}


def active(rule_id: str, select: Sequence[str], ignore: Sequence[str], opt_in: bool = False) -> bool:
    """Whether ``--select``/``--ignore`` keep a rule (no ``--select``: all but the opt-in ones)."""
    return (rule_id in select if select or opt_in else True) and rule_id not in ignore


def confidence(gate: Gate) -> str:
    """How sure the evaluation is: lower when it rests on a name or on unknown identifiers."""
    if gate.resolved_by == ResolvedBy.NAME:
        return "low"
    return "medium" if gate.unknowns else "high"


def match(
    rules: Sequence[Rule],
    gates: Iterable[Gate],
    targets: tuple[Target, ...],
    packages: Mapping[str, Mapping[str, str]] = {},
) -> list[Finding]:
    """Every (rule, gate) pair whose condition holds, as findings.

    ``packages``: per shipped binary, its loadability per target label; a gate sees those of the
    binaries its guarded code reaches (``Gate.extensions``).
    """
    gates = list(gates)
    around = relatives(gates)
    decided = decisions(gates)
    for_speed = speed_choices(gates)
    out = []
    for gate in gates:
        view = GateView(
            gate,
            targets,
            around.get(gate.id, Relatives()),
            evidence(packages, gate.extensions),
            decided.get(gate.id),
            packages,
            for_speed,
        )
        fields = _Fields(view)
        fired = [rule for rule in rules if rule.applies(gate) and rule.when(view)]
        ids = {rule.id for rule in fired}
        for rule in fired:
            if not ids.intersection(rule.yields_to):
                out.append(
                    Finding(
                        rule=rule.id,
                        severity=rule.severity,
                        gate=gate.id,
                        file=gate.file,
                        line=gate.line,
                        message=rule.message.format_map(fields),
                        confidence=confidence(gate),
                        classification=view.classification,
                        input=gate.input,
                        decision=view.branches.id if rule.routes_away else "",
                    )
                )
    return out


@dataclass(frozen=True, slots=True)
class Suppression:
    """One ``archaudit: ignore[...]`` comment."""

    file: str
    line: int
    ids: frozenset[str]
    """Empty: every rule."""
    input: str = ""

    def covers(self, finding: Finding, gate: Gate) -> bool:
        """The comment sits on the gate's lines or right above, and names the rule (or none)."""
        return (
            self.file == gate.file
            and gate.line - 1 <= self.line <= max(gate.end_line, gate.line)
            and (not self.ids or finding.rule in self.ids)
        )


def suppressions(files: Iterable[SourceFile]) -> list[Suppression]:
    """Suppression comments in the scanned files (only files that mention ``archaudit:`` are read)."""
    out = []
    for f in files:
        if b"archaudit:" not in f.data:
            continue
        for number, text in enumerate(f.data.decode("utf-8", "replace").splitlines(), 1):
            m = _MARKER.search(text)
            if m:
                ids = frozenset(i.strip() for i in (m.group(1) or "").split(",") if i.strip())
                out.append(Suppression(f.path, number, ids, f.input))
    return out


def apply(
    rules: Sequence[Rule],
    gates: Sequence[Gate],
    targets: tuple[Target, ...],
    files: Iterable[SourceFile] = (),
    select: Sequence[str] = (),
    ignore: Sequence[str] = (),
    baseline: frozenset[tuple[str, str]] = frozenset(),
    packages: Mapping[str, Mapping[str, str]] = {},
    unreached: bool = False,
) -> list[Finding]:
    """Findings of the active rules, minus suppressed and baselined ones, plus unused suppressions.
    Gates in code the package never reaches (:attr:`Gate.reach`) are judged only with ``unreached``."""
    chosen = [r for r in rules if active(r.id, select, ignore, r.opt_in)]
    by_id = {g.id: g for g in gates}
    if not unreached:
        skipped = {g.file for g in gates if g.reach}
        gates = [g for g in gates if not g.reach]
        files = [f for f in files if f.path not in skipped]
    marks = suppressions(files)
    used: set[Suppression] = set()
    kept = []
    for f in match(chosen, gates, targets, packages):
        hit = next((s for s in marks if s.covers(f, by_id[f.gate])), None)
        if hit is None:
            kept.append(f)
        else:
            used.add(hit)
    kept = fold(kept, by_id, targets)
    if active(UNUSED_SUPPRESSION, select, ignore):
        chosen_ids = {r.id for r in chosen}
        for s in marks:
            if s not in used and (not s.ids or s.ids & chosen_ids):
                what = ", ".join(sorted(s.ids)) or "all rules"
                kept.append(
                    Finding(
                        UNUSED_SUPPRESSION,
                        Severity.INFO,
                        "",
                        s.file,
                        s.line,
                        f"unused suppression `archaudit: ignore` ({what}): no such finding here",
                        input=s.input,
                    )
                )
    new = [f for f in kept if baseline_key(f) not in baseline and _site_key(f, by_id.get(f.gate)) not in baseline]
    return sorted(new, key=lambda f: (f.input, f.file, f.line, f.rule))


# Baseline ------------------------------------------------------------------------------


def baseline_key(f: Finding) -> tuple[str, str]:
    """What a baseline remembers of a finding: rule and gate fingerprint (file:line for gate-less ones)."""
    return _key(f.rule, f.gate, f.file, f.line)


def _key(rule: str, gate: str, file: str, line: int) -> tuple[str, str]:
    return rule, gate or f"{file}:{line}"


def _site_key(f: Finding, gate: Gate | None) -> tuple[str, str] | None:
    """The move-proof key (:func:`fingerprint.site_id`): matches after a file is moved or renamed."""
    return None if gate is None else (f.rule, _site(gate))


def _site(gate: Gate) -> str:
    return fingerprint.site_id(gate.kind, gate.context, gate.expression, gate.chain)


def baseline_text(findings: Iterable[Finding], gates: Iterable[Gate] = ()) -> str:
    """A baseline file listing these findings (file and line are for people; matching ignores
    them); with the ``gates``, each finding's ``site`` too, which survives moves."""
    sites = {(g.input, g.id): _site(g) for g in gates}
    rows = sorted(
        {(f.rule, f.gate, f.file, f.line, sites.get((f.input, f.gate), "")) for f in findings},
        key=lambda r: (r[2], r[3], r[0]),
    )
    doc = {
        "schema": BASELINE_SCHEMA,
        "findings": [
            {"rule": r, "gate": g, "file": file, "line": line, **({"site": site} if site else {})}
            for r, g, file, line, site in rows
        ],
    }
    return json.dumps(doc, indent=2) + "\n"


def load_baseline(path: Path) -> frozenset[tuple[str, str]]:
    """Keys of a baseline file; ``ValueError`` with one line when it is not one."""
    try:
        doc = json.loads(path.read_text("utf-8"))
    except OSError as exc:
        raise ValueError(f"cannot read baseline {path}: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"baseline {path} is not JSON ({exc})") from None
    if not isinstance(doc, dict) or doc.get("schema") != BASELINE_SCHEMA or not isinstance(doc.get("findings"), list):
        raise ValueError(f"baseline {path} is not an {BASELINE_SCHEMA} file (write one with --write-baseline)")
    try:
        keys = {_key(r["rule"], r["gate"], r["file"], r["line"]) for r in doc["findings"]}
        return frozenset(keys | {(r["rule"], r["site"]) for r in doc["findings"] if r.get("site")})
    except (KeyError, TypeError):
        raise ValueError(f"baseline {path}: each finding needs rule, gate, file and line") from None
