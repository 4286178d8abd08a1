"""Where one cold scan's time and memory go, stage by stage, in one process.

    .venv/bin/python bench/stages.py TREE [--jobs N] [--only c|python]

Runs the stages of ``archaudit scan TREE --no-cache --format json`` one after the other in
this process (the C/CUDA reads and scans in ``--jobs`` workers, as the pipeline does; the
Python pass here, not in a worker of its own, so that its memory shows) and prints, after each
stage, the wall and CPU seconds it took and this process's resident and peak resident size.
The Python load (parse, symbol tables, learning the predicates) is followed by a stage a scan
does not have: the same files parsed again by tree-sitter alone, to show how much of the load
is parsing. The real pipeline overlaps the Python pass with the C/CUDA stages; this script
does not, so its total is the sum of the stages, not a scan's wall time.
"""

from __future__ import annotations

import argparse
import gc
import os
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from auditor import __version__, pipeline  # noqa: E402
from auditor.cli import GC_THRESHOLDS  # noqa: E402
from auditor.facts.features import with_features  # noqa: E402
from auditor.model import AuditResult  # noqa: E402
from auditor.pipeline.workers import Workers  # noqa: E402
from auditor.python import extract as python_gates  # noqa: E402
from auditor.python.symbols import parser  # noqa: E402
from auditor.render import json as json_render  # noqa: E402
from auditor.sources import DirectoryProvider, Filters, read_all  # noqa: E402

C_GLOBS = (
    "*.cu",
    "*.cuh",
    "*.h",
    "*.hpp",
    "*.hh",
    "*.inl",
    "*.cpp",
    "*.cc",
    "*.cxx",
    "*.c",
    "*.jinja",
    "*.jinja2",
    "*.in",
)


def status(field: str) -> int:
    """A /proc/self/status field in MiB (0 without /proc)."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) // 1024
    except OSError:
        pass
    return 0


class Clock:
    def __init__(self) -> None:
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        print(f"{'stage':34} {'wall s':>8} {'CPU s':>8} {'RSS MiB':>8} {'peak MiB':>9}")

    def mark(self, stage: str) -> None:
        wall, cpu = time.perf_counter(), time.process_time()
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        print(
            f"{stage:34} {wall - self.wall:8.2f} {cpu - self.cpu:8.2f} {status('VmRSS'):8} {status('VmHWM'):9}"
            f"   (workers so far: {children.ru_utime + children.ru_stime:.1f} CPU s,"
            f" largest {children.ru_maxrss // 1024} MiB)",
            flush=True,
        )
        self.wall, self.cpu = time.perf_counter(), time.process_time()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("tree", type=Path)
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    p.add_argument("--only", choices=("c", "python"), default=None, help="only the C/CUDA or only the Python files")
    args = p.parse_args(argv)
    gc.set_threshold(*GC_THRESHOLDS)  # as the command line sets it
    filters = Filters(C_GLOBS) if args.only == "c" else Filters(("*.py",)) if args.only == "python" else Filters()
    options = pipeline.Options(jobs=args.jobs, filters=filters)
    clock = Clock()
    files, _ = read_all(DirectoryProvider(str(args.tree), filters))
    clock.mark(f"list {len(files)} files")
    with Workers(args.jobs, len(files)) as workers:
        reads = workers.read(files, digest=False, scan=True)
    clock.mark("read + C/CUDA scan (workers)")
    gates, errors = pipeline.cuda_gates(files, reads, str(args.tree))
    clock.mark(f"C/CUDA gates ({len(gates)})")
    readable = [f for f, (r, _) in zip(files, reads) if r.error is None]
    gates = with_features(gates, readable, options.targets)
    clock.mark("C/CUDA features")
    findings = pipeline.apply_rules(gates, [], options, {})
    clock.mark(f"C/CUDA rules ({len(findings)} findings)")
    python = [f for f in readable if f.language == "python"]
    prog, relevant = python_gates.load(python)
    clock.mark(f"Python load ({len(prog.by_path)} modules)")
    for mod in prog.by_path.values():
        parser().parse(mod.data)
    clock.mark(f"  parse alone, again ({sum(len(m.data) for m in prog.by_path.values()) >> 20} MiB)")
    py_gates, _ = python_gates.read(prog, relevant, {f.path: f.input for f in python}, args.jobs)
    clock.mark(f"Python read ({len(py_gates)} gates, workers)")
    py_gates = with_features(py_gates, readable, options.targets)
    findings += pipeline.apply_rules(py_gates, [], options, {})
    clock.mark("Python features + rules")
    result = AuditResult(__version__, options.targets, (), tuple(gates + py_gates), tuple(findings), tuple(errors))
    text = json_render.render(result)
    clock.mark(f"JSON render ({len(text) >> 20} MiB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
