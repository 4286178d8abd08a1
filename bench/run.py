#!/usr/bin/env python3
"""Benchmark archaudit against ripgrep, semgrep and ast-grep on real releases.

By default the tree is flashinfer-python 0.7.4 + sglang 0.5.23 (their source files, about
19k), downloaded once with pip and unpacked into the bench cache. Every tool runs on the
same tree, several times, interleaved; the report gives median wall time, the ratio to
ripgrep, CPU time, peak RSS and what each tool found, then how archaudit's cold time grows
with ¼, ½ and all of the files. See bench/README.md.

Only the standard library is used here; archaudit is run as a command, like the others.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import platform
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path, PurePosixPath

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
RULES = BENCH / "rules"
WHEELS = ("flashinfer-python==0.7.4", "sglang==0.5.23")
ENVIRONMENT = ("torch==2.14.1", "triton==3.8.0", "sgl-kernel==0.3.21", "flashinfer-python==0.7.4", "sglang==0.5.23")
"""--environment: these wheels unpacked whole into one site-packages-like tree."""
EXPLAINED = "sgl-kernel==0.3.21"
"""--explain: the wheel whose gate is explained from a warm cache."""
DIFFED = ("flashinfer-python==0.6.7", "flashinfer-python==0.7.4")
"""--diff: the pre-upgrade review timed, old release first."""
NO_HOST_PASS = {"ARCHAUDIT_BENCH_NO_HOST_PASS": "1"}
"""Environment that turns archaudit's host C++ pass off (auditor/pipeline/workers.py), for --host-pass."""
TOOLS = ("ripgrep", "archaudit", "semgrep", "ast-grep")

# The files archaudit reads (auditor/sources.py); the tree holds only these, so every
# tool sees the same files.
C_SUFFIXES = frozenset({".cu", ".cuh", ".h", ".hpp", ".hh", ".inl", ".cpp", ".cc", ".cxx", ".c"})
TEMPLATE_SUFFIXES = frozenset({".jinja", ".jinja2", ".in"})
SOURCE_SUFFIXES = C_SUFFIXES | TEMPLATE_SUFFIXES | {".py"}
QUICK_FILES = 300
"""--quick: at most this many files (every k-th by sorted path)."""


def log(msg: str) -> None:
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


def language(path: str) -> str:
    """``python`` or ``c`` (C, C++, CUDA and their templates), by suffix."""
    return "python" if path.endswith(".py") or path.endswith(".py.in") else "c"


# --------------------------------------------------------------------------- the tree


def default_cache() -> Path:
    env = os.environ.get("ARCHAUDIT_BENCH_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "archaudit-bench"


def default_wheels() -> Path:
    env = os.environ.get("ARCHAUDIT_WHEEL_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "archaudit-wheels"


def find_wheel(wheel_dir: Path, requirement: str) -> Path | None:
    name, version = requirement.split("==")
    stem = name.replace("-", "_").lower() + "-" + version + "-"
    found = sorted(p for p in wheel_dir.glob("*.whl") if p.name.lower().startswith(stem))
    return found[0] if found else None


def ensure_wheels(wheel_dir: Path, wanted: tuple[str, ...] = WHEELS) -> list[Path]:
    """The wheels, downloaded with pip into wheel_dir unless already there."""
    wheel_dir.mkdir(parents=True, exist_ok=True)
    missing = [r for r in wanted if find_wheel(wheel_dir, r) is None]
    if missing:
        log(f"downloading {' '.join(missing)} into {wheel_dir}")
        base = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-q", "-d", str(wheel_dir)]
        if subprocess.run(base + missing, capture_output=True).returncode != 0:
            # sglang ships CPython-3.11 manylinux wheels: ask for those whatever runs this script.
            tags = ["--python-version", "3.11", "--implementation", "cp", "--platform", "manylinux_2_34_x86_64"]
            subprocess.run(base + tags + missing, check=True)
    wheels = [find_wheel(wheel_dir, r) for r in wanted]
    if any(w is None for w in wheels):
        raise SystemExit(f"bench: pip did not leave {wanted} in {wheel_dir}")
    return wheels  # type: ignore[return-value]


def unpack(wheels: list[Path], dest: Path) -> Path:
    """Source files of the wheels under dest/<wheel name>/; reused when complete."""
    marker = dest / ".complete"
    if marker.exists():
        return dest
    if dest.exists():
        shutil.rmtree(dest)
    tmp = dest.with_name(dest.name + ".partial")
    if tmp.exists():
        shutil.rmtree(tmp)
    count = 0
    for wheel in wheels:
        root = tmp / wheel.name.split("-")[0]
        with zipfile.ZipFile(wheel) as z:
            for info in z.infolist():
                p = PurePosixPath(info.filename)
                if info.is_dir() or p.is_absolute() or ".." in p.parts or not is_source(p.name):
                    continue
                target = root.joinpath(*p.parts)
                target.parent.mkdir(parents=True, exist_ok=True)
                with z.open(info) as src, open(target, "wb") as out:
                    shutil.copyfileobj(src, out)
                count += 1
    (tmp / ".complete").write_text(f"{count} files from {', '.join(w.name for w in wheels)}\n")
    tmp.rename(dest)
    log(f"unpacked {count} source files into {dest}")
    return dest


def unpack_whole(wheels: list[Path], dest: Path) -> Path:
    """Every member of the wheels under dest, side by side as pip installs them (an environment's
    site-packages, binaries included); reused when complete."""
    marker = dest / ".complete"
    if marker.exists():
        return dest
    tmp = dest.with_name(dest.name + ".partial")
    for d in (dest, tmp):
        if d.exists():
            shutil.rmtree(d)
    count = 0
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as z:
            for info in z.infolist():
                p = PurePosixPath(info.filename)
                if info.is_dir() or p.is_absolute() or ".." in p.parts:
                    continue
                target = tmp.joinpath(*p.parts)
                target.parent.mkdir(parents=True, exist_ok=True)
                with z.open(info) as src, open(target, "wb") as out:
                    shutil.copyfileobj(src, out, 1 << 20)
                count += 1
    (tmp / ".complete").write_text(f"{count} files from {', '.join(w.name for w in wheels)}\n")
    tmp.rename(dest)
    log(f"unpacked {count} files into {dest}")
    return dest


def is_source(name: str) -> bool:
    suffix = PurePosixPath(name).suffix.lower()
    return suffix in SOURCE_SUFFIXES


def source_files(tree: Path) -> list[str]:
    """Relative '/'-paths of the tree's source files, sorted (the basis of every subset)."""
    out = []
    for dirpath, dirnames, filenames in os.walk(tree):
        dirnames.sort()
        rel = Path(dirpath).relative_to(tree)
        for name in filenames:
            if is_source(name):
                out.append((rel / name).as_posix())
    return sorted(out)


def subset(tree: Path, files: list[str], step: int, dest: Path) -> Path:
    """Every step-th file of ``files`` (by sorted path, from the first), hard-linked under dest."""
    chosen = files[::step]
    return linked(dest, "\n".join(chosen), ((tree / rel, rel) for rel in chosen))


def copies(tree: Path, files: list[str], k: int, dest: Path) -> Path:
    """``k`` copies of ``files`` side by side (``copy-1/`` ... ``copy-k/``), hard-linked under dest:
    k times the code without a denser call graph, to tell the cost of more code from the cost
    of more of one program's definitions being present."""
    return linked(
        dest, f"{k}\n" + "\n".join(files), ((tree / rel, f"copy-{i}/{rel}") for i in range(1, k + 1) for rel in files)
    )


def linked(dest: Path, manifest: str, pairs) -> Path:
    """``dest`` holding a hard link (or copy) of each (source, relative path) in ``pairs``; kept
    from an earlier run when its manifest is the same."""
    digest = hashlib.sha256(manifest.encode()).hexdigest()
    marker = dest / ".complete"
    if marker.exists() and marker.read_text().strip() == digest:
        return dest
    if dest.exists():
        shutil.rmtree(dest)
    for src, rel in pairs:
        dst = dest / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)
    marker.write_text(digest + "\n")
    return dest


def tree_key(tree: Path) -> str:
    return hashlib.sha256(str(tree.resolve()).encode()).hexdigest()[:12]


# --------------------------------------------------------------------------- running


@dataclass
class Run:
    wall: float
    cpu: float
    maxrss_kib: int
    rc: int | None
    timed_out: bool
    stdout: bytes = b""
    stderr: bytes = b""
    valid: bool = True
    """The output is what the tool writes when it works (set by Tool.check)."""
    tree_rss_kib: int = 0
    """Peak of the summed RSS of every process of the command's session, sampled (:class:`TreeRss`)."""


LAUNCHER = """
import os, sys
pid = os.fork()
if pid == 0:
    try:
        os.execvp(sys.argv[2], sys.argv[2:])
    finally:
        os._exit(127)
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as fh:
    fh.write(f"{usage.ru_utime + usage.ru_stime} {usage.ru_maxrss}")
sys.exit(os.waitstatus_to_exitcode(status) % 256)
"""
"""Runs a command and writes its rusage. The kernel charges an exec'd child with the peak RSS of
the process it was forked from; started from this small launcher, not from the benchmark
(which holds the tools' outputs), a tool's peak is its own."""


class TreeRss(threading.Thread):
    """Samples the summed resident memory (PSS) of every process in one session (the launcher,
    the command and its workers) every ``interval`` seconds; ``peak_kib`` is the largest sum
    seen. ru_maxrss gives the largest single process; a pool of workers needs the sum."""

    def __init__(self, session: int, interval: float = 0.05):
        super().__init__(daemon=True)
        self.session, self.interval = session, interval
        self.peak_kib = 0
        self.done = threading.Event()
        self.page_kib = os.sysconf("SC_PAGE_SIZE") // 1024

    def run(self) -> None:
        while not self.done.is_set():
            self.peak_kib = max(self.peak_kib, self.sample())
            self.done.wait(self.interval)

    def resident_kib(self, pid: str) -> int:
        """A process's proportional share of resident memory (pages shared with its parent or
        siblings, as forked workers share theirs, counted once over all), else its RSS."""
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    return int(line.split()[1])
        except OSError:
            pass
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * self.page_kib

    def sample(self) -> int:
        total = 0
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                stat = Path(f"/proc/{pid}/stat").read_text()
                if int(stat.rsplit(")", 1)[1].split()[3]) != self.session:  # field 6: session id
                    continue
                total += self.resident_kib(pid)
            except (OSError, ValueError, IndexError):
                continue  # gone meanwhile
        return total


def run_once(cmd: list[str], timeout: float, cwd: Path | None = None, env: dict | None = None) -> Run:
    """Run cmd, stdout/stderr to temporary files; wall time, and the rusage of cmd (:data:`LAUNCHER`).

    The launcher leads its own session, so a timeout kills it, cmd and everything cmd started.
    ru_maxrss is the largest single process among cmd and the descendants it waited for
    (worker pools, semgrep-core), not their sum.
    """
    with (
        tempfile.TemporaryFile() as out,
        tempfile.TemporaryFile() as err,
        tempfile.NamedTemporaryFile("r") as usage_file,
    ):
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-S", "-c", LAUNCHER, usage_file.name, *cmd],
            stdout=out,
            stderr=err,
            stdin=subprocess.DEVNULL,
            cwd=cwd,
            env=env,
            start_new_session=True,
        )
        expired = threading.Event()

        def kill() -> None:
            expired.set()
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

        timer = threading.Timer(timeout, kill)
        timer.start()
        sampler = TreeRss(proc.pid)
        sampler.start()
        try:
            _, status, _ = os.wait4(proc.pid, 0)
        finally:
            timer.cancel()
            sampler.done.set()
        wall = time.perf_counter() - t0
        sampler.join()
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here; keep Popen from waiting
        if expired.is_set():
            try:  # whatever the child left behind in its session
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        out.seek(0)
        err.seek(0)
        cpu, maxrss = (usage_file.read().split() + ["nan", "0"])[:2]  # empty when killed
        return Run(
            wall=wall,
            cpu=float(cpu),
            maxrss_kib=int(maxrss),
            rc=proc.returncode,
            timed_out=expired.is_set(),
            stdout=out.read(),
            stderr=err.read(),
            tree_rss_kib=sampler.peak_kib,
        )


@dataclass
class Counts:
    python: int = 0
    c: int = 0
    note: str = ""

    @property
    def total(self) -> int:
        return self.python + self.c


@dataclass
class Tool:
    """One row of the table."""

    name: str
    finds: str
    command: Callable[[Path], list[str]]
    count: Callable[[Run], Counts]
    ok_codes: tuple[int, ...] = (0,)
    validate: Callable[[bytes], bool] | None = None
    """A check of stdout, for tools whose exit code does not tell a crash from a result."""
    env: dict | None = None
    version: str = ""
    unavailable: str = ""
    """Why this tool has no numbers (not installed, flag missing ...)."""
    runs: list[Run] = field(default_factory=list)
    gave_up: bool = False
    """Timed out once: not run again."""
    counts: Counts | None = None
    note: str = ""

    def check(self, r: Run) -> Run:
        """Record whether the output is valid (call before stdout is dropped)."""
        r.valid = self.validate is None or (not r.timed_out and self.validate(r.stdout))
        return r

    def good(self, r: Run) -> bool:
        return not r.timed_out and r.rc in self.ok_codes and r.valid


def capture(cmd: list[str], timeout: float = 120) -> str:
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.SubprocessError):
        return ""
    return (p.stdout or p.stderr).strip()


# --- ripgrep


def rg_pattern() -> str:
    lines = (RULES / "candidates.rg").read_text().splitlines()
    return "|".join(s.strip() for s in lines if s.strip() and not s.lstrip().startswith("#"))


def ensure_rg(install: bool) -> tuple[str | None, str]:
    rg = shutil.which("rg")
    if rg:
        return rg, ""
    hint = "ripgrep is not installed (Debian: apt-get install ripgrep)"
    if not install:
        return None, hint
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        log(hint + "; not root, so not installing it")
        return None, hint
    log("installing ripgrep with apt-get")
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    if subprocess.run(["apt-get", "install", "-y", "ripgrep"], **quiet).returncode != 0:
        subprocess.run(["apt-get", "update"], **quiet)
        subprocess.run(["apt-get", "install", "-y", "ripgrep"], **quiet)
    rg = shutil.which("rg")
    return (rg, "") if rg else (None, hint + "; apt-get install failed")


def rg_counts(r: Run) -> Counts:
    c = Counts()
    for line in r.stdout.split(b"\n"):
        if not line:
            continue
        path = line.split(b"\0", 1)[0].decode("utf-8", "replace")
        if language(path) == "python":
            c.python += 1
        else:
            c.c += 1
    return c


def ripgrep_tool(jobs: int, install: bool) -> Tool:
    rg, why = ensure_rg(install)
    pattern = rg_pattern()
    globs = [a for s in sorted(SOURCE_SUFFIXES) for a in ("-g", f"*{s}")]
    tool = Tool(
        name="ripgrep",
        finds="every candidate line (bench/rules/candidates.rg)",
        command=lambda tree: [
            rg or "rg",
            "--no-heading",
            "--line-number",
            "--null",
            "--no-ignore",
            "--hidden",
            "--no-messages",
            "-j",
            str(jobs),
            *globs,
            "-e",
            pattern,
            str(tree),
        ],
        count=rg_counts,
        ok_codes=(0, 1),  # 1: no match
        unavailable=why,
    )
    if rg:
        tool.version = capture([rg, "--version"]).splitlines()[0]
    return tool


# --- archaudit


def archaudit_cmd(spec: str | None) -> list[str]:
    if spec:
        return shlex.split(spec)
    if importlib.util.find_spec("auditor") is not None:
        return [sys.executable, "-m", "auditor"]
    exe = shutil.which("archaudit")
    if exe:
        return [exe]
    return [sys.executable, "-m", "auditor"]


def freeze(where: Path) -> Path:
    """A copy of the package (with its rules and report templates as ``auditor.rules.pack`` and
    ``auditor.reports``, as installed) for ``PYTHONPATH``."""
    shutil.rmtree(where, ignore_errors=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(REPO / "auditor", where / "auditor", ignore=ignore)
    shutil.copytree(REPO / "rules", where / "auditor" / "rules" / "pack", ignore=ignore)
    shutil.copytree(REPO / "reports", where / "auditor" / "reports", ignore=ignore)
    return where


def archaudit_counts(r: Run) -> Counts:
    try:
        doc = json.loads(r.stdout)
    except ValueError:
        return Counts(note="output is not JSON")
    c = Counts()
    for g in doc.get("gates", []):
        if g.get("language") == "python":
            c.python += 1
        else:
            c.c += 1
    errors = len(doc.get("errors", []) or [])
    if errors:
        c.note = f"{errors} file errors"
    return c


def archaudit_tool(base: list[str], jobs: int, extra: list[str], name: str = "archaudit cold") -> Tool:
    return Tool(
        name=name,
        finds="gates with admitted archs (Python + C/CUDA)",
        command=lambda tree: [*base, "scan", str(tree), "--format", "json", "--jobs", str(jobs), *extra],
        count=archaudit_counts,
        ok_codes=(0,),  # no --fail-on: 1 is a crash, not findings
        validate=lambda out: out.lstrip().startswith(b"{"),
        version=capture([*base, "--version"]),
    )


# --- semgrep and ast-grep (their own venv, not the project's dependencies)


def tools_venv(cache: Path, install: bool) -> Path | None:
    venv = cache / "tools-venv"
    bin_dir = venv / "bin"
    if (bin_dir / "semgrep").exists() and (bin_dir / "ast-grep").exists():
        return bin_dir
    if not install:
        return bin_dir if bin_dir.exists() else None
    log(f"installing semgrep and ast-grep-cli into {venv}")
    if not (bin_dir / "python").exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    p = subprocess.run(
        [str(bin_dir / "python"), "-m", "pip", "install", "-q", "semgrep", "ast-grep-cli"],
        capture_output=True,
        text=True,
    )
    if p.returncode != 0:
        log("pip could not install semgrep/ast-grep-cli:\n" + "\n".join(p.stderr.splitlines()[-5:]))
    return bin_dir


def which_in(bin_dir: Path | None, name: str) -> str | None:
    if bin_dir and (bin_dir / name).exists():
        return str(bin_dir / name)
    return shutil.which(name)


def semgrep_counts(r: Run) -> Counts:
    try:
        doc = json.loads(r.stdout)
    except ValueError:
        return Counts(note="output is not JSON")
    c = Counts()
    for res in doc.get("results", []):
        if language(res.get("path", "")) == "python":
            c.python += 1
        else:
            c.c += 1
    errs = doc.get("errors", [])
    if errs:
        c.note = f"{len(errs)} parse/scan errors"
    return c


def semgrep_tool(bin_dir: Path | None, jobs: int) -> Tool:
    exe = which_in(bin_dir, "semgrep")
    env = dict(os.environ, SEMGREP_ENABLE_VERSION_CHECK="0", SEMGREP_SEND_METRICS="off")
    extra = []
    if exe and "--x-ignore-semgrepignore-files" in capture([exe, "scan", "--help"]):
        extra.append("--x-ignore-semgrepignore-files")  # its default ignore list skips tests/, build/ …
    tool = Tool(
        name="semgrep",
        finds="Python gates; NV_IF_TARGET in .h/.hpp/.cpp — cannot read .cu/.cuh, no #if",
        command=lambda tree: [
            exe or "semgrep",
            "scan",
            "--config",
            str(RULES / "semgrep.yml"),
            "--json",
            "--metrics=off",
            "--disable-version-check",
            "--no-git-ignore",
            *extra,
            "--jobs",
            str(jobs),
            str(tree),
        ],
        count=semgrep_counts,
        ok_codes=(0, 1),
        env=env,
        unavailable="" if exe else "semgrep not installed (pip install semgrep)",
    )
    if exe:
        tool.version = "semgrep " + capture([exe, "--version"], timeout=300).splitlines()[-1]
    return tool


def astgrep_counts(r: Run) -> Counts:
    c = Counts()
    for line in r.stdout.splitlines():
        if not line.strip():
            continue
        try:
            m = json.loads(line)
        except ValueError:
            continue
        if m.get("language") == "Python" or language(m.get("file", "")) == "python":
            c.python += 1
        else:
            c.c += 1
    return c


def astgrep_tool(bin_dir: Path | None, jobs: int) -> Tool:
    exe = which_in(bin_dir, "ast-grep")  # never `sg`: on Debian that is shadow's newgrp
    tool = Tool(
        name="ast-grep",
        finds="Python gates; #if/#ifdef on __CUDA_ARCH (preproc_* nodes), NV_IF_TARGET",
        command=lambda tree: [
            exe or "ast-grep",
            "scan",
            "-c",
            str(RULES / "ast-grep" / "sgconfig.yml"),
            "--json=stream",
            "--no-ignore",
            "hidden",
            "--no-ignore",
            "vcs",
            "--no-ignore",
            "dot",
            "--no-ignore",
            "parent",
            "-j",
            str(jobs),
            str(tree),
        ],
        count=astgrep_counts,
        ok_codes=(0, 1),
        unavailable="" if exe else "ast-grep not installed (pip install ast-grep-cli)",
    )
    if exe:
        tool.version = capture([exe, "--version"])
    return tool


# --------------------------------------------------------------------------- the report


SCALE_HEADER = ["files", "count", "median wall s", "ms per file", "CPU s", "peak RSS MiB", "gates"]


def scale_runs(cold: Tool, tree: Path, label: str, args: argparse.Namespace) -> list[Run]:
    """``args.runs`` cold runs on ``tree``, keeping only the first good run's output (for the count)."""
    runs: list[Run] = []
    for i in range(args.runs):
        r = cold.check(run_once(cold.command(tree), args.timeout))
        log(f"scaling {label} run {i + 1}/{args.runs}: {r.wall:.2f} s, rc={r.rc}")
        if not cold.good(r) or any(cold.good(x) for x in runs):
            r.stdout = b""
        runs.append(r)
        if r.timed_out:
            break
    return runs


def scale_row(cold: Tool, label: str, runs: list[Run], count: int, gates: int | None = None) -> list[str]:
    """One row of :data:`SCALE_HEADER` from a tree's cold runs (``gates`` when already counted)."""
    good = [r for r in runs if cold.good(r)]
    if not good:
        status = "timeout" if any(r.timed_out for r in runs) else "error" if runs else "–"
        return [label, str(count), status, "–", "–", "–", "–"]
    wall = median([r.wall for r in good])
    if gates is None:
        gates = archaudit_counts(good[0]).total
    return [
        label,
        str(count),
        fmt_s(wall),
        f"{1000 * wall / count:.2f}",
        fmt_s(median([r.cpu for r in good])),
        f"{max(r.maxrss_kib for r in good) / 1024:.0f}",
        str(gates),
    ]


def median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def machine_facts() -> dict[str, str]:
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = ""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                mem = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
                break
    except OSError:
        pass
    commit = capture(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"])
    if commit and capture(["git", "-C", str(REPO), "status", "--porcelain", "--", "auditor", "rules"]):
        commit += " (+ uncommitted changes)"
    return {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "nproc": str(os.cpu_count()),
        "CPU": cpu or platform.processor() or "?",
        "memory": mem or "?",
        "OS": f"{platform.system()} {platform.release()}",
        "Python": platform.python_version(),
        "archaudit commit": commit or "?",
    }


def loadavg() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "?"


def fmt_s(x: float) -> str:
    if x != x:  # nan
        return "–"
    return f"{x:.3f}" if x < 1 else f"{x:.2f}" if x < 100 else f"{x:.0f}"


def tool_row(t: Tool, rg_wall: float | None) -> list[str]:
    if t.unavailable:
        return [t.name, t.finds, "n/a", "–", "–", "–", "–", "–", "–", "–", t.unavailable]
    good = [r for r in t.runs if t.good(r)]
    bad = [r for r in t.runs if not t.good(r)]
    notes = []
    if t.note:
        notes.append(t.note)
    if any(r.timed_out for r in bad):
        notes.append(f"timeout ({sum(r.timed_out for r in bad)}/{len(t.runs)} runs)")
    failed = [r for r in bad if not r.timed_out]
    if failed:
        msg = failed[0].stderr.decode("utf-8", "replace").strip().splitlines()
        notes.append(f"failed rc={failed[0].rc}" + (f": {msg[-1][:120]}" if msg else ""))
    if t.counts and t.counts.note:
        notes.append(t.counts.note)
    if not good:
        status = "timeout" if any(r.timed_out for r in bad) else "error"
        return [t.name, t.finds, status, "–", "–", "–", "–", "–", "–", "–", "; ".join(notes)]
    walls = [r.wall for r in good]
    wall = median(walls)
    ratio = f"{wall / rg_wall:.1f}×" if rg_wall else "–"
    spread = f"{fmt_s(min(walls))}–{fmt_s(max(walls))}" if len(walls) > 1 else "–"
    cpu = median([r.cpu for r in good])
    rss = max(r.maxrss_kib for r in good) / 1024
    tree_rss = max(r.tree_rss_kib for r in good) / 1024
    c = t.counts or Counts()
    return [
        t.name,
        t.finds,
        fmt_s(wall),
        spread,
        ratio,
        fmt_s(cpu),
        f"{rss:.0f}",
        f"{tree_rss:.0f}",
        str(c.python),
        str(c.c),
        "; ".join(notes),
    ]


def table(header: list[str], rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]
    return "\n".join(out)


# --------------------------------------------------------------------------- cases

TOOL_HEADER = [
    "tool",
    "finds",
    "median wall s",
    "min–max s",
    "× ripgrep",
    "CPU s",
    "peak RSS MiB",
    "tree RSS MiB",
    "Python matches",
    "C/CUDA matches",
    "notes",
]


def warm_tool(base: list[str], jobs: int, warm_dir: Path) -> Tool:
    warm = archaudit_tool(base, jobs, ["--cache-dir", str(warm_dir)], name="archaudit warm")
    warm.finds = "same, second run with the result cache"
    return warm


def prime(t: Tool, tree: Path, warm_dir: Path, args: argparse.Namespace) -> None:
    """Warm cache: one priming run fills it; the timed runs read it."""
    shutil.rmtree(warm_dir, ignore_errors=True)
    warm_dir.mkdir(parents=True)
    log(f"{t.name}: priming run")
    first = t.check(run_once(t.command(tree), args.timeout))
    err = first.stderr.decode("utf-8", "replace")
    if first.rc == 2 and "--cache-dir" in err and "unrecognized" in err:
        t.unavailable = "n/a: this archaudit has no --cache-dir"
    elif not t.good(first):
        t.unavailable = "n/a: priming run " + ("timed out" if first.timed_out else f"failed (rc={first.rc})")
    else:
        # A directory input downloads nothing: whatever appeared is the result cache.
        written = [p for p in warm_dir.rglob("*") if p.is_file()]
        if not written:
            t.note = "n/a in effect: no result cache was written, so warm = cold"
        else:
            t.note = f"primed in {fmt_s(first.wall)} s; cache {sum(p.stat().st_size for p in written) / 2**20:.1f} MiB"


def interleaved(tools: list[Tool], tree: Path, args: argparse.Namespace) -> None:
    """Run 1 of every tool, then run 2 …, so background load hits all alike."""
    for i in range(args.runs):
        for t in tools:
            if t.unavailable or t.gave_up:
                continue
            r = t.check(run_once(t.command(tree), args.timeout, env=t.env))
            t.runs.append(r)
            status = "timeout" if r.timed_out else f"rc={r.rc}"
            log(
                f"run {i + 1}/{args.runs} {t.name}: {r.wall:.2f} s, {r.maxrss_kib / 1024:.0f} MiB "
                f"(tree {r.tree_rss_kib / 1024:.0f} MiB), {status}"
            )
            if t.good(r) and t.counts is None:
                t.counts = t.count(r)
            r.stdout = b""  # keep memory flat; counts come from the first good run
            if r.timed_out:  # don't spend another timeout on it
                t.gave_up = True


def _median_of(t: Tool) -> float | None:
    good = [r.wall for r in t.runs if t.good(r)]
    return median(good) if good else None


def host_section(tools: list[Tool]) -> list[str]:
    """Issue #18's check: the cold time with and without the host C++ pass, same run."""
    with_pass = next((t for t in tools if t.name == "archaudit cold"), None)
    without = next((t for t in tools if t.name == "archaudit cold, no host pass"), None)
    if with_pass is None or without is None:
        return []
    a, b = _median_of(with_pass), _median_of(without)
    if a is None or b is None:
        return ["", "## Host C++ pass", "", "No good runs of both rows: no comparison."]
    counts = (
        f" Gates with the pass: {with_pass.counts.total}, without: {without.counts.total}."
        if (with_pass.counts and without.counts)
        else ""
    )
    return [
        "",
        "## Host C++ pass",
        "",
        f"Cold median with the host pass (`auditor/cuda/host.py`) {fmt_s(a)} s, without it "
        f"(`ARCHAUDIT_BENCH_NO_HOST_PASS=1`) {fmt_s(b)} s: the pass adds {100 * (a / b - 1):.1f} % "
        f"(bar: < 15 %).{counts}",
    ]


def incremental_case(args: argparse.Namespace, base: list[str], tree: Path, files: list[str], rg_wall) -> list[str]:
    """One Python file of the tree edited, then a re-scan with the cache of the scan before;
    ``--runs`` edits in a row (each re-scan sees one changed file). The tree is a hard-linked
    copy whose edited file is replaced, never written through, and put back at the end; the last
    re-scan's JSON is compared with a cold scan of the same edited tree."""
    root = args.cache_dir / "incremental" / tree_key(tree)
    work = linked(root / "tree", "\n".join(files), ((tree / rel, rel) for rel in files))
    python = [f for f in files if f.endswith(".py")]
    touched = python[len(python) // 2]
    warm_dir = root / "cache"
    tool = archaudit_tool(base, args.jobs, ["--cache-dir", str(warm_dir)], name="archaudit incremental")
    tool.finds = "re-scan after one file changed, with the cache of the scan before"
    prime(tool, work, warm_dir, args)
    target, original = work / touched, (tree / touched).read_bytes()
    identical = "not compared"
    try:
        last = None
        for i in range(args.runs if not tool.unavailable else 0):
            target.unlink()
            target.write_bytes(original + f"\n# archaudit bench: edit {i + 1}\n".encode())
            r = tool.check(run_once(tool.command(work), args.timeout))
            log(f"incremental {i + 1}/{args.runs}: {r.wall:.2f} s, tree {r.tree_rss_kib / 1024:.0f} MiB, rc={r.rc}")
            tool.runs.append(r)
            if tool.good(r):
                tool.counts = tool.count(r)
                last = r
        if last is not None:
            cold = archaudit_tool(base, args.jobs, ["--no-cache"])
            c = cold.check(run_once(cold.command(work), args.timeout))
            identical = "byte-identical" if cold.good(c) and c.stdout == last.stdout else "DIFFERENT"
            log(f"incremental: cold scan of the edited tree {c.wall:.2f} s; JSON {identical}")
    finally:
        target.unlink(missing_ok=True)
        os.link(tree / touched, target)
    return [
        "",
        "## Incremental: one file changed",
        "",
        f"`{touched}` edited (a comment line appended, a new one each run), then `archaudit scan` with "
        f"the cache of the scan before. The last re-scan's JSON against a cold scan of the same edited tree: "
        f"{identical}.",
        "",
        table(TOOL_HEADER, [tool_row(tool, rg_wall)]),
    ]


def environment_case(args: argparse.Namespace, base: list[str], install: bool) -> list[str]:
    """The wheels of :data:`ENVIRONMENT` unpacked whole (binaries included) into one tree, as an
    environment's site-packages: ripgrep, archaudit cold and warm on it."""
    wheels = ensure_wheels(args.wheel_dir.expanduser(), ENVIRONMENT)
    tree = unpack_whole(wheels, args.cache_dir / "trees" / "environment")
    count = sum(len(names) for _, _, names in os.walk(tree))
    size = sum(p.stat().st_size for p in tree.rglob("*") if p.is_file())
    warm_dir = args.cache_dir / "archaudit-cache" / "environment"
    tools = [archaudit_tool(base, args.jobs, ["--no-cache"]), warm_tool(base, args.jobs, warm_dir)]
    if "ripgrep" in args.tools:
        tools.insert(0, ripgrep_tool(args.jobs, install))
    prime(tools[-1], tree, warm_dir, args)
    interleaved(tools, tree, args)
    rg = next((t for t in tools if t.name == "ripgrep"), None)
    rg_wall = _median_of(rg) if rg else None
    return [
        "",
        "## Environment",
        "",
        f"{' + '.join(w.name for w in wheels)}, every member unpacked into one tree as pip installs them: "
        f"{count} files, {size / 2**30:.2f} GiB (archaudit reads the source files and the shared objects).",
        "",
        table(TOOL_HEADER, [tool_row(t, rg_wall) for t in tools]),
    ]


def _command_row(label: str, rs: list[Run]) -> list[str]:
    """Median wall, spread, CPU and memory of one command's good runs (``error`` without one)."""
    if not rs:
        return [label, "error", "–", "–", "–", "–"]
    w = [r.wall for r in rs]
    spread = f"{fmt_s(min(w))}–{fmt_s(max(w))}" if len(w) > 1 else "–"
    return [
        label,
        fmt_s(median(w)),
        spread,
        fmt_s(median([r.cpu for r in rs])),
        f"{max(r.maxrss_kib for r in rs) / 1024:.0f}",
        f"{max(r.tree_rss_kib for r in rs) / 1024:.0f}",
    ]


def _answered(r: Run) -> bool:
    """A run that ended with a result (exit 0, or 1 for findings) and printed it."""
    return r.rc in (0, 1) and bool(r.stdout)


COMMAND_HEADER = ["command", "median wall s", "min–max s", "CPU s", "peak RSS MiB", "tree RSS MiB"]


def explain_case(args: argparse.Namespace, base: list[str]) -> list[str]:
    """A wheel scanned with a fresh cache, then ``archaudit explain`` of its first finding's gate
    from that cache, ``--runs`` times."""
    (wheel,) = ensure_wheels(args.wheel_dir.expanduser(), (EXPLAINED,))
    warm_dir = args.cache_dir / "archaudit-cache" / "explain"
    shutil.rmtree(warm_dir, ignore_errors=True)
    common = ["--jobs", str(args.jobs), "--cache-dir", str(warm_dir)]
    scan = run_once([*base, "scan", str(wheel), "--format", "json", *common], args.timeout)
    log(f"explain: scan {scan.wall:.2f} s, tree {scan.tree_rss_kib / 1024:.0f} MiB, rc={scan.rc}")
    try:
        first = json.loads(scan.stdout)["findings"][0]
    except (ValueError, KeyError, IndexError):
        return ["", "## Explain", "", f"The scan of {wheel.name} gave no finding to explain (rc={scan.rc})."]
    where = f"{wheel}::{first['file']}:{first['line']}"
    runs = [run_once([*base, "explain", where, *common], args.timeout) for _ in range(args.runs)]
    good = [r for r in runs if _answered(r)]
    walls = [r.wall for r in good]
    log(f"explain: {len(good)}/{len(runs)} good runs, median {fmt_s(median(walls))} s")
    return [
        "",
        "## Explain",
        "",
        f"`archaudit scan {wheel.name}` with a fresh cache, then `archaudit explain "
        f"{wheel.name}::{first['file']}:{first['line']}` from it.",
        "",
        table(
            COMMAND_HEADER,
            [
                _command_row("scan (cold, fills the cache)", [scan] if scan.rc in (0, 1) else []),
                _command_row("explain, warm", good),
            ],
        ),
    ]


def diff_case(args: argparse.Namespace, base: list[str]) -> list[str]:
    """``archaudit diff`` of the two wheels of :data:`DIFFED`: ``--runs`` times without a cache,
    then as often with a cache the first of them filled."""
    old, new = ensure_wheels(args.wheel_dir.expanduser(), DIFFED)
    warm_dir = args.cache_dir / "archaudit-cache" / "diff"
    shutil.rmtree(warm_dir, ignore_errors=True)
    command = [*base, "diff", str(old), str(new), "--format", "json", "--jobs", str(args.jobs)]
    cold = [run_once([*command, "--no-cache"], args.timeout) for _ in range(args.runs)]
    primed = run_once([*command, "--cache-dir", str(warm_dir)], args.timeout)
    warm = [run_once([*command, "--cache-dir", str(warm_dir)], args.timeout) for _ in range(args.runs)]
    cold, warm = [r for r in cold if _answered(r)], [r for r in warm if _answered(r)]
    outputs = {r.stdout for r in (*cold, *warm, primed) if _answered(r)}
    same = {0: "no good run", 1: "byte-identical"}.get(len(outputs), "NOT identical")
    log(f"diff: cold {[round(r.wall, 1) for r in cold]} s, warm {[round(r.wall, 1) for r in warm]} s; JSON {same}")
    return [
        "",
        "## Diff",
        "",
        f"`archaudit diff {old.name} {new.name}`: without a cache, then with the cache of one run "
        f"before. The JSON of every good run: {same}.",
        "",
        table(COMMAND_HEADER, [_command_row("diff, no cache", cold), _command_row("diff, warm", warm)]),
    ]


# --------------------------------------------------------------------------- main


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tree", type=Path, help="benchmark this directory instead of the downloaded wheels")
    p.add_argument(
        "--cache-dir",
        type=Path,
        default=default_cache(),
        help="unpacked trees, subsets, tool venv, archaudit's warm cache (default %(default)s; "
        "ARCHAUDIT_BENCH_CACHE overrides)",
    )
    p.add_argument(
        "--wheel-dir",
        type=Path,
        default=default_wheels(),
        help="where the wheels are downloaded (default %(default)s; ARCHAUDIT_WHEEL_CACHE overrides)",
    )
    p.add_argument("--runs", type=int, default=3, help="timed runs per tool (default %(default)s)")
    p.add_argument(
        "--timeout", type=float, default=600, help="seconds per command before it is killed (default %(default)s)"
    )
    p.add_argument("--tools", default=",".join(TOOLS), help="comma list of %(default)s")
    p.add_argument(
        "--jobs",
        type=int,
        default=os.cpu_count() or 1,
        help="worker processes/threads for every tool (default: nproc = %(default)s)",
    )
    p.add_argument("--quick", action="store_true", help=f"a subset of at most {QUICK_FILES} files (smoke test)")
    p.add_argument("--no-scaling", action="store_true", help="skip archaudit on ¼ and ½ of the files and on copies")
    p.add_argument(
        "--no-install", action="store_true", help="never install ripgrep/semgrep/ast-grep; skip what is missing"
    )
    p.add_argument(
        "--archaudit", default=None, metavar="CMD", help="how to run archaudit (default: this Python's `-m auditor`)"
    )
    p.add_argument(
        "--freeze",
        action="store_true",
        help="run archaudit from a copy of auditor/, rules/ and reports/ taken at the start, so that edits to the "
        "working tree during a long run change neither the code measured nor the warm cache's key",
    )
    p.add_argument(
        "--host-pass", action="store_true", help="also time archaudit cold without the host C++ pass (issue #18)"
    )
    p.add_argument("--incremental", action="store_true", help="also time a re-scan after one file of the tree changed")
    p.add_argument(
        "--environment",
        action="store_true",
        help=f"also scan an environment: {', '.join(ENVIRONMENT)} unpacked whole into one tree",
    )
    p.add_argument("--explain", action="store_true", help=f"also time `archaudit explain` warm on {EXPLAINED}")
    p.add_argument("--diff", action="store_true", help=f"also time `archaudit diff` of {' and '.join(DIFFED)}")
    p.add_argument(
        "--output", default=str(BENCH / "results.md"), help="Markdown file to write, '' for none (default %(default)s)"
    )
    args = p.parse_args(argv)
    args.tools = [t.strip() for t in args.tools.split(",") if t.strip()]
    unknown = [t for t in args.tools if t not in TOOLS]
    if unknown:
        p.error(f"unknown tools {unknown}; choose from {', '.join(TOOLS)}")
    if args.runs < 1:
        p.error("--runs must be at least 1")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    cache: Path = args.cache_dir.expanduser()
    cache.mkdir(parents=True, exist_ok=True)
    install = not args.no_install
    load_start = loadavg()
    start_facts = machine_facts()  # the commit measured is the one at the start (what --freeze copies)

    if args.tree:
        tree = args.tree.resolve()
        if not tree.is_dir():
            raise SystemExit(f"bench: --tree {tree} is not a directory")
        origin = f"`{tree}`"
    else:
        wheels = ensure_wheels(args.wheel_dir.expanduser())
        tree = unpack(wheels, cache / "trees" / "flashinfer-0.7.4+sglang-0.5.23")
        origin = " + ".join(w.name for w in wheels) + " (source files only)"
    files = source_files(tree)
    if not files:
        raise SystemExit(f"bench: no source files under {tree}")
    sub_root = cache / "subsets" / tree_key(tree)
    if args.quick:
        step = max(1, -(-len(files) // QUICK_FILES))
        tree = subset(tree, files, step, sub_root / f"quick-every-{step}")
        files = source_files(tree)
        sub_root = cache / "subsets" / tree_key(tree)
        origin += f", --quick: 1 file in {step}"
    n_py = sum(language(f) == "python" for f in files)
    size = sum((tree / f).stat().st_size for f in files)
    log(f"tree {tree}: {len(files)} files ({n_py} Python, {len(files) - n_py} C/CUDA), {size / 2**20:.0f} MiB")
    for f in files:  # warm the page cache once so the first tool is not charged for disk reads
        (tree / f).read_bytes()

    base = archaudit_cmd(args.archaudit)
    if args.freeze and not args.archaudit:
        frozen = freeze(cache / "frozen")
        base = [
            sys.executable,
            "-c",
            f"import sys, runpy; sys.path.insert(0, {str(frozen)!r}); "
            "runpy.run_module('auditor', run_name='__main__', alter_sys=True)",
        ]
        log(f"archaudit runs from a copy taken now: {frozen}")
    tools: list[Tool] = []
    if "ripgrep" in args.tools:
        tools.append(ripgrep_tool(args.jobs, install))
    warm_dir = cache / "archaudit-cache" / tree_key(tree)
    if "archaudit" in args.tools:
        tools.append(archaudit_tool(base, args.jobs, ["--no-cache"]))
        tools.append(warm_tool(base, args.jobs, warm_dir))
        if args.host_pass:
            tools.append(archaudit_tool(base, args.jobs, ["--no-cache"], name="archaudit cold, no host pass"))
            tools[-1].env = {**os.environ, **NO_HOST_PASS}
            tools[-1].finds = "same, without the host C++ pass (issue #18)"
    if "semgrep" in args.tools or "ast-grep" in args.tools:
        bin_dir = tools_venv(cache, install)
        if "semgrep" in args.tools:
            tools.append(semgrep_tool(bin_dir, args.jobs))
        if "ast-grep" in args.tools:
            tools.append(astgrep_tool(bin_dir, args.jobs))

    for t in tools:
        if t.name == "archaudit warm":
            prime(t, tree, warm_dir, args)
    interleaved(tools, tree, args)

    # Scaling: archaudit cold on ¼, ½ and all of the files, and on 1, 2 and 4 copies of the ¼.
    scaling: list[list[str]] = []
    copied: list[list[str]] = []
    cold = next((t for t in tools if t.name == "archaudit cold"), None)
    if cold and not args.no_scaling and not cold.unavailable:
        samples: dict[int, list[Run]] = {}
        for label, step in (("¼", 4), ("½", 2)):
            samples[step] = scale_runs(cold, subset(tree, files, step, sub_root / f"every-{step}"), label, args)
            scaling.append(scale_row(cold, label, samples[step], len(files[::step])))
        scaling.append(scale_row(cold, "all", cold.runs, len(files), cold.counts.total if cold.counts else None))
        quarter = files[::4]
        copied.append(scale_row(cold, "1× ¼", samples[4], len(quarter)))
        for k in (2, 4):
            label = f"{k}× ¼"
            runs = scale_runs(cold, copies(tree, quarter, k, sub_root / f"quarter-x{k}"), label, args)
            copied.append(scale_row(cold, label, runs, k * len(quarter)))

    # Report.
    rg = next((t for t in tools if t.name == "ripgrep"), None)
    rg_good = [r.wall for r in rg.runs if rg.good(r)] if rg else []
    rg_wall = median(rg_good) if rg_good else None
    facts = start_facts
    facts["load average (1/5/15 min)"] = f"{load_start} at start, {loadavg()} at end"
    lines = ["# archaudit benchmark", ""]
    lines += [f"- {k}: {v}" for k, v in facts.items()]
    lines += [
        f"- tree: {origin}: {len(files)} files ({n_py} Python, {len(files) - n_py} C/CUDA/templates), "
        f"{size / 2**20:.0f} MiB",
        f"- runs per tool: {args.runs} (interleaved), jobs: {args.jobs}, timeout: {args.timeout:.0f} s",
        f"- command: `{' '.join(['bench/run.py', *(argv if argv is not None else sys.argv[1:])])}`",
        "",
        "Other work on the machine shows in the load average: with a load above nproc the "
        "times are noisy and only the ratios are roughly comparable.",
        "",
        "## Tools",
        "",
    ]
    lines += [f"- {t.name}: {t.version or '?'}" for t in tools if t.name != "archaudit warm"]
    lines += ["", "## Whole tree", ""]
    lines.append(table(TOOL_HEADER, [tool_row(t, rg_wall) for t in tools]))
    lines += [
        "",
        "Matches are each tool's own unit: ripgrep counts candidate lines, archaudit gates (one per "
        "branch or Python condition, with what it admits), semgrep and ast-grep rule matches "
        "(bench/rules/). CPU s is user + system of the process and the children it waited for; "
        "peak RSS is the largest single process among them (ru_maxrss, read by a launcher between the benchmark and the tool); "
        "tree RSS is the peak of their sum (proportional set size of every process of the command's session, "
        "sampled every 50 ms: memory shared between them is counted once).",
    ]
    if scaling:
        lines += [
            "",
            "## Scaling: archaudit cold",
            "",
            "Every 4th and every 2nd file by sorted path (hard links under the bench cache).",
            "",
        ]
        lines.append(table(SCALE_HEADER, scaling))
    if copied:
        lines += [
            "",
            "## Scaling: archaudit cold on copies",
            "",
            "1, 2 and 4 copies of the ¼ subset side by side (`copy-1/` …): more code of the same density. "
            "The samples above grow differently: with more of the files, more of each call resolves "
            "to a definition that is then evaluated.",
            "",
        ]
        lines.append(table(SCALE_HEADER, copied))
    lines += host_section(tools)
    if args.incremental and cold:
        lines += incremental_case(args, base, tree, files, rg_wall)
    if args.environment:
        lines += environment_case(args, base, install)
    if args.explain:
        lines += explain_case(args, base)
    if args.diff:
        lines += diff_case(args, base)
    text = "\n".join(lines) + "\n"
    sys.stdout.write(text)
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
        log(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
