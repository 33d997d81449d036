"""drkit's version, in a module of its own: importing it loads nothing else (the package root names the
facade for type checkers, which would put every layer under each module that asks for the version)."""

__version__ = "0.1.0"
