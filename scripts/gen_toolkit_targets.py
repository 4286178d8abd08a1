"""Generate ``auditor/data/toolkits.json``: per CUDA toolkit, its compile targets and the ``__CUDA_ARCH*`` macros.

Why: a gate such as ``__CUDA_ARCH__ >= 900 && __CUDA_ARCH__ < 1200`` only means something against the targets a
given toolkit can build and the macros it defines for each; those change between releases (sm_101 became sm_110 in
13.0, sm_107 appeared in 13.5, ``f`` targets arrived in 12.9). So the table is read from the compilers themselves.

Where the facts come from, per toolkit (PyPI wheels, cached under ``$ARCHAUDIT_TOOLKIT_CACHE`` or
``~/.cache/archaudit-toolkits``):

* 13.x (``nvidia-cuda-nvcc`` ships nvcc): the targets are each ``sm_XX`` of ``nvcc --list-gpu-code`` plus its ``a`` and
  ``f`` forms where ``nvcc --dryrun -arch=...`` accepts them; the macros are the ``-D__CUDA_ARCH*`` options that dry run
  passes to the device pass.
* 12.x (``nvidia-cuda-nvcc-cu12`` ships ptxas but no nvcc): the targets are the ``sm_*`` values ``ptxas --help`` lists
  for ``--gpu-name``; the macros follow nvcc's naming scheme (``derive_macros``). Each run checks that scheme against
  every target of every 13.x toolkit and fails if it predicts a single macro wrongly. ``__CUDA_ARCH_SPECIFIC__`` and
  ``__CUDA_ARCH_FAMILY_SPECIFIC__`` are derived only where the toolkit's own ``crt/host_defines.h`` reads them (12.9
  does, 12.8 does not), because nvcc and its headers were released together.

Usage::

    python scripts/gen_toolkit_targets.py            # write auditor/data/toolkits.json
    python scripts/gen_toolkit_targets.py --check    # exit 1 if the shipped table differs from what the tools say
    python scripts/gen_toolkit_targets.py --toolkits 13.0.88 --check   # only these toolkits

The output is deterministic: sorted toolkits, targets in architecture order, sorted macros, no timestamps.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from auditor.arch import version_key

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "auditor" / "data" / "toolkits.json"

# The newest patch release of each minor version from 12.8 on (``pip index versions nvidia-cuda-nvcc[-cu12]``).
TOOLKITS = {
    "12.8.93": "nvidia-cuda-nvcc-cu12==12.8.93",
    "12.9.86": "nvidia-cuda-nvcc-cu12==12.9.86",
    "13.0.88": "nvidia-cuda-nvcc==13.0.88",
    "13.1.115": "nvidia-cuda-nvcc==13.1.115",
    "13.2.86": "nvidia-cuda-nvcc==13.2.86",
    "13.3.73": "nvidia-cuda-nvcc==13.3.73",
    "13.4.92": "nvidia-cuda-nvcc==13.4.92",
    "13.5.37": "nvidia-cuda-nvcc==13.5.37",
}
ABOUT = (
    "Per CUDA toolkit (PyPI nvidia-cuda-nvcc wheels): the sm_* compile targets and the __CUDA_ARCH* macros nvcc "
    "defines in the device pass for each (the host pass defines none). macro_source 'nvcc --dryrun' means read from "
    "nvcc; 'derived' means the toolkit ships no nvcc, so targets are ptxas --gpu-name values and macros follow nvcc's "
    "scheme, which the generator checks against every 13.x target. Regenerate with scripts/gen_toolkit_targets.py."
)
TARGET_RE = re.compile(r"^sm_(\d+)([af]?)$")


def cache_dir() -> Path:
    return Path(os.environ.get("ARCHAUDIT_TOOLKIT_CACHE", Path.home() / ".cache" / "archaudit-toolkits"))


def ensure_toolkit(version: str) -> Path:
    """Download (once) and unpack the wheel of ``version``; return the directory that holds ``bin/ptxas``."""
    root = cache_dir() / version
    if not (root / ".complete").exists():
        wheels = cache_dir() / "wheels"
        wheels.mkdir(parents=True, exist_ok=True)
        found = list(wheels.glob(f"nvidia_cuda_nvcc*-{version}-*.whl"))
        if not found:
            cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:"]
            cmd += ["--platform", "manylinux2014_x86_64", "-d", str(wheels), TOOLKITS[version]]
            subprocess.run(cmd, check=True)
            found = list(wheels.glob(f"nvidia_cuda_nvcc*-{version}-*.whl"))
        with zipfile.ZipFile(found[0]) as wheel:
            for info in wheel.infolist():
                path = Path(wheel.extract(info, root))
                mode = info.external_attr >> 16
                if mode:
                    path.chmod(mode & 0o777)
        (root / ".complete").touch()
    (bindir,) = {p.parent for p in root.glob("nvidia/*/bin/ptxas")}
    return bindir.parent


def arch_key(target: str) -> tuple[int, str]:
    """Sort targets as nvcc lists them: by number, then plain, ``a``, ``f``."""
    m = TARGET_RE.match(target)
    assert m, target
    return int(m.group(1)), m.group(2)


def run(cmd: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=120)


def ptxas_targets(tk: Path) -> list[str]:
    """The ``sm_*`` values ``ptxas --help`` allows for ``--gpu-name`` (its default value line excluded)."""
    text = run([str(tk / "bin" / "ptxas"), "--help"]).stdout
    section = re.search(r"--gpu-name.*?Allowed values for this option:(.*?)(?:Default value|\n--)", text, re.S)
    assert section, "ptxas --help lists no --gpu-name values"
    names = set(re.findall(r"'(sm_\d+[af]?)'", section.group(1)))
    return sorted(names, key=arch_key)


def ptx_isa(tk: Path) -> str:
    """The newest PTX ISA version ptxas accepts, from its own 'Unsupported .version' message."""
    with tempfile.TemporaryDirectory() as tmp:
        probe = Path(tmp) / "v.ptx"
        probe.write_text(".version 99.9\n.target sm_90\n.address_size 64\n")
        out = run([str(tk / "bin" / "ptxas"), "--gpu-name", "sm_90", str(probe), "-o", os.devnull])
    m = re.search(r"current version is '(\d+\.\d+)'", out.stdout + out.stderr)
    assert m, out.stderr
    return m.group(1)


def tool_version(binary: Path) -> str:
    m = re.search(r", V(\d+\.\d+\.\d+)", run([str(binary), "--version"]).stdout)
    assert m, binary
    return m.group(1)


def dryrun_macros(nvcc: Path, target: str, workdir: Path) -> dict[str, str] | None:
    """The ``-D__CUDA_ARCH*`` options nvcc passes for ``-arch=target``, or None if nvcc rejects the target."""
    out = run([str(nvcc), "--dryrun", f"-arch={target}", "-c", "a.cu"], cwd=workdir)
    if out.returncode:
        return None
    found = re.findall(r"-D(__CUDA_ARCH[A-Z_0-9]*)(?:=(\d+))?", out.stdout + out.stderr)
    return dict(sorted((name, value or "1") for name, value in found))


def derive_macros(target: str, specific_macros: bool) -> dict[str, str]:
    """nvcc's scheme: every target sets ``__CUDA_ARCH__``/``_LIST__`` to XX0; ``a`` adds FEAT_SMXX_ALL, SPECIFIC and
    FAMILY_SPECIFIC; ``f`` adds FAMILY_SPECIFIC (the latter two only in toolkits that know them)."""
    number, suffix = TARGET_RE.match(target).groups()
    arch = f"{number}0"
    macros = {"__CUDA_ARCH__": arch, "__CUDA_ARCH_LIST__": arch}
    if suffix == "a":
        macros[f"__CUDA_ARCH_FEAT_SM{number}_ALL"] = "1"
    if suffix and specific_macros:
        macros["__CUDA_ARCH_FAMILY_SPECIFIC__"] = arch
        if suffix == "a":
            macros["__CUDA_ARCH_SPECIFIC__"] = arch
    return dict(sorted(macros.items()))


def headers_know_specific_macros(tk: Path) -> bool:
    """Whether the toolkit's own headers read ``__CUDA_ARCH_SPECIFIC__``/``_FAMILY_SPECIFIC__`` (12.9 does, 12.8 not):
    nvcc and its headers ship together, so headers that never test a macro suggest an nvcc that never defines it."""
    text = "".join(p.read_text(errors="replace") for p in (tk / "include").rglob("*.h*"))
    return "__CUDA_ARCH_FAMILY_SPECIFIC__" in text and "__CUDA_ARCH_SPECIFIC__" in text


def nvcc_table(tk: Path) -> dict[str, dict[str, str]]:
    nvcc = tk / "bin" / "nvcc"
    bases = re.findall(r"sm_\d+", run([str(nvcc), "--list-gpu-code"]).stdout)
    table = {}
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "a.cu").write_text("__global__ void k() {}\n")
        for target in (base + suffix for base in bases for suffix in ("", "a", "f")):
            macros = dryrun_macros(nvcc, target, Path(tmp))
            if macros is not None:
                table[target] = macros
    return table


def toolkit_entry(version: str) -> dict:
    """One toolkit's row: read from nvcc where the wheel has it, else derived from ptxas (module docstring)."""
    tk = ensure_toolkit(version)
    assert tool_version(tk / "bin" / "ptxas") == version, f"{version}: the wheel's ptxas reports another version"
    ptxas_list = ptxas_targets(tk)
    if (tk / "bin" / "nvcc").exists():
        targets = nvcc_table(tk)
        source = "nvcc --dryrun"
        wrong = {t: m for t, m in targets.items() if derive_macros(t, specific_macros=True) != m}
        assert not wrong, f"{version}: nvcc's macros differ from derive_macros(): {wrong}"
        assert sorted(targets, key=arch_key) == ptxas_list, f"{version}: nvcc and ptxas list different targets"
    else:
        specific = headers_know_specific_macros(tk)
        targets = {t: derive_macros(t, specific) for t in ptxas_list}
        source = "derived"
    return {
        "package": TOOLKITS[version],
        "ptx_isa": ptx_isa(tk),
        "macro_source": source,
        "targets": {t: targets[t] for t in sorted(targets, key=arch_key)},
    }


def generate(versions: list[str]) -> dict:
    return {"_about": ABOUT, "toolkits": {v: toolkit_entry(v) for v in sorted(versions, key=version_key)}}


def dump(table: dict) -> str:
    return json.dumps(table, indent=1) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="compare with the shipped table instead of writing it")
    parser.add_argument("--toolkits", nargs="+", choices=sorted(TOOLKITS, key=version_key), metavar="VERSION")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    versions = args.toolkits or list(TOOLKITS)
    table = generate(versions)
    if not args.check:
        args.out.write_text(dump(table))
        print(f"wrote {args.out} ({len(table['toolkits'])} toolkits)")
        return 0
    shipped = json.loads(args.out.read_text())
    differ = [v for v in versions if shipped["toolkits"].get(v) != table["toolkits"][v]]
    if shipped["_about"] != table["_about"]:
        differ.append("_about")
    if args.toolkits is None and set(shipped["toolkits"]) != set(table["toolkits"]):
        differ.append("toolkit list")
    for name in differ:
        print(f"{args.out.name}: {name} differs from what the toolkit says; regenerate", file=sys.stderr)
    print(f"checked {len(versions)} toolkits: {'DIFFERS' if differ else 'up to date'}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
