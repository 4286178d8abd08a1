"""CCCL ``NV_IF_TARGET`` queries as preprocessor conditions, with CCCL's semantics kept in data."""

from __future__ import annotations

import re
from functools import cache

from auditor import datafiles


@cache
def cccl_queries() -> tuple[tuple[re.Pattern, str], ...]:
    """CCCL target queries -> preprocessor condition templates, from data."""
    data = datafiles.read_json("cccl-queries.json")
    return tuple((re.compile(q["pattern"]), q["condition"]) for q in data["queries"])


def cccl_condition(query: str) -> str | None:
    """``NV_PROVIDES_SM_90`` -> ``defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900``."""
    for pattern, template in cccl_queries():
        m = pattern.match(query.strip())
        if m:
            sm = m.group(1) if m.groups() else ""
            n = int(sm) * 10 if sm else 0
            return template.format(n=n, sm=sm)
    return None
