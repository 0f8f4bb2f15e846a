"""The coding agent: the model port and its adapters (``models/``); the loop, tools and prompts
build on them."""
