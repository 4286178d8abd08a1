"""C/C++/CUDA device-code gates: directives found by a line scanner (:mod:`.directives`), their
conditional structure per file (:mod:`.structure`), macros derived from the architecture over
the whole input and every condition's value on each nvcc target (:mod:`.macros`, over
:mod:`.cexpr`), CCCL ``NV_IF_TARGET`` arms (:mod:`.cccl`), and the gates read off (:mod:`.gates`).
"""
