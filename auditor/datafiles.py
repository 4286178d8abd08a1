"""The one reader of ``auditor/data/``: the tables every stage reads (targets per toolkit,
devices, CCCL queries, predicate names, PTX and API facts), shipped as package data."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any


def read_text(name: str) -> str:
    """A data file's text."""
    return resources.files("auditor").joinpath("data").joinpath(name).read_text("utf-8")


def read_json(name: str) -> Any:
    """A JSON data file, parsed."""
    return json.loads(read_text(name))
