"""Binary evidence: which shipped extension a Python gate's guarded code reaches."""

from __future__ import annotations

import textwrap

import pytest

from auditor import arch, pipeline
from auditor.facts.binaries import Lines, module_of, with_extensions
from auditor.model import Binary, EmbeddedCode, Loadability, SourceFile

OPS = """
import torch


def fused(x):
    return torch.ops._C.fused(x)


def flash(x):
    return torch.ops._flash_C.fwd(x)
"""

LAYER = """
import torch
import cutlass.cute as cute
from pkg import _custom_ops as ops
from pkg import _moe


class Layer:
    def forward(self, x):
        major, minor = torch.cuda.get_device_capability()
        if major in (9, 10):
            return ops.fused(x)
        return x

    def jit(self, x, kernel):
        major, minor = torch.cuda.get_device_capability()
        if major in (9, 10):
            return cute.compile(kernel, x)(x)
        return x

    def checked(self, x):
        major, minor = torch.cuda.get_device_capability()
        if major not in (9, 10):
            raise RuntimeError("needs Hopper or Blackwell")
        return _moe.topk(x)

    def helper(self, x):
        if torch.cuda.get_device_capability() >= (9, 0):
            return self._run(x)
        return x

    def _run(self, x):
        return torch.ops._flash_C.fwd(x)
"""


def binary(path: str, *targets: str) -> Binary:
    entries = tuple(EmbeddedCode("sass", t, False) for t in targets)
    return Binary(path, "pkg", "t", entries, (("12.0", Loadability.NATIVE), ("12.1", Loadability.NATIVE)))


def test_each_gate_reaches_its_own_extension():
    files = [
        SourceFile("pkg/_custom_ops.py", textwrap.dedent(OPS).encode(), "python", "t"),
        SourceFile("pkg/layer.py", textwrap.dedent(LAYER).encode(), "python", "t"),
        # the namespaces are C strings in the binaries that register them
        SourceFile("pkg/_C_stable.abi3.so", b"\x7fELF...\0_C\0...", "binary", "t"),
        SourceFile("pkg/_flash_C.abi3.so", b"\x7fELF...\0_flash_C\0\0_C\0", "binary", "t"),
        SourceFile("pkg/_moe.abi3.so", b"\x7fELF...", "binary", "t"),
    ]
    options = pipeline.Options(targets=arch.parse_targets("12.0,12.1"), jobs=1)
    gates = pipeline.audit_input_binaries(files[:2], "t", options).gates
    records = [binary(f.path, "sm_90a", "sm_120") for f in files[2:]]
    found = {g.context.rpartition(".")[2]: g.extensions for g in with_extensions(gates, files, records)}
    assert found["forward"] == ("pkg/_C_stable.abi3.so",)  # ops.fused -> torch.ops._C (not _flash_C's copy of "_C")
    assert found["jit"] == ()  # CuTe-DSL: compiled at run time, no shipped binary
    assert found["checked"] == ("pkg/_moe.abi3.so",)  # a rejection guards the rest of its function
    assert found["helper"] == ("pkg/_flash_C.abi3.so",)  # through a method of the same file


def test_module_names():
    assert module_of("vllm/_C_stable_libtorch.abi3.so") == "vllm._C_stable_libtorch"
    assert module_of("pkg/sub/__init__.py") == "pkg.sub"
    assert module_of("pkg/ops.py") == "pkg.ops"


LOADER = """
import glob
import importlib.util
import torch


def load_ops():
    major, minor = torch.cuda.get_device_capability()
    if major == 9:
        ops_subdir = "sm90"
    else:
        ops_subdir = "sm100"
    path = glob.glob(f"{ops_subdir}/common_ops.*")[0]
    return importlib.util.spec_from_file_location("common_ops", path)
"""


def test_a_loader_given_a_binary_s_directory_reaches_it():
    files = [
        SourceFile("pkg/load_utils.py", textwrap.dedent(LOADER).encode(), "python", "t"),
        SourceFile("pkg/sm90/common_ops.abi3.so", b"\x7fELF", "binary", "t"),
        SourceFile("pkg/sm100/common_ops.abi3.so", b"\x7fELF", "binary", "t"),
    ]
    options = pipeline.Options(targets=arch.parse_targets("12.0,12.1"), jobs=1)
    gates = pipeline.audit_input_binaries(files[:1], "t", options).gates
    records = [binary(f.path, "sm_90a", "sm_120") for f in files[1:]]
    (gate,) = [g for g in with_extensions(gates, files, records) if g.expression == "major == 9"]
    assert gate.extensions == ("pkg/sm90/common_ops.abi3.so",)


KERNELS = """
import torch


def attention(q):
    major, minor = torch.cuda.get_device_capability()
    if major not in (8, 9):
        raise NotImplementedError("FA3 needs sm80 or sm90")
    return torch.ops.pkg_kernel.fwd.default(q)


def rmsnorm(x):
    if torch.cuda.get_device_capability()[0] >= 9:
        return torch.ops.pkg_kernel.rmsnorm(x)
    return x
"""


def test_an_operator_is_registered_where_its_schema_is():
    """A namespace whose name no binary holds as a C string (the registration macro spells it
    inside other text) is found through the operator's schema, ``fwd(Tensor q, …``."""
    files = [
        SourceFile("pkg/attention.py", textwrap.dedent(KERNELS).encode(), "python", "t"),
        SourceFile("pkg/flash_ops.abi3.so", b"\x7fELF...\0fwd(Tensor q) -> Tensor\0", "binary", "t"),
        SourceFile(
            "pkg/common_ops.abi3.so", b"\x7fELF...\0rmsnorm(Tensor x) -> Tensor\0\0fwd_combine(\0", "binary", "t"
        ),
    ]
    options = pipeline.Options(targets=arch.parse_targets("12.0,12.1"), jobs=1)
    gates = pipeline.audit_input_binaries(files[:1], "t", options).gates
    records = [binary(f.path, "sm_90a") for f in files[1:]]
    found = {g.context: g.extensions for g in with_extensions(gates, files, records)}
    assert found["attention"] == ("pkg/flash_ops.abi3.so",)
    assert found["rmsnorm"] == ("pkg/common_ops.abi3.so",)


FA3 = """
import torch


def _supported():
    major, _ = torch.cuda.get_device_capability()
    return major in (8, 9)


def _load():
    return _load_from_kernel_package()


def _load_from_kernel_package():
    from sgl_kernel.flash_attn import flash_attn_with_kvcache

    return flash_attn_with_kvcache


def attention(q):
    if not _supported():
        raise NotImplementedError("FA3 needs sm80 or sm90")
    return _load()(q)


def norm(x):
    if torch.cuda.get_device_capability()[0] >= 9:
        return torch.ops.sgl_kernel.rmsnorm(x)
    return x
"""

FA3_MODULE = """
import torch


def flash_attn_with_kvcache(q):
    return torch.ops.sgl_kernel.fwd.default(q)
"""


def test_a_loader_behind_a_loader_reaches_another_package_s_binary():
    """An environment holds both packages: the call goes through two loaders of the file to the
    other package's module, and on to the binary that registers its operator."""
    files = [
        SourceFile("app/attention.py", textwrap.dedent(FA3).encode(), "python", "t"),
        SourceFile("sgl_kernel/flash_attn.py", textwrap.dedent(FA3_MODULE).encode(), "python", "t"),
        SourceFile("sgl_kernel/flash_ops.abi3.so", b"\x7fELF...\0sgl_kernel\0\0fwd(Tensor q)\0", "binary", "t"),
    ]
    options = pipeline.Options(targets=arch.parse_targets("12.0,12.1"), jobs=1)
    gates = pipeline.audit_input_binaries(files[:2], "t", options).gates
    records = [binary(files[2].path, "sm_80", "sm_90a")]
    (gate,) = [g for g in with_extensions(gates, files, records) if g.context == "attention"]
    assert gate.extensions == ("sgl_kernel/flash_ops.abi3.so",)
    assert gate.prebuilt_elsewhere == ()


def test_prebuilt_kernels_of_a_package_the_input_lacks_are_named():
    """Scanned alone, the same code names the package whose build would be the evidence, by
    import and by ``torch.ops`` namespace; a package the input holds is never elsewhere."""
    files = [SourceFile("app/attention.py", textwrap.dedent(FA3).encode(), "python", "t")]
    options = pipeline.Options(targets=arch.parse_targets("12.0,12.1"), jobs=1)
    found = {g.context: g for g in with_extensions(pipeline.audit_input_binaries(files, "t", options).gates, files, [])}
    assert found["attention"].prebuilt_elsewhere == ("sgl_kernel",)
    assert found["norm"].prebuilt_elsewhere == ("sgl_kernel",)
    held = [*files, SourceFile("sgl_kernel/__init__.py", b"", "python", "t")]
    found = {g.context: g for g in with_extensions(pipeline.audit_input_binaries(held, "t", options).gates, held, [])}
    assert found["attention"].prebuilt_elsewhere == ()


def test_a_stated_scope_answers_before_the_other_package_s_build():
    """Prebuilt elsewhere, the rejection's message says what exists: the author's statement is
    the answer (ARCH013), not "scan the other package" (ARCH011)."""
    stated = FA3.replace(
        '"FA3 needs sm80 or sm90"', '"FA3 is only supported on devices with compute capability 8.x or 9.x"'
    )
    options = pipeline.Options(targets=arch.parse_targets("12.0,12.1"), jobs=1)
    for text, rule in ((FA3, "ARCH011"), (stated, "ARCH013")):
        files = [SourceFile("app/attention.py", textwrap.dedent(text).encode(), "python", "t")]
        findings = pipeline.audit_input(files, "t", options)[1]
        assert [f.rule for f in findings if f.line == 21] == [rule]


SPARGE = """
import torch


class SpargeResolver:
    supported_capabilities = {(8, 0), (8, 6), (8, 9), (9, 0)}

    @classmethod
    def resolve(cls):
        if torch.cuda.get_device_capability() not in cls.supported_capabilities:
            raise ValueError("SpargeAttention needs 8.0 to 9.0")
        from spas_sage_attn import spas_sage2_attn_meansim_topk_cuda  # noqa: F401

        return "sparge"
"""


def test_a_resolver_that_imports_a_source_built_attention_package_depends_on_its_build():
    """SpargeAttn compiles its kernels when it is installed, for the architectures its setup
    lists: that build, which the input does not hold, decides (ARCH011), not the list here."""
    files = [SourceFile("app/resolver.py", textwrap.dedent(SPARGE).encode(), "python", "t")]
    options = pipeline.Options(targets=arch.parse_targets("12.0,12.1"), jobs=1)
    _, findings, _ = pipeline.audit_input(files, "t", options)
    assert [f.rule for f in findings] == ["ARCH011"]
    assert "SpargeAttn" in findings[0].message


@pytest.mark.parametrize("text", ["", "a", "a\n", "x = 1\n\ny = 2", "\n\n", "é\nü\n"])
def test_a_files_lines_are_the_lines_split_gives(text):
    """The evidence keeps every Python file it reads; its lines are offsets into the text, not a
    string each, and read as ``split`` gives them."""
    lines, want = Lines(text), text.split("\n")
    assert len(lines) == len(want) and list(lines) == want
    assert lines[-1] == want[-1] and lines[1:] == want[1:] and lines[0:1] == want[0:1]
    with pytest.raises(IndexError):
        lines[len(want)]
