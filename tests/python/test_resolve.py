"""Name resolution: globals joined over their bindings, imports across modules, attributes of
modules, classes and instances, and the resolutions a value remembers."""

from __future__ import annotations

from auditor.model import GateKind, ResolvedBy
from auditor.python.values import ClassRef, ExtRef, ModRef, SelfRef, capability
from tests.python.program import interp, program, value


def test_a_global_is_the_join_of_its_bindings():
    prog = program(**{"m.py": "try:\n    import x\n    OK = True\nexcept ImportError:\n    OK = False\n"})
    assert value(interp(prog), prog.by_path["m.py"], "OK").elems == {True, False}


def test_imports_resolve_inside_the_input():
    prog = program(
        **{
            "pkg/__init__.py": "from .core import *\n",
            "pkg/core.py": "LIMIT = 90\n",
            "pkg/use.py": "from pkg import LIMIT\nimport pkg.core as core\nfrom . import core as c2\nimport torch\n",
        }
    )
    it = interp(prog)
    use = prog.by_path["pkg/use.py"]
    assert value(it, use, "LIMIT").only() == 90  # through a star import
    assert value(it, use, "core").only() == ModRef("pkg.core")
    assert value(it, use, "c2").only() == ModRef("pkg.core")
    assert value(it, use, "torch").only() == ExtRef("torch")
    assert value(it, use, "undefined").only() == ExtRef("undefined", free=True)


def test_attributes_of_modules_classes_and_constants():
    prog = program(
        **{
            "a.py": "class Base:\n    SM = 90\nclass C(Base):\n    pass\n",
            "b.py": "import a\nimport torch\nX = a.C.SM\nY = a.C\nHIP = torch.version.hip\n",
        }
    )
    it = interp(prog)
    b = prog.by_path["b.py"]
    assert value(it, b, "X").only() == 90  # inherited
    assert value(it, b, "Y").only() == ClassRef("a", "C")
    assert value(it, b, "HIP").only() is None  # a constant of the name table


def test_a_flag_read_through_a_global_remembers_its_definition():
    prog = program(
        **{
            "m.py": """
            import torch
            def is_hopper():
                return torch.cuda.get_device_capability()[0] == 9
            USE = is_hopper()
            """
        }
    )
    v = value(interp(prog), prog.by_path["m.py"], "USE", cap="9.0")
    assert v.only() is True
    assert v.taint is not None
    assert v.taint.kinds == {GateKind.PREDICATE_CALL}
    assert ResolvedBy.DEFINITION in v.taint.via
    assert {(r.name, r.line) for r in v.taint.resolutions} == {("is_hopper", 3), ("USE", 5)}


def test_instance_attributes_assigned_in_methods():
    prog = program(
        **{
            "m.py": """
            import torch
            class Runner:
                def __init__(self):
                    self.major = torch.cuda.get_device_capability()[0]
                    self.name = "r"
            """
        }
    )
    it = interp(prog)
    mod = prog.by_path["m.py"]
    it.on(capability("12.0"))
    assert it.instance_attr(mod, SelfRef("m", "Runner"), "major").only() == 12
    assert it.instance_attr(mod, SelfRef("m", "Runner"), "name").only() == "r"


def test_a_modelled_name_wins_over_its_definition_in_the_input():
    """torch's own source beside the caller: the model's capability and constants, not the
    definitions (which read a C extension, or hard-code the toolkit torch was built with)."""
    prog = program(
        **{
            "site/torch/__init__.py": "from torch import cuda as cuda\nfrom torch import version as version\n",
            "site/torch/version.py": "cuda = '12.8'\nhip = None\n",
            "site/torch/cuda/__init__.py": "def get_device_capability(d=None):\n    return _props(d).major, 0\n",
            "site/app.py": "import torch\nCAP = torch.cuda.get_device_capability()\nHIP = torch.version.hip\n",
        }
    )
    it = interp(prog)
    app = prog.by_path["site/app.py"]
    assert value(it, app, "CAP", cap="12.1").only() == (12, 1)
    assert value(it, app, "HIP").only() is None


def test_backend_probes_answer_as_on_cuda_whatever_their_definition():
    prog = program(
        **{
            "m.py": """
            import torch
            def is_rocm():
                return torch.version.hip is not None and probe()
            class Platform:
                def is_musa(self):
                    return self._enum == 3
            ROCM = is_rocm()
            MUSA = Platform().is_musa()
            CUDA = Platform().is_cuda()
            """
        }
    )
    it = interp(prog)
    mod = prog.by_path["m.py"]
    assert value(it, mod, "ROCM").only() is False
    assert value(it, mod, "MUSA").only() is False
    assert value(it, mod, "CUDA").only() is True  # by name, not defined anywhere


def test_another_accelerators_capability_is_unknown():
    prog = program(**{"m.py": "import torch\nCAP = torch.musa.get_device_capability()\n"})
    v = value(interp(prog), prog.by_path["m.py"], "CAP", cap="12.0")
    assert v.taint is None and v.only() != (12, 0)
