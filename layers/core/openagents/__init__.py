"""Open Agents on AWS: the shared core package (shipped as the "core" Lambda layer)."""
