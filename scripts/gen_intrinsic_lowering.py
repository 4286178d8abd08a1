"""Generate ``auditor/data/intrinsic-lowering.json``: which PTX instructions a CUDA intrinsic compiles to, per target.

Why: ``#if … defined(__CUDA_ARCH_FEAT_SM120_ALL)`` around ``asm("cvt.rp.satfinite.ue8m0x2.f32 …")`` with an
``#else`` that calls ``__nv_cvt_float_to_e8m0(v, __NV_SATFINITE, cudaRoundPosInf)`` turns 12.1 away from nothing: nvcc
lowers the intrinsic to the very same instruction on sm_121a. Whether it does is the compiler's answer, per target, so
the table is read from nvcc.

How: each probe (a row of ``scripts/intrinsic-probes.csv``: its header, one call on ``float x`` or ``float2 v``, and
the regex that finds such a call in code) is compiled alone with ``nvcc -ptx -arch=<target>`` for every ``sm_*``
target from sm_80 up that this nvcc builds (``auditor/data/toolkits.json``). Of the PTX, the instructions that
``auditor/data/ptx-facts.json`` has a probed variant for are kept: the ones a gate's guarded ``asm`` can name. A probe
that emits none on any target is a broken probe and makes the script fail.

Usage::

    python scripts/gen_intrinsic_lowering.py            # write auditor/data/intrinsic-lowering.json (about a minute)
    python scripts/gen_intrinsic_lowering.py --check    # exit 1 if the shipped table differs from what nvcc says
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from auditor import arch  # noqa: E402
from auditor.facts import ptx  # noqa: E402

PROBES = ROOT / "scripts" / "intrinsic-probes.csv"
OUT = ROOT / "auditor" / "data" / "intrinsic-lowering.json"
ABOUT = (
    "Which PTX instructions a CUDA intrinsic call compiles to, per sm_* target, as nvcc {nvcc} emits them "
    "(nvcc -ptx -arch=T; only instructions ptx-facts.json has a probed variant for). 'pattern' is a regex that finds "
    "such a call in code. A fallback branch whose call emits, on a target, every instruction the guarded asm of its "
    "decision's other branch uses gives that target the same code. Regenerate with scripts/gen_intrinsic_lowering.py."
)
MODULE = """#include <{header}>
__global__ void probe(const float* in, void* out) {{
  float x = in[0];
  float2 v = make_float2(in[0], in[1]);
  auto r = {call};
  *reinterpret_cast<decltype(r)*>(out) = r;
}}
"""
_INSTRUCTION = re.compile(r"(?:^|[{;])\s*(?:@!?%\w+\s+)?([a-z][\w.:]*)", re.M)


def nvcc_version() -> str:
    out = subprocess.run(["nvcc", "--version"], capture_output=True, text=True, check=True).stdout
    return re.search(r"V(\d+\.\d+\.\d+)", out).group(1)


def targets(version: str) -> list[str]:
    """The ``sm_*`` targets from sm_80 up that this nvcc builds."""
    (toolkit,) = [k for k in arch.toolkits() if k.version == version]
    return [t for t in toolkit.targets if t.startswith("sm_") and int(re.match(r"sm_(\d+)", t).group(1)) >= 80]


def emitted(header: str, call: str, target: str, workdir: Path) -> list[str]:
    """The notable instructions of one probe's PTX for one target."""
    src = workdir / f"{target}_{abs(hash(call))}.cu"
    src.write_text(MODULE.format(header=header, call=call))
    out = src.with_suffix(".ptx")
    subprocess.run(["nvcc", "-ptx", f"-arch={target}", str(src), "-o", str(out)], check=True, capture_output=True)
    found = {m.group(1) for m in _INSTRUCTION.finditer(out.read_text())}
    return sorted(op for op in found if ptx.judge(op, ()).variant)


def generate(only: list[str] | None = None) -> dict:
    version = nvcc_version()
    wanted = targets(version)
    rows = [r for r in csv.DictReader(PROBES.open()) if not only or r["id"] in only]
    out = []
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(2) as pool:
        for row in rows:
            jobs = {t: pool.submit(emitted, row["header"], row["call"], t, Path(tmp)) for t in wanted}
            emits = {t: job.result() for t, job in jobs.items() if job.result()}
            if not emits:
                raise SystemExit(f"probe {row['id']} emits no known instruction on any target: a broken probe")
            out.append({"id": row["id"], "call": row["call"], "pattern": row["pattern"], "emits": emits})
    return {"_about": ABOUT.format(nvcc=version), "nvcc": version, "intrinsics": out}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the shipped table instead of writing it")
    parser.add_argument("--out", type=Path, default=OUT, help="the table to write or check")
    parser.add_argument("--probes", nargs="*", help="only these probe ids (with --check: only their rows)")
    args = parser.parse_args()
    table = generate(args.probes)
    if args.check:
        shipped = json.loads(args.out.read_text())
        rows = [r for r in shipped["intrinsics"] if not args.probes or r["id"] in args.probes]
        same = rows == table["intrinsics"] and shipped["nvcc"] == table["nvcc"]
        print(f"{args.out.name} is current" if same else f"{args.out.name} differs from what nvcc says")
        return 0 if same else 1
    args.out.write_text(json.dumps(table, indent=1) + "\n")
    print(f"wrote {args.out}: {len(table['intrinsics'])} intrinsics")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
