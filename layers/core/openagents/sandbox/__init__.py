"""Sandboxes: the driver port, its local and Fargate adapters, and the sandboxd client."""
