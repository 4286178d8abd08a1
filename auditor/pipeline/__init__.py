"""The scan as a whole: inputs listed, gates evaluated, rules applied, one
:class:`~auditor.model.AuditResult` per scan (:mod:`.run`); the worker processes that read
and scan files (:mod:`.workers`); the result cache that stage calls go through (:mod:`.cache`)
and the reports kept from the last scan of an unchanged input (:mod:`.kept`).
"""

from auditor.pipeline.run import Options, Scan, apply_rules, audit, audit_input, audit_input_binaries, cuda_gates

__all__ = ["Options", "Scan", "apply_rules", "audit", "audit_input", "audit_input_binaries", "cuda_gates"]
