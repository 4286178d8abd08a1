"""A test that keeps 12.1 from code the package builds for sm_120a only agrees with the build.

GB10 (12.1) cannot load an ``sm_120a`` image. Where the package pins the build of the code
behind a 12.0-only test to that target (a compile target in the file, a JIT spec with
``sm120a_nvcc_flags`` behind the loader it calls), the test is right as the package stands:
listed (ARCH015, info) as a build to add, not as a minor-version trap to widen.
"""

from __future__ import annotations

from auditor import pipeline
from auditor.model import SourceFile

CORE = """\
sm120a_nvcc_flags = ["-gencode=arch=compute_120a,code=sm_120a"]
sm120f_nvcc_flags = ["-gencode=arch=compute_120f,code=sm_120f"]


def gen_jit_spec(name, sources, extra_cuda_cflags=()):
    return (name, sources, extra_cuda_cflags)
"""

LOADER = """\
from pkg.jit.core import gen_jit_spec, sm120a_nvcc_flags


def gen_sage_module():
    return gen_jit_spec("sage", ["sage.cu"], extra_cuda_cflags=sm120a_nvcc_flags)


def load_sage_module():
    return gen_sage_module().build_and_load()
"""

SAGE = """\
import torch

from pkg.jit.sage import load_sage_module


def sage_attention(q):
    if tuple(torch.cuda.get_device_capability()) != (12, 0):
        raise NotImplementedError("the Sage kernel is for this GPU")
    return load_sage_module().run(q)
"""


def run(files: dict[str, str]):
    sources = [SourceFile(path, text.encode(), "python", "t") for path, text in files.items()]
    return pipeline.audit_input(sources, "t", pipeline.Options(jobs=1))[1]


def test_a_loader_whose_spec_pins_sm120a_makes_the_test_agree_with_the_build():
    findings = run({"pkg/jit/core.py": CORE, "pkg/jit/sage.py": LOADER, "pkg/sage.py": SAGE})
    (f,) = [f for f in findings if f.file == "pkg/sage.py"]
    assert (f.rule, f.severity) == ("ARCH015", "info") and "builds for sm_120a only" in f.message


def test_a_family_build_leaves_the_minor_version_trap():
    family = LOADER.replace("sm120a_nvcc_flags", "sm120f_nvcc_flags")
    findings = run({"pkg/jit/core.py": CORE, "pkg/jit/sage.py": family, "pkg/sage.py": SAGE})
    assert [f.rule for f in findings if f.file == "pkg/sage.py"] == ["ARCH003"]


def test_a_compile_target_named_in_the_file_pins_it_too():
    pinned = SAGE.replace("from pkg.jit.sage import load_sage_module\n", 'CODE_TARGET = "sm_120a"\n').replace(
        "load_sage_module().run(q)", "compile_for(q, CODE_TARGET)"
    )
    assert [f.rule for f in run({"pkg/sage.py": pinned})] == ["ARCH015"]
    assert [f.rule for f in run({"pkg/sage.py": pinned.replace("sm_120a", "sm_120f")})] == ["ARCH003"]


CHECK = """\
import torch


def require_sm120(device):
    major, minor = torch.cuda.get_device_capability(device)
    if (major, minor) != (12, 0):
        raise NotImplementedError("the quantised projection is for this GPU")
"""

OP = """\
from pkg.check import require_sm120
from pkg.jit.sage import gen_sage_module


def _validate(x):
    require_sm120(x.device)
    return x.shape[0]


def projection(x):
    rows = _validate(x)
    return gen_sage_module().build_and_load().run(x, rows)
"""

PLAIN_OP = """\
from pkg.check import require_sm120


def projection_ref(x):
    require_sm120(x.device)
    return x @ x
"""


def test_a_check_helper_takes_the_build_of_what_its_callers_run_next():
    files = {"pkg/jit/core.py": CORE, "pkg/jit/sage.py": LOADER, "pkg/check.py": CHECK, "pkg/op.py": OP}
    (f,) = [f for f in run(files) if f.file == "pkg/check.py"]
    assert (f.rule, f.severity) == ("ARCH015", "info") and "builds for sm_120a only" in f.message


def test_a_loader_a_package_re_exports_is_the_one_it_imports():
    """``from pkg.jit import gen_sage_module`` where ``pkg/jit/__init__.py`` has ``from .sage
    import gen_sage_module``: the package hands on the loader of ``pkg/jit/sage.py``."""
    via_package = OP.replace("from pkg.jit.sage import", "from pkg.jit import")
    files = {"pkg/jit/core.py": CORE, "pkg/jit/sage.py": LOADER, "pkg/check.py": CHECK, "pkg/op.py": via_package}
    files["pkg/jit/__init__.py"] = "from .sage import gen_sage_module\n"
    (f,) = [f for f in run(files) if f.file == "pkg/check.py"]
    assert (f.rule, f.severity) == ("ARCH015", "info")
    del files["pkg/jit/__init__.py"]  # nothing hands it on: the build behind the check is unknown
    assert [f.rule for f in run(files) if f.file == "pkg/check.py"] == ["ARCH003"]


GUARDED_CALLER = """\
import torch

from pkg.check import require_sm120


def explain(x):
    why = None
    if torch.cuda.get_device_capability(x.device) == (12, 0):
        why = require_sm120(x.device)
    return why
"""


def test_a_caller_only_the_admitted_part_reaches_is_no_path_for_the_others():
    """The second caller calls the check only on 12.0: on 12.1 the check is reached from the
    loader's path alone, and that path's build is sm_120a."""
    files = {"pkg/jit/core.py": CORE, "pkg/jit/sage.py": LOADER, "pkg/check.py": CHECK, "pkg/op.py": OP}
    files["pkg/explain.py"] = GUARDED_CALLER
    assert [f.rule for f in run(files) if f.file == "pkg/check.py"] == ["ARCH015"]
    files["pkg/explain.py"] = GUARDED_CALLER.replace("== (12, 0)", ">= (9, 0)")  # 12.1 calls it there too
    assert [f.rule for f in run(files) if f.file == "pkg/check.py"] == ["ARCH003"]


def test_a_check_every_caller_makes_for_the_admitted_part_alone_keeps_their_build():
    """Every call of the check sits in a function declared for 12.0 alone
    (``@supported_compute_capability([120])``): no path reaches it on 12.1 but through them, and
    what they run is the sm_120a build."""
    declared = OP.replace(
        "from pkg.jit.sage import gen_sage_module\n",
        "from pkg.jit.sage import gen_sage_module\nfrom pkg.utils import supported_compute_capability\n",
    ).replace("def _validate(x):", "@supported_compute_capability([120])\ndef _validate(x):")
    utils = "def supported_compute_capability(ccs):\n    return lambda f: f\n"
    files = {"pkg/jit/core.py": CORE, "pkg/jit/sage.py": LOADER, "pkg/check.py": CHECK, "pkg/op.py": declared}
    files["pkg/utils.py"] = utils
    assert [f.rule for f in run(files) if f.file == "pkg/check.py"] == ["ARCH015"]


def test_one_caller_without_a_pinned_build_leaves_the_trap():
    files = {"pkg/jit/core.py": CORE, "pkg/jit/sage.py": LOADER, "pkg/check.py": CHECK, "pkg/op.py": OP}
    files["pkg/ref.py"] = PLAIN_OP
    assert [f.rule for f in run(files) if f.file == "pkg/check.py"] == ["ARCH003"]


AVAILABILITY = """\
import torch


def arch_supported(major, minor):
    known = {"sm_100a": (10, 0), "sm_103a": (10, 3), "sm_120a": (12, 0), "sm_120f": (12, 0)}
    capability = tuple(torch.cuda.get_device_capability())
    return capability == (major, minor) and capability in known.values()
"""

GUARDED = """\
import torch

from pkg.availability import arch_supported

CODE_TARGET = "sm_120a"


def run_kernel(x):
    if tuple(torch.cuda.get_device_capability()) != (12, 0):
        raise NotImplementedError("this kernel is for this GPU")
    if not arch_supported(12, 0):
        raise RuntimeError("the DSL cannot target this GPU")
    return compile_for(x, CODE_TARGET)
"""


def test_a_predicate_tested_after_the_check_is_not_what_the_code_builds():
    files = {"pkg/availability.py": AVAILABILITY, "pkg/kernel.py": GUARDED}
    assert [f.rule for f in run(files) if f.file == "pkg/kernel.py" and f.line == 9] == ["ARCH015"]


PREDICATE = """\
import torch

from pkg.availability import arch_supported

CODE_TARGET = "sm_120a"


def native_target_available():
    if tuple(torch.cuda.get_device_capability()) != (12, 0):
        return False
    return arch_supported(12, 0)
"""


def test_a_predicate_answering_false_guards_what_its_callers_run_not_what_it_asks():
    files = {"pkg/availability.py": AVAILABILITY, "pkg/native.py": PREDICATE}
    by_line = {f.line: f.rule for f in run(files) if f.file == "pkg/native.py"}
    assert by_line[9] == "ARCH015" and set(by_line.values()) == {"ARCH015"}


ATTN_SPEC = """\
from pkg.jit.core import gen_jit_spec, sm120a_nvcc_flags

_SOURCES = ("attn/attn_binding.cu",)


def gen_attn_module():
    return gen_jit_spec("attn", [f"csrc/{s}" for s in _SOURCES], extra_cuda_cflags=sm120a_nvcc_flags)
"""

BINDING = """\
#include <cuda_runtime.h>

void attn_fwd(int device) {
  cudaDeviceProp props;
  cudaGetDeviceProperties(&props, device);
  TVM_FFI_ICHECK(props.major == 12 && props.minor == 0) << "the attention kernel requires this GPU";
}
"""


def test_a_host_check_in_a_source_its_jit_spec_pins_to_sm120a_agrees_with_the_build():
    files = {"pkg/jit/core.py": CORE, "pkg/jit/attn.py": ATTN_SPEC, "pkg/data/csrc/attn/attn_binding.cu": BINDING}
    sources = [SourceFile(p, t.encode(), "cuda" if p.endswith(".cu") else "python", "t") for p, t in files.items()]
    findings = pipeline.audit_input(sources, "t", pipeline.Options(jobs=1))[1]
    assert [f.rule for f in findings if f.file.endswith(".cu")] == ["ARCH015"]
    family = files | {"pkg/jit/attn.py": ATTN_SPEC.replace("sm120a_nvcc_flags", "sm120f_nvcc_flags")}
    sources = [SourceFile(p, t.encode(), "cuda" if p.endswith(".cu") else "python", "t") for p, t in family.items()]
    findings = pipeline.audit_input(sources, "t", pipeline.Options(jobs=1))[1]
    assert [f.rule for f in findings if f.file.endswith(".cu")] == ["ARCH003"]


RUNTIME = """\
import torch

CODE_TARGET = "sm_120a"


def kernel_available(device):
    return tuple(torch.cuda.get_device_capability(device)) == (12, 0)
"""

FACADE = """\
from pkg.kernels.runtime import kernel_available


def can_implement(q):
    if not q.is_cuda:
        return False
    return kernel_available(q.device)
"""


def test_a_predicate_defined_beside_its_build_target_answers_with_that_build():
    """``return kernel_available(dev)`` in a facade: the predicate lives in the module that pins
    the kernels' target (``CODE_TARGET = "sm_120a"``), and the facade's answer agrees with it."""
    findings = run({"pkg/kernels/runtime.py": RUNTIME, "pkg/kernels/facade.py": FACADE})
    (f,) = findings  # the facade's answer folds into its predicate's finding
    assert f.rule == "ARCH015" and f.also == (("pkg/kernels/facade.py", 7),)
    elsewhere = run(
        {"pkg/kernels/runtime.py": RUNTIME.replace('"sm_120a"', '"sm_120f"'), "pkg/kernels/facade.py": FACADE}
    )
    assert {f.rule for f in elsewhere} == {"ARCH003"}


CONSUMER = """\
def compile_kernel(kernel, *args):
    return cached_compile(kernel, *args, compile_options=(GPUArch("sm_120a"),))
"""

PLAN = """\
import torch


def build_plan(lengths, device):
    props = torch.cuda.get_device_properties(device)
    if (props.major, props.minor) != (12, 0):
        raise ValueError("this backend requires SM120")
    return [(n + 31) // 32 for n in lengths]
"""


def test_a_backend_package_whose_compiles_all_pin_sm120a_speaks_for_its_other_modules():
    """``experimental/gdn_sm120/_api.py`` checks for 12.0; the backend's compiles, in another
    module of its folder, all name ``sm_120a``. At the package's top level no folder speaks."""
    findings = run({"pkg/experimental/gdn/consumer.py": CONSUMER, "pkg/experimental/gdn/_api.py": PLAN})
    assert [(f.rule, f.file) for f in findings] == [("ARCH015", "pkg/experimental/gdn/_api.py")]
    top = run({"pkg/consumer.py": CONSUMER, "pkg/_api.py": PLAN})
    assert [f.rule for f in top] == ["ARCH003"]


def _stages(torch_only: str) -> str:
    """A module of ten entry points behind one validation helper: nine run the sm_120a build,
    the tenth runs ``torch_only``."""
    head = (
        "import torch\n\nfrom pkg.jit.sage import load_sage_module\n\n\n"
        "def _require_sm120(t):\n"
        "    if torch.cuda.get_device_capability(t.device) != (12, 0):\n"
        '        raise RuntimeError("these stages are for this GPU")\n\n\n'
        "def _validate(name, t):\n    _require_sm120(t)\n    return t.shape\n\n\n"
        "def _minmax_impl(t):\n    out = torch.empty(2, device=t.device)\n    out[0] = t.amin()\n    return out\n"
    )
    stages = "".join(
        f"\n\ndef stage{i}(t):\n    _validate('t', t)\n    return load_sage_module().run(t)\n" for i in range(9)
    )
    return head + stages + f"\n\ndef boundary_minmax(t):\n    _validate('t', t)\n    return {torch_only}\n"


def test_a_torch_only_step_of_the_checks_own_module_says_nothing_of_the_build():
    """Ten callers in one module are its API, not a shared utility's users; the one that runs
    only torch operations is a step beside the kernel steps, and the build of the others
    decides (flashinfer's low-precision Ulysses stages behind ``_require_sm89_or_sm120``)."""
    files = {"pkg/jit/core.py": CORE, "pkg/jit/sage.py": LOADER, "pkg/stages.py": _stages("_minmax_impl(t)")}
    assert [f.rule for f in run(files) if f.file == "pkg/stages.py"] == ["ARCH015"]
    # A launch is a portable kernel, not nothing: 12.1 is kept from code it could run.
    launched = _stages("_minmax_kernel[(1,)](t)").replace("import torch\n", "import torch\nimport triton\n", 1)
    launched += "\n\n@triton.jit\ndef _minmax_kernel(t):\n    pass\n"
    files["pkg/stages.py"] = launched
    assert [f.rule for f in run(files) if f.file == "pkg/stages.py"] == ["ARCH003"]


def test_a_comment_naming_a_family_target_builds_nothing():
    commented = LOADER.replace(
        "def gen_sage_module():\n",
        "def gen_sage_module():\n    # the default context would normalize 12.0 to compute_120f; pin 120a\n",
    )
    findings = run({"pkg/jit/core.py": CORE, "pkg/jit/sage.py": commented, "pkg/sage.py": SAGE})
    assert [f.rule for f in findings if f.file == "pkg/sage.py"] == ["ARCH015"]


PROGRAMS = """\
class Program:
    def __init__(self, name, sources, targets):
        self.name, self.sources, self.targets = name, sources, targets


CAPABILITY_TARGET = {(9, 0): "sm_90a", (10, 0): "sm_100a", (12, 0): "sm_120a", (12, 1): "sm_121a"}
GEMM_BF16 = Program("gemm_bf16", ("gemm.cu",), targets=("sm_120a",))
GEMM_FP8 = Program("gemm_fp8", ("gemm.cu",), targets=("sm_120a",))
"""

RUNNER = """\
import torch

from pkg.jit.programs import CAPABILITY_TARGET, GEMM_BF16, GEMM_FP8

_GEMMS = {"bf16": GEMM_BF16, "fp8": GEMM_FP8}


def _target(device):
    return CAPABILITY_TARGET.get(torch.cuda.get_device_capability(device))


def _require(device):
    if torch.cuda.get_device_capability(device) != (12, 0):
        raise NotImplementedError("built for 12.0 only")


def gemm(a, b, mode):
    _require(a.device)
    program = _GEMMS[mode]
    return program.entry(_target(a.device))(a, b)
"""


def test_a_table_of_programs_declared_with_their_targets_is_their_build():
    """``_GEMMS[mode]`` names programs declared ``targets=("sm_120a",)`` in another module; the
    map from capabilities to targets beside them lists every target and builds nothing."""
    files = {"pkg/jit/programs.py": PROGRAMS, "pkg/gemm.py": RUNNER}
    assert [f.rule for f in run(files) if f.file == "pkg/gemm.py"] == ["ARCH015"]
    files["pkg/jit/programs.py"] = PROGRAMS.replace('targets=("sm_120a",)', 'targets=("sm_120f",)')
    assert [f.rule for f in run(files) if f.file == "pkg/gemm.py"] == ["ARCH003"]


DECLARED_ONLY = """\
from pkg.check import require_sm120
from pkg.utils import supported_compute_capability


def _common(x):
    require_sm120(x.device)
    return x.shape[0]


@supported_compute_capability([120])
def entry_a(x):
    return _common(x)


@supported_compute_capability([120])
def entry_b(x):
    return _common(x) * 2
"""


def test_a_helper_whose_every_caller_is_declared_for_the_admitted_part_vetoes_nothing():
    """``_common`` runs no build after the check, but only functions declared for 12.0 call it:
    12.1 never comes to the check that way, and the loader's sm_120a build decides."""
    files = {"pkg/jit/core.py": CORE, "pkg/jit/sage.py": LOADER, "pkg/check.py": CHECK, "pkg/op.py": OP}
    files["pkg/utils.py"] = "def supported_compute_capability(ccs):\n    return lambda f: f\n"
    files["pkg/other.py"] = DECLARED_ONLY
    assert [f.rule for f in run(files) if f.file == "pkg/check.py"] == ["ARCH015"]
    files["pkg/other.py"] = DECLARED_ONLY.replace("@supported_compute_capability([120])\ndef entry_b", "def entry_b")
    assert [f.rule for f in run(files) if f.file == "pkg/check.py"] == ["ARCH003"]


CATALOGUED = """\
import torch

_ARCHES = {(12, 0): "sm_120a"}


def _catalog():
    return {"arches": ["sm_120a"]}


def device_facts(index):
    capability = torch.cuda.get_device_capability(index)
    arch = _ARCHES.get(capability)
    catalogued = sorted(_catalog()["arches"])
    if arch is None or arch not in catalogued:
        raise RuntimeError(f"no exported programs for compute capability {capability}")
    return arch
"""


def test_a_rejection_certain_on_one_part_only_is_judged_against_the_build():
    """``arch is None or arch not in catalogued`` may reject anywhere the catalog is unknown, and
    surely rejects 12.1, for which the table of programs holds no entry: it lets 12.0 alone
    through, and the programs are sm_120a."""
    findings = run({"pkg/programs.py": CATALOGUED})
    assert [(f.rule, f.line) for f in findings] == [("ARCH015", 14)]
    family = run({"pkg/programs.py": CATALOGUED.replace("sm_120a", "sm_120f")})
    assert [(f.rule, f.line) for f in family] == [("ARCH003", 14)]
