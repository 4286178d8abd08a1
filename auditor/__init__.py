"""archaudit: find GPU architecture gates in Python and CUDA sources and say what they admit."""

__version__ = "0.1.0"
