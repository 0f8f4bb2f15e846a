"""Pure domain: models, rules, naming, validation and errors. Imports nothing of ours."""
