"""Facts that are data, not analysis: what predicate names promise (:mod:`.names`), which
features the guarded code uses and where targets have them (:mod:`.features`), and the GPU
code that shipped binaries embed (:mod:`.binaries`).
"""
