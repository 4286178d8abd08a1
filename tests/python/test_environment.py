"""Models win over sources: a package's gates are the same scanned alone or with its
dependencies' source beside it (fixtures/python/environment: ``app`` asks torch for the
capability, ``torch`` is a stand-in whose queries read a C extension, ``engine`` keeps its
running platform in a lazily bound ``current_platform``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from auditor.model import Gate, SourceFile
from auditor.python.extract import extract

BASE = Path(__file__).resolve().parents[2] / "fixtures" / "python" / "environment"
ALL = ("7.0", "7.5", "8.0", "8.6", "8.7", "8.9", "9.0", "10.0", "10.1", "10.3", "10.7", "11.0", "12.0", "12.1")


def scan(*packages: str) -> dict[tuple[str, int], Gate]:
    files = [
        SourceFile(p.relative_to(BASE).as_posix(), p.read_bytes(), "python")
        for p in sorted(BASE.rglob("*.py"))
        if p.relative_to(BASE).parts[0] in packages
    ]
    gates, errors = extract(files)
    assert not errors
    return {(g.file, g.line): g for g in gates}


def test_a_modelled_query_is_not_replaced_by_its_source_beside_it():
    """The two-file shape of the issue: torch's own get_device_capability (it reads a C
    extension) beside the caller used to take both gates away."""
    alone, beside = scan("app"), scan("app", "torch")
    for gates in (alone, beside):
        assert gates[("app/sampling.py", 9)].admits == ("10.3",)
        assert gates[("app/sampling.py", 13)].admits == ("10.3",)  # its caller
        assert gates[("app/sampling.py", 21)].admits == ALL[6:]  # torch.version.hip stays None


@pytest.mark.parametrize("packages", [("app",), ("engine",)])
def test_gates_and_verdicts_are_the_same_with_the_dependency_beside(packages):
    """The metamorphic property on the fixture: no gate lost, no admitted set changed."""
    alone, beside = scan(*packages), scan(*packages, "torch")
    assert set(alone) <= set(beside)
    assert {k: g.admits for k, g in alone.items()} == {k: beside[k].admits for k in alone}


def test_a_cuda_version_keyed_table_is_no_arch_list():
    """``# TORCH_CUDA_ARCH_LIST of each release`` above a dict keyed by ``"12.6"``: the comment
    names the variable, the string is a CUDA version."""
    assert not [g for g in scan("torch").values() if g.file.startswith("torch/")]


def test_the_running_platform_is_the_cuda_platform():
    gates = scan("engine")
    # the interface's `if current is None: return False` is unreachable on a CUDA device
    assert gates[("engine/kernels.py", 7)].admits == tuple(c for c in ALL if not c.startswith("10."))
    # CudaPlatform's overrides win over the interface's `return False`
    assert gates[("engine/kernels.py", 13)].admits == ALL[5:]
    assert gates[("engine/kernels.py", 19)].admits == ALL[6:]
    assert gates[("engine/kernels.py", 33)].admits == ALL[6:]


def test_another_backends_capability_is_not_the_devices():
    """``torch.musa.get_device_capability()`` inside ``if current_platform.is_musa():`` is a
    MUSA capability on a branch a CUDA device never takes: no gate, so no dead NVIDIA code."""
    for gates in (scan("engine"), scan("engine", "torch")):
        assert ("engine/kernels.py", 28) not in gates


def test_a_platform_object_from_outside_the_input_is_a_cuda_platform():
    """``current_platform`` imported from a package that is not scanned: the model's family test,
    its probes, and no gate in the ROCm branch."""
    src = """
from vllm.platforms import current_platform

def pick():
    if not current_platform.is_device_capability_family(100):
        return 1
    if current_platform.is_rocm():
        if current_platform.has_device_capability(94):
            return 2
    if current_platform.is_cuda() and current_platform.is_device_capability((12, 1)):
        return 3
"""
    gates, _ = extract([SourceFile("m.py", src.encode(), "python")])
    assert {g.line: g.admits for g in gates} == {
        5: tuple(c for c in ALL if not c.startswith("10.")),
        10: ("12.1",),
    }


def test_a_branch_on_another_backends_build_holds_no_gate():
    """``torch.version.hip`` is None on the CUDA builds audited: the ROCm arm's gfx check is
    not dead NVIDIA code, and the CUDA arm is still a gate."""
    src = """
import torch

def pick():
    if torch.version.hip:
        if torch.cuda.get_device_capability() >= (9, 4):
            return 1
    elif torch.cuda.get_device_capability() >= (9, 0):
        return 2
"""
    gates, _ = extract([SourceFile("m.py", src.encode(), "python")])
    assert {g.line: g.admits for g in gates} == {8: ALL[6:]}
