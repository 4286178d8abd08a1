"""Python gates on real releases (wheels read straight from the zip, cached on disk)."""

from __future__ import annotations

import re
import subprocess
import sys
import zipfile
from functools import cache
from pathlib import Path

import pytest

from auditor.model import SourceFile
from auditor.python.extract import extract

CACHE = Path.home() / ".cache" / "archaudit-wheels"
pytestmark = pytest.mark.slow


def wheel(name: str, version: str) -> Path:
    stem = name.replace("-", "_")
    found = sorted(CACHE.glob(f"{stem}-{version}-*.whl"))
    if not found:
        CACHE.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "-d", str(CACHE), f"{name}=={version}"],
            check=True,
            capture_output=True,
        )
        found = sorted(CACHE.glob(f"{stem}-{version}-*.whl"))
    return found[0]


@cache
def scan(name: str, version: str):
    with zipfile.ZipFile(wheel(name, version)) as z:
        files = [SourceFile(m, z.read(m), "python") for m in z.namelist() if m.endswith(".py")]
    return extract(files)


def at(gates, file: str, expression: str):
    return [g for g in gates if g.file == file and g.expression == expression]


def test_sglang_059_allreduce_fusion_gates_exclude_sm120():
    gates, _ = scan("sglang", "0.5.9")
    comm = at(gates, "sglang/srt/layers/communicator.py", "(_is_sm90_supported or _is_sm100_supported)")
    server = at(gates, "sglang/srt/server_args.py", "(is_sm90_supported() or is_sm100_supported())")
    assert comm and server
    for g in comm + server:
        assert g.resolved_by == "definition"
        assert "12.0" not in g.admits and "12.1" not in g.admits
        assert {"9.0", "10.0"} <= set(g.admits)
    assert server[0].unknowns and server[0].line == 1691


def test_sglang_059_blackwell_admits_sm12x():
    gates, _ = scan("sglang", "0.5.9")
    uses = [g for g in gates if g.expression == "is_blackwell_supported()"]
    assert uses
    for g in uses:
        assert {"12.0", "12.1"} <= set(g.admits) and g.resolved_by == "definition"


def test_flashinfer_060_comm_majors_exclude_sm12x():
    gates, _ = scan("flashinfer-python", "0.6.0")
    comm = [
        g
        for g in gates
        if g.file == "flashinfer/jit/comm.py"
        and g.kind == "major-list"
        and "supported_major_versions=[9, 10]" in g.expression
    ]
    assert comm
    for g in comm:
        assert "12.0" not in g.admits and "12.1" not in g.admits and "9.0" in g.admits


def test_flashinfer_060_sm120a_admits_120_not_121():
    gates, _ = scan("flashinfer-python", "0.6.0")
    definition = [g for g in gates if g.file == "flashinfer/utils.py" and g.context == "is_sm120a_supported"]
    assert [g.admits for g in definition] == [("12.0",)]
    uses = [g for g in gates if "is_sm120a_supported(" in g.expression and g.kind == "predicate-call"]
    assert uses and all(g.resolved_by == "definition" for g in uses)
    pair = [
        g
        for g in uses
        if re.fullmatch(r"is_sm120a_supported\(a\.device\) or is_sm121a_supported\(a\.device\)", g.expression)
    ]
    assert pair and all(g.admits == ("12.0", "12.1") for g in pair)
    guard = [g for g in uses if g.expression.startswith("not is_sm120a_supported(")]
    assert guard and all(g.guards == "reject" for g in guard)
    sm100a = [g for g in gates if re.fullmatch(r"is_sm100a_supported\([\w.]*\)", g.expression)]
    assert sm100a and all("10.3" in g.admits and g.name_implies == ("10.0",) for g in sm100a)


def test_flashinfer_074_sm12x_bail_out_lets_12x_through():
    """``if major != 12: return False`` opens flashinfer 0.7.4's ``is_sm12x_supported``: it
    turns every other major away and lets 12.x through to the toolkit check; read as written,
    it was a high ARCH001 saying the opposite."""
    from auditor import arch, verdicts

    with zipfile.ZipFile(wheel("flashinfer-python", "0.7.4")) as z:
        files = [SourceFile("flashinfer/utils.py", z.read("flashinfer/utils.py"), "python")]
    gates, _ = extract(files)
    [g] = [g for g in gates if g.context == "is_sm12x_supported" and g.expression == "major != 12"]
    assert g.guards == "reject" and "12.0" not in g.admits and "12.1" not in g.admits
    assert verdicts.verdicts(g, arch.parse_targets(arch.DEFAULT_TARGETS)) == {"12.0": "admits", "12.1": "admits"}


@cache
def vllm_backends():
    """vllm 0.33.0's platforms and every file that defines or calls ``supports_compute_capability``."""
    with zipfile.ZipFile(wheel("vllm", "0.33.0")) as z:
        sources = {m: z.read(m) for m in z.namelist() if m.endswith(".py")}
    files = [
        SourceFile(m, data, "python")
        for m, data in sources.items()
        if m.startswith("vllm/platforms/") or b"supports_compute_capability" in data
    ]
    return files, extract(files)


def test_vllm_0330_capability_parameter_tests_are_gates_at_their_definitions():
    # #17 item 2: `supports_compute_capability(cls, capability)` tests its parameter; every such
    # method of a module-level class that reads `capability.major` is a gate where it is defined
    import ast

    files, (gates, _) = vllm_backends()
    methods = []
    for f in files:
        tree = ast.parse(f.data)
        for cls in tree.body:
            for fn in getattr(cls, "body", []) if isinstance(cls, ast.ClassDef) else []:
                if isinstance(fn, ast.FunctionDef) and fn.name == "supports_compute_capability":
                    if "capability.major" in ast.get_source_segment(f.data.decode(), fn):
                        methods.append((f.path, fn.lineno, fn.end_lineno))
    assert len(methods) >= 20
    missed = [m for m in methods if not any(g.file == m[0] and m[1] <= g.line <= m[2] for g in gates)]
    assert missed == []
    (g,) = at(gates, "vllm/v1/attention/backends/mla/flashmla.py", "capability.major in [9, 10]")
    assert g.admits == ("9.0", "10.0", "10.1", "10.3", "10.7")
    (g,) = at(gates, "vllm/platforms/cuda.py", "device_capability.major == 12")
    assert g.admits == ("12.0", "12.1")
