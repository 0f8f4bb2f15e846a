"""Lifecycle loop tasks and the reconciler."""
