"""The tfpack version, kept in one place for setup.py and the package."""

__version__ = "0.1.0"
