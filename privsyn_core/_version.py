"""The library's version, written once: the package exports it and pyproject.toml reads it from here."""

__version__ = "0.1.0"
