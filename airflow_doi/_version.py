"""The package's version, stated once (``pyproject.toml`` carries the same for the build)."""

__version__ = "0.1.0"
