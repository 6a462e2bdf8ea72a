"""InferLab's Qt application, command line and lab controllers."""

__version__ = "0.1.0"
