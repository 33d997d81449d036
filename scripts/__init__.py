"""The project's scripts: benchmarks as the package ``scripts.bench`` (run from the repository root as
``python -m scripts.bench.<name>``); the shell scripts beside it are run as files."""
