"""What an author says of the kernels behind a check, read where the check is written again.

A rejection that gives its reason (``raise ValueError("… requires SM90 or SM10X")``) states what
exists for the predicates it tests; a switch elsewhere that enables the same kernels on the same
predicates restates that scope, not a list that forgot 12.x. A floor (``sm90 or newer``) says the
opposite: newer parts are meant to pass. A branch that only sets a value back and says so is the
fallback: a target that does not take it keeps the fast path.
"""

from __future__ import annotations

from auditor import arch, pipeline
from auditor.model import Guards, SourceFile
from auditor.verdicts import turns_away

TARGETS = arch.parse_targets(arch.DEFAULT_TARGETS)

UTILS = """\
import torch


def is_sm90_supported():
    return torch.cuda.get_device_capability()[0] == 9


def is_sm100_supported():
    return torch.cuda.get_device_capability()[0] == 10
"""

FUSION = """\
from pkg.utils import is_sm90_supported, is_sm100_supported


def resolve_backend():
    if not (is_sm90_supported() or is_sm100_supported()):
        raise ValueError("Fused allreduce {reason}.")
    return "trtllm"
"""

CONFIG = """\
from pkg.utils import is_sm90_supported, is_sm100_supported

_is_sm90 = is_sm90_supported()
_is_sm100 = is_sm100_supported()


def auto_enable(tp):
    if (is_sm90_supported() or is_sm100_supported()) and tp > 1:
        return {"fusion": "auto"}
    return {}


def use_fusion(batch):
    return (_is_sm90 or _is_sm100) and batch > 0


def prepare(batch):
    if use_fusion(batch):
        return "fused"
    return "plain"
"""


def audit(files: dict[str, str]):
    sources = [SourceFile(path, text.encode(), "python", "t") for path, text in files.items()]
    gates, findings, _ = pipeline.audit_input(sources, "t", pipeline.Options(jobs=1))
    return gates, findings


def run(files: dict[str, str]):
    return audit(files)[1]


def test_a_rejections_reason_speaks_for_every_test_of_its_predicates():
    reason = "requires SM90 or SM10X GPUs"
    findings = run({"pkg/utils.py": UTILS, "pkg/fusion.py": FUSION.format(reason=reason), "pkg/config.py": CONFIG})
    assert findings and {f.rule for f in findings} == {"ARCH013"}
    assert all(f"Fused allreduce {reason}." in f.message for f in findings)
    sites = {(f.file, f.line) for f in findings} | {site for f in findings for site in f.also}
    assert {("pkg/config.py", 8), ("pkg/config.py", 14), ("pkg/config.py", 18)} <= sites


def test_without_a_reason_the_switch_is_an_allow_list_that_omits_12x():
    findings = run({"pkg/utils.py": UTILS, "pkg/config.py": CONFIG})
    assert "ARCH002" in {f.rule for f in findings if f.file == "pkg/config.py"}


def test_a_floor_is_no_statement_of_scope():
    findings = run(
        {
            "pkg/utils.py": UTILS,
            "pkg/fusion.py": FUSION.format(reason="requires SM90 or newer"),
            "pkg/config.py": CONFIG,
        }
    )
    assert "ARCH013" not in {f.rule for f in findings}
    assert "ARCH002" in {f.rule for f in findings}


CHOOSE = """\
import logging

import torch

logger = logging.getLogger(__name__)


def choose(head, override=None, hd256_kernel=True):
    major = torch.cuda.get_device_capability()[0]
    version = 2
    if major in (9, 10):
        version = 4
    if override is not None:
        version = override
    if version == 4 and major in (9, 10) and head == 256:
        if not hd256_kernel:
            version = 2
        elif head > 512:
            logger.warning("the hd256 kernel does not support this, defaulting to version 2")
            version = 2
    return version
"""


def test_a_branch_that_only_sets_a_value_back_and_says_so_is_the_fallback():
    gates, findings = audit({"pkg/choose.py": CHOOSE})
    (check,) = [g for g in gates if g.line == 15]
    assert check.guards == Guards.REJECT  # what matters is what it lets through: 12.x keeps version 4
    assert not any(turns_away(check, t) for t in TARGETS) and [f for f in findings if f.line == 15] == []
    # the same branch doing work of its own is the code it admits
    working = CHOOSE.replace(
        "            version = 2\n    return", "            version = 2\n        run_hd256()\n    return"
    )
    (check,) = [g for g in audit({"pkg/choose.py": working})[0] if g.line == 15]
    assert check.guards == Guards.TAKE and all(turns_away(check, t) for t in TARGETS)


SM120_ONLY = """\
import torch


def require_sm120():
    major, minor = torch.cuda.get_device_capability()
    if (major, minor) != (12, 0):
        raise NotImplementedError("The Sage kernel requires compute capability 12.0")
"""


def test_a_reason_that_names_only_the_admitted_minor_says_nothing_of_its_sibling():
    # written for the part the author had: 12.1 beside it is the minor-version trap itself
    assert [f.rule for f in run({"pkg/sage.py": SM120_ONLY})] == ["ARCH003"]
    # a reason naming other generations still states what exists
    other = SM120_ONLY.replace("!= (12, 0)", "not in ((9, 0), (10, 0))").replace("12.0", "9.0 or 10.0")
    assert [f.rule for f in run({"pkg/sage.py": other})] == ["ARCH013"]


SIBLING = """\
import torch


def check(device):
    arch = torch.cuda.get_device_capability(device)
    if arch not in ((8, 0), (9, 0), (12, 0)):
        raise NotImplementedError("this backend requires SM80, SM90 or SM120")
    return True
"""


def test_a_reason_that_names_the_turned_away_parts_sibling_states_no_scope_for_it():
    """``requires SM80, SM90 or SM120`` with 12.1 turned away: a list restated, written for the
    12.x part the author had; it says nothing of 12.1, so the minor-version trap stays one."""
    (f,) = run({"pkg/backend.py": SIBLING})
    assert f.rule == "ARCH003"
    (g,) = run({"pkg/backend.py": SIBLING.replace(", (12, 0)", "").replace(" or SM120", "")})
    assert g.rule == "ARCH013"  # a list of other generations with its reason: scope stated


SPARSE = """\
import torch


def is_sparse_supported():
    major, _ = torch.cuda.get_device_capability()
    if major not in (9, 10):
        return False, "Sparse MLA is only supported on {names} devices."
    return True, None
"""


def test_a_reason_that_names_the_admitted_parts_by_their_generation_states_scope():
    """``Hopper and Blackwell DC`` are 9.0 and 10.x: the reason says what exists."""
    findings = run({"pkg/sparse.py": SPARSE.format(names="Hopper and Blackwell DC")})
    assert [f.rule for f in findings] == ["ARCH013"]
    assert "only supported on Hopper and Blackwell DC devices" in findings[0].message


def test_a_reason_that_names_no_part_states_no_scope():
    findings = run({"pkg/sparse.py": SPARSE.format(names="some")})
    assert [f.rule for f in findings] == ["ARCH002"]


ELSE_REJECTS = """\
import torch


def is_sm12x_supported():
    return torch.cuda.get_device_capability()[0] == 12


def is_sm100a_supported():
    return torch.cuda.get_device_capability()[0] == 10


def group_gemm(a):
    if is_sm12x_supported():
        return gemm_sm120(a)
    elif is_sm100a_supported():
        return gemm_sm100(a)
    else:
        raise ValueError("Unsupported device for group GEMM")
"""


def test_the_else_of_a_chain_with_a_branch_for_the_target_reports_nothing():
    """12.x takes its own branch; the ``else`` rejects the rest, the names keep their promises."""
    assert run({"pkg/gemm.py": ELSE_REJECTS}) == []


CUTLASS = """\
import torch


def is_sm100a_supported():
    return torch.cuda.get_device_capability()[0] == 10


def is_sm110a_supported():
    return torch.cuda.get_device_capability()[0] == 11


def get_fmha_module():
    if is_sm100a_supported() or is_sm110a_supported():
        return build_sm100_fmha()
    else:
        raise ValueError(
            "CUTLASS FMHA requires SM100a or SM110a. "
            "SM12x lacks tcgen05 MMA required by this kernel."
        )


def pick_backend(head_dim_qk, head_dim_vo):
    if (is_sm100a_supported() or is_sm110a_supported()) and head_dim_qk == 128 and head_dim_vo == 128:
        return "cutlass"
    return "fa2"
"""


def test_a_shape_pinned_choice_of_kernels_whose_rejection_states_their_scope_is_that_scope():
    """The shape-pinned choice of the same kernels is no speed choice for 12.x: they cannot run
    there, as the rejection of the same predicates says."""
    (f,) = run({"pkg/prefill.py": CUTLASS})
    assert f.rule == "ARCH013" and ("pkg/prefill.py", 23) in f.also
    assert "CUTLASS FMHA requires SM100a or SM110a." in f.message


def test_a_reason_that_names_the_turned_away_major_as_lacking_still_states_scope():
    """Naming 12.x as what the kernels lack is about the target, unlike naming an admitted
    sibling (``requires SM80 or SM120`` with 12.1 out), which is the trap itself."""
    reason = "requires SM90 or SM100 (SM12x lacks the tcgen05 MMA it needs)"
    findings = run({"pkg/utils.py": UTILS, "pkg/fusion.py": FUSION.format(reason=reason), "pkg/config.py": CONFIG})
    assert findings and {f.rule for f in findings} == {"ARCH013"}


WRITTEN_AGAINST = """\
import torch


class SparseResolver:
    supported_capabilities = {(9, 0), (10, 0), (10, 3)}

    @classmethod
    def resolve(cls):
        capability = torch.cuda.get_device_capability()
        # The vendored Triton tile-64 kernel is written against Hopper and
        # Blackwell block-sparse geometry; older architectures fail closed.
        if capability not in cls.supported_capabilities:
            raise ValueError("sparse attention needs compute capability 9.0, 10.0 or 10.3")
        return "sparse"
"""


def test_a_comment_that_says_what_the_kernel_is_written_against_states_scope():
    findings = run({"pkg/resolver.py": WRITTEN_AGAINST})
    assert [f.rule for f in findings] == ["ARCH013"]


FLAG_BESIDE = """\
import torch


def is_sm90a_supported(device):
    return torch.cuda.get_device_capability(device)[0] == 9


def is_sm12x_supported(device):
    major, minor = torch.cuda.get_device_capability(device)
    if major != 12:
        return False
    return torch.version.cuda >= ("12.9" if minor >= 1 else "12.8")


def proxy_score(q):
    sm90 = is_sm90a_supported(q.device)
    if not (sm90 or is_sm12x_supported(q.device)):
        raise RuntimeError("proxy_score needs a Hopper or a 12.x part")
    return q
"""


def test_a_flag_beside_a_predicate_promises_what_its_value_names():
    """9.0 is admitted through ``sm90``, not by ``is_sm12x_supported``: no over-permissive name."""
    assert "ARCH004" not in {f.rule for f in run({"pkg/proxy.py": FLAG_BESIDE})}


DISPATCH = """\
import torch


def flash_attn_fwd(q):
    compute_capability = torch.cuda.get_device_capability()[0]
    if compute_capability == 9:
        fa_fwd = ForwardSm90(q)
    elif compute_capability in [10, 11]:
        fa_fwd = ForwardSm100(q)
    else:
        raise ValueError(f"Unsupported compute capability: {compute_capability}. Supported: 9.x, 10.x, 11.x")
    return fa_fwd
"""


def test_the_else_of_a_dispatch_that_lists_what_is_supported_states_scope():
    """Each branch builds one architecture's kernel class; the ``else`` says which exist."""
    findings = run({"pkg/fa.py": DISPATCH})
    assert [(f.rule, f.line) for f in findings] == [("ARCH013", 10)]
    assert "Supported: 9.x, 10.x, 11.x" in findings[0].message
