# ripgrep pattern for every line that could hold a GPU architecture gate.
# One alternative per line; bench/run.py joins them with '|'. Lines starting with '#' are comments.
# Keep to literals and ASCII classes: ripgrep 13 leaves its fast literal path for Unicode
# \b, \w or \d, or for a long flat list of literals (the same list factored, as below,
# runs ~6x faster).
# Preprocessor and CCCL (C/CUDA)
__CUDA_ARCH
NV_(IF|IF_ELSE|DISPATCH)_TARGET
NV_(PROVIDES|IS_EXACTLY|HAS_FEATURE)_SM
_SM[0-9]+[A-Z]?_ENABLED
# Python capability checks
is_sm_?[0-9]+[A-Za-z0-9_]*_supported
is_(hopper|blackwell|ampere|ada|turing|volta)([^A-Za-z0-9_]|$)
(get|is|has)_(device|compute)_capability
get_device_properties
supported_(major_versions|compute_capability)
# Compile-target strings and lists
compute_[0-9]+
TORCH_CUDA_ARCH_LIST
