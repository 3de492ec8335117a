"""scenc: compile memory-allocator scenarios to C and compare allocators."""

__version__ = "0.1.0"
