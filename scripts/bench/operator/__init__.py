"""The operator benchmark (``python -m scripts.bench.operator``; what it does and why: __main__.py's docstring),
split by what it measures: ``latency`` (each command as a cold CLI process, without and after ``maintain``),
``outages`` (the commands with clusters stopped or frozen), ``freshness`` (how fresh the running translator
keeps the checkpoints) and ``profile`` (cProfile and import time). ``fixture`` builds the state they measure in,
``cli`` runs one CLI process, ``commands`` says what is measured and what it must give, ``report`` writes the
tables and the targets."""
