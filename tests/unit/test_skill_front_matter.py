"""A SKILL.md's front matter, read from an untrusted sandbox (agent/skills.py)."""

from openagents.agent.skills import MAX_DESCRIPTION_CHARS, is_skill_name, skill_info


def test_name_and_description_from_the_front_matter() -> None:
    text = '---\nname: "deploy"\ndescription: Ship it # a comment\nother: x\n---\n# Body\n'
    info = skill_info("folder", text)
    assert (info.name, info.description) == ("deploy", "Ship it")


def test_a_folded_block_description_and_the_folder_name_as_fallback() -> None:
    text = "---\ndescription: >-\n  Two lines\n  folded.\n---\nname: not-front-matter\n"
    info = skill_info("review", text)
    assert (info.name, info.description) == ("review", "Two lines folded.")


def test_no_front_matter_tags_and_control_characters_are_not_interpreted() -> None:
    assert skill_info("plain", "# no front matter\nname: x\n").name == "plain"
    hostile = (
        "---\nname: !!python/object:os.system evil\x07\ndescription: " + "d" * 5000 + "\n---\n"
    )
    info = skill_info("h", hostile)
    assert info.name == "!!python/object:os.system evil"  # kept as text, never a YAML tag
    assert len(info.description) == MAX_DESCRIPTION_CHARS


def test_skill_folder_names() -> None:
    assert is_skill_name("deploy")
    assert not any(is_skill_name(name) for name in ("", ".hidden", "a/b", "a\\b"))
