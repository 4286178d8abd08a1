"""Scans report what the shipped binaries can run on, and join it with the source gates.

A tree with a Python gate admitting 12.x next to a shared object built for ``sm_120a`` only:
the binary loads on 12.0 (native) and on nothing else, so the gate's 12.1 is a promise the
build does not keep (ARCH008). Unreadable ``.so`` files are listed as errors and the rest is
still scanned. The nvcc builds and the real wheel are slow tests.
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from auditor import arch, cli, pipeline, sources
from auditor.facts.binaries import package_verdicts
from auditor.model import SourceFile
from auditor.render import json as render_json
from auditor.render import text as render_text
from tests.facts.test_binaries import KERNEL, NVCC, WHEEL, WHEEL_CACHE

GATE = """import torch
from pkg import _k


def use_kernel(x):
    if torch.cuda.get_device_capability()[0] >= 9:
        return _k.run(x)
    return x
"""


def audit(tmp_path: Path):
    return pipeline.audit([str(tmp_path)], pipeline.Options(targets=arch.parse_targets("12.0,12.1"), jobs=1))


def host_only_so() -> Path | None:
    """Some shared object of this interpreter's standard library (CPU code only)."""
    found = sorted(glob.glob(os.path.join(sysconfig.get_config_var("DESTSHARED") or "", "*.so")))
    return Path(found[0]) if found else None


def test_shared_objects_are_binaries_not_source():
    for name in ("pkg/_k.so", "pkg/libfoo.so.1", "lib/libcudart.so.12.4", "A.SO"):
        assert sources.wanted(name) and sources.language_of(name) == "binary", name
    for name in ("pkg/so.py", "pkg/x.sol", "pkg/x.so.py", "pkg/x.sox"):
        assert sources.language_of(name) != "binary", name
    assert (
        sources.max_bytes("pkg/_k.so") == sources.MAX_BINARY_BYTES > sources.MAX_FILE_BYTES == sources.max_bytes("a.py")
    )


def test_unreadable_shared_objects_are_errors_and_the_rest_is_scanned(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "ops.py").write_text(GATE)
    (pkg / "_fake.so").write_bytes(b"this is not an ELF file\n")
    host = Path(os.path.realpath(sys.executable)).read_bytes()
    if not host.startswith(b"\x7fELF"):
        pytest.skip("the interpreter is not an ELF file here")
    (pkg / "_cut.so").write_bytes(host[:4096])
    cpu = host_only_so()
    if cpu is not None:
        (pkg / "_cpu.so").write_bytes(cpu.read_bytes())
    result = audit(tmp_path)
    reasons = {e.file: e.reason for e in result.errors}
    assert reasons["pkg/_fake.so"] == "not a readable shared object: not an ELF file"
    assert reasons["pkg/_cut.so"].startswith("not a readable shared object: ")
    assert [g.file for g in result.gates] == ["pkg/ops.py"]
    if cpu is not None:
        (record,) = result.binaries
        assert record.path == "pkg/_cpu.so" and record.entries == () and record.verdicts == ()
        # a CPU-only binary does not count for the package: no binary finding
        assert not [f for f in result.findings if f.rule in ("ARCH008", "ARCH009")]
        doc = render_json.document(result)
        assert doc["binaries"] == [
            {"path": "pkg/_cpu.so", "package": "pkg", "input": str(tmp_path), "entries": [], "verdicts": {}}
        ]
        assert "pkg: 1 binaries, no GPU code" in render_text.render(result)
    # extractors never see binaries: nothing but the Python gate, and no decode errors
    assert not [e for e in result.errors if e.file.endswith(".so") and "shared object" not in e.reason]


def test_rule_examples_stand_in_for_binaries():
    """A rule example's ``binaries`` become listings the rules see, for the code that reaches them."""
    files = [
        SourceFile("pkg/ops.py", GATE.encode(), "python", "example"),
        SourceFile("pkg/_k.so", b'["sm_120a"]', "binary-listing", "example"),
    ]
    options = pipeline.Options(targets=arch.parse_targets("12.0,12.1"), jobs=1)
    found = pipeline.audit_input_binaries(files, "example", options)
    assert not found.errors and len(found.gates) == 1
    assert package_verdicts(found.binaries) == {"pkg": {"12.0": "native", "12.1": "none"}}
    assert found.gates[0].extensions == ("pkg/_k.so",)
    (hit,) = [f for f in found.findings if f.rule == "ARCH008"]
    assert "pkg/_k.so: 12.0: native, 12.1: none" in hit.message
    assert "12.1" in hit.message and "12.0" not in hit.message.split("in, but")[0]


@pytest.fixture(scope="module")
def sm120a_tree(tmp_path_factory) -> Path:
    if NVCC is None:
        pytest.skip("nvcc is not installed")
    root = tmp_path_factory.mktemp("tree")
    pkg = root / "pkg"
    pkg.mkdir()
    (pkg / "ops.py").write_text(GATE)
    (root / "k.cu").write_text(KERNEL)
    proc = subprocess.run(
        [
            NVCC,
            "-shared",
            "-Xcompiler",
            "-fPIC",
            "-gencode",
            "arch=compute_120a,code=sm_120a",
            str(root / "k.cu"),
            "-o",
            str(pkg / "_k.so"),
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (root / "k.cu").unlink()
    return root


@pytest.mark.slow
def test_sm120a_binary_joins_the_gate(sm120a_tree, capsys):
    result = audit(sm120a_tree)
    doc = render_json.document(result)
    (b,) = doc["binaries"]
    assert b["path"] == "pkg/_k.so" and b["package"] == "pkg"
    assert [(e["kind"], e["target"]) for e in b["entries"]] == [("sass", "sm_120a")]
    assert b["verdicts"] == {"12.0": "native", "12.1": "none"}
    (gate,) = result.gates
    hits = [f for f in result.findings if f.rule == "ARCH008"]
    assert [(f.gate, f.file, f.line) for f in hits] == [(gate.id, "pkg/ops.py", gate.line)]
    assert "lets 12.1 in" in hits[0].message
    assert not [f for f in result.findings if f.rule == "ARCH009"]
    text = render_text.render(result)
    assert "GPU code in binaries" in text and "pkg: 12.0:native  12.1:none" in text
    assert "12.1 cannot load these, built for 12.0 only: pkg/_k.so (sm_120a)" in text
    # the same through the command line's JSON
    capsys.readouterr()
    cli.main(["scan", str(sm120a_tree), "--format", "json"])
    out = json.loads(capsys.readouterr().out)
    assert out["binaries"][0]["verdicts"] == {"12.0": "native", "12.1": "none"}
    assert any(f["rule"] == "ARCH008" for f in out["findings"])


@pytest.mark.slow
def test_real_sgl_kernel_wheel(capsys):
    name = WHEEL.split("==")[0].replace("-", "_") + "-" + WHEEL.split("==")[1] + "-"
    found = sorted(WHEEL_CACHE.glob(f"{name}*.whl"))
    if not found:
        pytest.skip(f"{WHEEL} is not cached in {WHEEL_CACHE} (tests/test_binaries.py fetches it)")
    result = pipeline.audit([str(found[0])], pipeline.Options(targets=arch.parse_targets("12.0,12.1"), jobs=1))
    doc = render_json.document(result)
    flash = [b for b in doc["binaries"] if "flash_ops" in b["path"]]
    assert flash, [b["path"] for b in doc["binaries"]]
    assert any(e["target"] == "sm_90a" for b in flash for e in b["entries"])
    assert all(b["verdicts"] == {"12.0": "none", "12.1": "none"} for b in flash)
    with capsys.disabled():
        print()
        for b in doc["binaries"]:
            print(f"{b['path']}: {sorted(e['target'] for e in b['entries'])} -> {b['verdicts']}")
        print(render_text.binaries_section(result))
        print(sorted({(f.rule, f.file, f.line) for f in result.findings if f.rule in ("ARCH008", "ARCH009")}))


@pytest.mark.slow
def test_vllm_binary_rules_need_a_reached_extension():
    """vllm 0.33.0 ships one extension with sm_120 SASS; before evidence was per gate, 298 of its
    findings were ARCH009 on every excluding gate. Now each binary finding names what it reaches."""
    from tests.conftest import wheel

    result = pipeline.audit([str(wheel("vllm==0.33.0"))], pipeline.Options(jobs=1))
    gates = {g.id: g for g in result.gates}
    found = [f for f in result.findings if f.rule in ("ARCH008", "ARCH009")]
    assert len(found) < 30
    assert all(gates[f.gate].extensions and gates[f.gate].extensions[0] in f.message for f in found)
