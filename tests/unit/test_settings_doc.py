"""The README documents every setting (docs are part of the change)."""

from pathlib import Path

from openagents.settings import Settings

README = Path(__file__).resolve().parents[2] / "README.md"


def test_every_setting_is_in_the_readme() -> None:
    text = README.read_text()
    variables = (f"`OPENAGENTS_{name.upper()}`" for name in Settings.model_fields)
    missing = [variable for variable in variables if variable not in text]
    assert not missing, f"README.md lacks {missing}"
