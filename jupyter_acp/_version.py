"""The package version (its own module: anything may import it without importing the app)."""

__version__ = "0.1.0"
