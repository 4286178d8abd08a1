"""Generate ``auditor/data/ptx-facts.json``: which PTX instruction variants each toolkit's ptxas accepts per target.

Why: whether guarded code can run on a target depends on the exact instruction *variant*, not on its opcode: plain
``cp.async.bulk.tensor`` assembles for sm_90 and sm_120, while its ``.cta_group::2`` form is rejected on sm_120a. A
hand-typed table cannot keep up with qualifiers, targets and toolkits, so every fact here is what ptxas said.

How: each probe (a row of ``scripts/ptx-probes.csv``) is one instruction. It is wrapped in a tiny kernel (``MODULE``) whose ``.version`` is the newest
PTX ISA that toolkit's ptxas accepts and whose ``.target`` is the target, and assembled with
``ptxas --gpu-name <target>`` for every ``sm_*`` target of every toolkit (``gen_toolkit_targets.TOOLKITS``, wheels
cached as described there), two ptxas processes at a time. A probe no target of any toolkit accepts is a broken probe
(wrong PTX, not a fact) and makes the script fail, as does a probe whose pattern does not match its own instruction.

A probe's ``pattern`` is built from its ``spec``: dot-separated tokens in the order PTX writes them, each a literal
or a small regex (``[1-5]d``, ``(e4m3|e5m2)``); ``*`` stands for any other qualifiers. The regex is anchored at the
opcode and matches one whole instruction; more tokens (``specificity``) means a more specific row.

Usage::

    python scripts/gen_ptx_facts.py                 # write auditor/data/ptx-facts.json (about 5 minutes)
    python scripts/gen_ptx_facts.py --check         # exit 1 if the shipped table differs from what ptxas says
    python scripts/gen_ptx_facts.py --toolkits 13.0.88 --probes tma_ --print   # look at a few probes, write nothing
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gen_toolkit_targets import TOOLKITS, dump, ensure_toolkit, ptx_isa, ptxas_targets, version_key  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "auditor" / "data" / "ptx-facts.json"
ABOUT = (
    "Which PTX instruction variants ptxas accepts, per toolkit and sm_* target. Each probe is one instruction "
    "assembled alone (ptxas --gpu-name T, .target T, .version = the toolkit's newest PTX ISA). 'pattern' is a regex "
    "for re.match over one instruction (predicate guard removed, whitespace collapsed); when several rows match, the "
    "one with the highest 'specificity' names the variant, and a target admits the instruction only if every "
    "matching row accepts it. Per toolkit: 'accepted' targets; 'errors' maps ptxas's first error line ({target} "
    "stands for the target) to the targets it rejected; 'advisories' likewise for accepted targets. "
    "Regenerate with scripts/gen_ptx_facts.py."
)
MODULE = """.version {isa}
.target {target}
.address_size 64

.visible .entry probe()
{{
\t.reg .pred p<4>;
\t.reg .b8 b<4>;
\t.reg .b16 h<8>;
\t.reg .b32 r<24>;
\t.reg .b64 rd<8>;
\t.reg .f32 f<16>;
\t.reg .f64 d<8>;
{decls}\t{ptx}
\tret;
}}
"""
JOBS = 2
"""ptxas processes at once: the machine's two cores are shared."""


class Probe(NamedTuple):
    id: str
    family: str
    spec: str
    ptx: str
    decls: str = ""
    """Extra register declarations only this probe needs (kept out of MODULE so old targets still parse it)."""


PROBES_FILE = Path(__file__).resolve().parent / "ptx-probes.csv"
"""The probes, one instruction variant a row: ``id``, ``family``, ``spec``, ``ptx``, ``decls``."""


def load_probes(path: Path = PROBES_FILE) -> list[Probe]:
    """The probe list, in file order."""
    with path.open(newline="", encoding="utf-8") as f:
        return [Probe(**row) for row in csv.DictReader(f)]


PROBES = load_probes()


def spec_regex(spec: str) -> str:
    """Turn a probe spec into a regex over one instruction, anchored at the opcode (see the module docstring)."""
    out = []
    for i, token in enumerate(spec.removesuffix(".*").split(".")):
        if token == "*":
            out.append(r"(?:\.[^\s.]+)*?")
            continue
        frag = token if re.search(r"[\[\](|+?]", token) else re.escape(token)
        out.append(frag if i == 0 else r"\." + frag)
    return "^" + "".join(out) + r"(?:\.[^\s.]+)*(?=[\s;]|$)"


def specificity(spec: str) -> int:
    return sum(token != "*" for token in spec.split("."))


def first_line(text: str, words: tuple[str, ...], target: str) -> str | None:
    """ptxas's first line containing one of ``words``, without file name and line, the target as ``{target}``."""
    for line in text.splitlines():
        if any(w in line for w in words) and "assembly aborted" not in line:
            line = re.sub(r"^ptxas\s+\S+, line \d+; ", "", line.strip())
            line = re.sub(r"'" + re.escape(target) + r"'", "'{target}'", line)
            return re.sub(r"\s+", " ", line)
    return None


def assemble(ptxas: Path, isa: str, target: str, probe: Probe, workdir: Path) -> tuple[bool, str | None]:
    """Run ptxas on one probe; return (accepted, first error or advisory line)."""
    src = workdir / f"{probe.id}.{target}.ptx"
    src.write_text(MODULE.format(isa=isa, target=target, decls=probe.decls, ptx=probe.ptx))
    out = subprocess.run(
        [str(ptxas), "--gpu-name", target, str(src), "-o", os.devnull], capture_output=True, text=True, timeout=120
    )
    src.unlink()
    text = out.stdout + out.stderr
    if out.returncode:
        return False, first_line(text, ("error", "fatal"), target) or text.strip()[:300]
    return True, first_line(text, ("Advisory", "warning"), target)


def grouped(pairs: list[tuple[str, str]]) -> dict[str, list[str]]:
    groups: dict[str, list[str]] = {}
    for target, line in pairs:
        groups.setdefault(line, []).append(target)
    return dict(sorted(groups.items()))


def run_toolkit(version: str, probes: list[Probe], jobs: int) -> tuple[dict, dict[str, dict]]:
    tk = ensure_toolkit(version)
    ptxas, isa, targets = tk / "bin" / "ptxas", ptx_isa(tk), ptxas_targets(tk)
    work = [(p, t) for p in probes for t in targets]
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(jobs) as pool:
        outcomes = list(pool.map(lambda pt: assemble(ptxas, isa, pt[1], pt[0], Path(tmp)), work))
    results = {}
    for probe in probes:
        rows = [(t, o) for (p, t), o in zip(work, outcomes) if p is probe]
        results[probe.id] = {
            "accepted": [t for t, (ok, _) in rows if ok],
            "errors": grouped([(t, line) for t, (ok, line) in rows if not ok]),
            "advisories": grouped([(t, line) for t, (ok, line) in rows if ok and line]),
        }
    return {"ptx_isa": isa, "targets": targets}, results


def check_probes(probes: list[Probe]) -> None:
    """Fail on probes that cannot be right: duplicate ids or patterns, or a pattern that misses its own PTX."""
    ids = [p.id for p in probes]
    assert len(ids) == len(set(ids)), "duplicate probe ids"
    specs = [p.spec for p in probes]
    assert len(specs) == len(set(specs)), "two probes share a pattern: the evaluator could not tell them apart"
    for p in probes:
        assert re.match(spec_regex(p.spec), p.ptx), f"{p.id}: pattern {spec_regex(p.spec)} misses {p.ptx!r}"


def generate(versions: list[str], probes: list[Probe], jobs: int) -> dict:
    check_probes(probes)
    toolkits, per_toolkit = {}, {}
    for version in sorted(versions, key=version_key):
        toolkits[version], per_toolkit[version] = run_toolkit(version, probes, jobs)
    rows = []
    for p in probes:
        results = {v: per_toolkit[v][p.id] for v in toolkits}
        row = {"id": p.id, "family": p.family, "pattern": spec_regex(p.spec), "specificity": specificity(p.spec)}
        rows.append(row | {"ptx": p.ptx, "results": results})
    return {"_about": ABOUT, "toolkits": toolkits, "probes": rows}


def broken(table: dict) -> list[str]:
    """Probes accepted by no target of any toolkit: their PTX is wrong, so they are not facts."""
    return [
        f"{row['id']}: {next(iter(row['results'].values()))['errors']}"
        for row in table["probes"]
        if not any(r["accepted"] for r in row["results"].values())
    ]


def summary(table: dict) -> str:
    lines = []
    for row in table["probes"]:
        for version, r in row["results"].items():
            errors = "; ".join(f"{msg} [{' '.join(ts)}]" for msg, ts in r["errors"].items())
            lines.append(f"{row['id']:42} {version:9} ok: {' '.join(r['accepted']) or '-'}")
            if errors:
                lines.append(f"{'':52} rejected: {errors[:400]}")
    return "\n".join(lines)


def stale(shipped: dict, table: dict, versions: list[str], whole: bool) -> list[str]:
    """What in the shipped table differs from a fresh run over ``versions`` (``whole``: the run covered everything)."""

    def meta(row: dict) -> dict:
        return {k: v for k, v in row.items() if k != "results"}

    old_rows = {row["id"]: row for row in shipped["probes"]}
    differ = [v for v in versions if shipped["toolkits"].get(v) != table["toolkits"][v]]
    for row in table["probes"]:
        old = old_rows.get(row["id"], {"results": {}})
        if meta(old) != meta(row) or any(old["results"].get(v) != row["results"][v] for v in versions):
            differ.append(row["id"])
    if whole and (set(old_rows) != {row["id"] for row in table["probes"]} or shipped["_about"] != table["_about"]):
        differ.append("probe list or _about")
    return differ


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="compare with the shipped table instead of writing it")
    parser.add_argument("--toolkits", nargs="+", choices=sorted(TOOLKITS, key=version_key), metavar="VERSION")
    parser.add_argument("--probes", nargs="+", metavar="PREFIX", help="only probes whose id starts with one of these")
    parser.add_argument("--print", action="store_true", help="print what ptxas said and write nothing")
    parser.add_argument("--jobs", type=int, default=JOBS)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    versions = args.toolkits or list(TOOLKITS)
    probes = [p for p in PROBES if not args.probes or p.id.startswith(tuple(args.probes))]
    table = generate(versions, probes, args.jobs)
    if args.print:
        print(summary(table))
        return 0
    bad = [] if args.toolkits else broken(table)  # a variant may be newer than the toolkits asked for
    if bad:
        print("broken probes (accepted nowhere, fix their PTX):\n  " + "\n  ".join(bad), file=sys.stderr)
        return 1
    if not args.check:
        if args.toolkits or args.probes:
            parser.error("--toolkits/--probes only with --check or --print: the shipped table covers everything")
        args.out.write_text(dump(table))
        print(f"wrote {args.out} ({len(table['probes'])} probes, {len(table['toolkits'])} toolkits)")
        return 0
    differ = stale(json.loads(args.out.read_text()), table, versions, whole=not (args.toolkits or args.probes))
    for name in differ:
        print(f"{args.out.name}: {name} differs from what ptxas says; regenerate", file=sys.stderr)
    print(f"checked {len(probes)} probes on {len(versions)} toolkits: {'DIFFERS' if differ else 'up to date'}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
