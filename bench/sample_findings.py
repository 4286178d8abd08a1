"""Draw findings from a scan for a person to judge against the source, reproducibly.

A rule pack is only as good as the findings a user reads on releases nobody tuned it for.
This script takes an ``archaudit/1`` JSON report and the input it was made from (a wheel,
sdist or directory), and writes a Markdown sheet: the first findings a user sees (the text
report's order: the package's own code before vendored trees, then file and line) and a random sample drawn with a fixed seed, each with the
gate's record and the source around it and its guarded region. A judge fills in the
verdict column (correct / wrong / misleading) next to the source. With ``--unreported N`` the
sheet also draws N gates that exclude a target and carry no finding, for the judge to say
whether one was missed (recall, not only precision).

    archaudit scan vllm==0.33.0 --format json -o vllm.json
    python bench/sample_findings.py vllm.json ~/.cache/archaudit-wheels/vllm-0.33.0-*.whl --seed 15 -o vllm.md

It reads the input as archaudit does (archives in memory) and runs nothing from it.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

from auditor.sources import provider_for, read_all, read_file

CONTEXT = 3
"""Lines shown before the gate and after its guarded region."""
BODY = 25
"""At most this many lines of the guarded region."""


def _sources(spec: str) -> dict[str, list[str]]:
    """Every scanned source file of the input as its lines, by reported path."""
    files, _ = read_all(provider_for(spec))
    out = {}
    for f in files:
        if f.language in ("python", "cuda"):
            out[f.path] = read_file(f).decode("utf-8", "replace").splitlines()
    return out


def _excerpt(lines: list[str], gate: dict) -> str:
    first, last = gate["line"], max(gate["end_line"], gate["body"][1] if gate["body"][1] else gate["end_line"])
    shown_last = min(last, first + BODY)
    lo, hi = max(1, first - CONTEXT), min(len(lines), shown_last + CONTEXT)
    rows = [f"{n:>6}{'>' if n == first else ' '} {lines[n - 1]}" for n in range(lo, hi + 1)]
    if shown_last < last:
        rows.append(f"        … {last - shown_last} more lines of the guarded region")
    return "\n".join(rows)


def sheet(report: dict, spec: str, seed: int, sample: int, first: int, unreported: int = 0) -> str:
    """The Markdown sheet for one report."""
    gates = {g["id"]: g for g in report["gates"]}
    findings = [f for f in report["findings"] if f["gate"] in gates]
    order = sorted(
        range(len(findings)),
        key=lambda i: (bool(findings[i].get("vendored")), findings[i]["file"], findings[i]["line"], i),
    )
    head = [findings[i] for i in order[:first]]
    rest = [findings[i] for i in order[first:]]
    drawn = random.Random(seed).sample(rest, min(sample, len(rest)))
    found = {f["gate"] for f in report["findings"]}
    silent = [g for g in report["gates"] if g["excludes_target"] and not g.get("reach") and g["id"] not in found]
    missed = random.Random(seed).sample(silent, min(unreported, len(silent)))
    sources = _sources(spec)
    out = [
        f"# Findings to judge: {', '.join(i['path'] for i in report['inputs'])}",
        "",
        f"{len(report['gates'])} gates, {len(findings)} findings; the first {len(head)} a user sees and "
        f"{len(drawn)} drawn at random (seed {seed}) from the others"
        + (
            f"; {len(missed)} of the {len(silent)} judged gates that exclude a target with no finding."
            if unreported
            else "."
        ),
        "",
    ]
    for title, chosen in (("First findings", head), (f"Random sample (seed {seed})", drawn)):
        out += [f"## {title}", ""]
        for n, f in enumerate(chosen, 1):
            g = gates[f["gate"]]
            lines = sources.get(g["file"], [])
            out += [
                f"### {n}. {f['rule']} [{f['severity']}] {g['file']}:{g['line']}",
                "",
                f"- message: {f['message']}",
                f"- kind `{g['kind']}`, admits {len(g['admits'])} ({', '.join(g['admits'][:12])}"
                f"{' …' if len(g['admits']) > 12 else ''}), verdicts {g['verdicts']}, guards `{g.get('guards', '')}`",
                f"- classification {g['classification']}; features {[x['token'] for x in g['features']][:8]}",
                "- verdict: _correct / wrong / misleading_ — why:",
                "",
                "```",
                _excerpt(lines, g) if lines else "(source not found)",
                "```",
                "",
            ]
    if missed:
        out += [f"## Excluding gates with no finding (seed {seed})", ""]
        for n, g in enumerate(missed, 1):
            lines = sources.get(g["file"], [])
            out += [
                f"### {n}. {g['file']}:{g['line']} `{g['expression'][:160]}`",
                "",
                f"- kind `{g['kind']}`, admits {len(g['admits'])} ({', '.join(g['admits'][:12])}"
                f"{' …' if len(g['admits']) > 12 else ''}), verdicts {g['verdicts']}, guards `{g.get('guards', '')}`",
                "- verdict: _rightly silent / missed finding_ — why:",
                "",
                "```",
                _excerpt(lines, g) if lines else "(source not found)",
                "```",
                "",
            ]
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("report", type=Path, help="an archaudit/1 JSON report")
    p.add_argument("input", help="the input the report was made from (wheel, sdist or directory)")
    p.add_argument("--seed", type=int, default=15)
    p.add_argument("--sample", type=int, default=15, help="random findings (default 15)")
    p.add_argument("--first", type=int, default=10, help="first findings in report order (default 10)")
    p.add_argument("--unreported", type=int, default=0, help="excluding gates with no finding (default 0)")
    p.add_argument("-o", "--output", type=Path, help="write here instead of stdout")
    args = p.parse_args(argv)
    text = sheet(
        json.loads(args.report.read_text("utf-8")), args.input, args.seed, args.sample, args.first, args.unreported
    )
    if args.output:
        args.output.write_text(text, "utf-8")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
