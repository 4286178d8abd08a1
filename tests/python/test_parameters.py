"""Which parameters hold the device capability, and in what form a body reads them."""

from __future__ import annotations

import textwrap

import pytest

from auditor.facts import names
from auditor.python.parameters import Form, capability_parameters
from tests.python.program import program


def params_of(source: str) -> dict[str, Form]:
    prog = program(**{"m.py": textwrap.dedent(source)})
    mod = prog.by_path["m.py"]
    node = next(n for n in mod.root.named_children if n.type == "function_definition")
    return capability_parameters(node, names.table())


@pytest.mark.parametrize(
    "source,want",
    [
        ("def f(capability):\n    return capability.major in [9, 10]\n", {"capability": Form.CAPABILITY}),
        (
            "def f(cls, capability: 'DeviceCapability') -> bool:\n    return capability >= DeviceCapability(8, 0)\n",
            {"capability": Form.CAPABILITY},
        ),
        (
            "def f(compute_capability=None):\n    return compute_capability is not None and compute_capability < 100\n",
            {"compute_capability": Form.NUMBER},
        ),
        (
            "def f(compute_capability: int | None = None):\n    return compute_capability not in (100, 103)\n",
            {"compute_capability": Form.NUMBER},
        ),
        ("def f(cc):\n    return cc in [9, 10, 11]\n", {"cc": Form.MAJOR}),
        ("def f(cap):\n    return cap >= (9, 0)\n", {"cap": Form.CAPABILITY}),
        # no use says which form: the annotation does
        (
            "def f(*, compute_capability: tuple[int, int]):\n    return g(compute_capability=compute_capability)\n",
            {"compute_capability": Form.CAPABILITY},
        ),
        (
            "def f(compute_capability: Optional[int] = None):\n    return g(compute_capability)\n",
            {"compute_capability": Form.NUMBER},
        ),
        (
            "def f(major_minor_tuple, majors):\n    return major_minor_tuple[0] in majors\n",
            {"major_minor_tuple": Form.CAPABILITY},
        ),
        # any name, when the annotation says so
        ("def f(dev: DeviceCapability):\n    return dev.major == 10\n", {"dev": Form.CAPABILITY}),
        # not a capability: another annotation, a string use, a name the data does not list
        ("def f(capability: str):\n    return capability == 'fp8'\n", {}),
        ("def f(capability):\n    return capability == 'fp8'\n", {}),
        ("def f(major):\n    return major == 9\n", {}),
        # a threshold compared with the device's own capability, and the API tests the model knows
        (
            "def f(capability):\n    current = torch.cuda.get_device_capability()\n    return current >= capability\n",
            {},
        ),
        ("def has_device_capability(self, capability):\n    return self.cap >= capability\n", {}),
        (
            "def family(cls, capability: int):\n    current = cls.get_device_capability()\n"
            "    return (current.to_int() // 10) == (capability // 10)\n",
            {},
        ),
    ],
)
def test_capability_parameters(source, want):
    assert params_of(source) == want
