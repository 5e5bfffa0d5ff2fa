"""tidelake: a streaming lakehouse in Python."""
__version__ = "0.1.0"
