"""Benchmarks of the control plane: ``python -m bench.run`` (``make bench``). See
docs/benchmarks.md for what each number means."""
