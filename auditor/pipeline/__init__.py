"""The scan as a whole: inputs listed, files read in worker processes, gates evaluated, rules
applied, one :class:`~auditor.model.AuditResult` per scan (:mod:`.run`); the result cache
(:mod:`.cache`) and the reports kept from the last scan of an unchanged input (:mod:`.kept`).
"""

from auditor.pipeline.run import Options, Scan, audit, audit_input, audit_input_binaries, package_verdicts

__all__ = ["Options", "Scan", "audit", "audit_input", "audit_input_binaries", "package_verdicts"]
