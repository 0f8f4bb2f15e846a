"""What a step keeps instead of making again: a part's JSON form (made once while the part is
unchanged, made again once it changes) and the run's model-visible history (``History``: only
the messages and steps that changed are converted again), each equal to what making it anew
gives."""

from __future__ import annotations

from openagents.agent.models.port import JsonValue
from openagents.agent.parts import (
    Approval,
    OtherPart,
    ReasoningPart,
    StepStartPart,
    TextPart,
    ToolApprovalRequested,
    ToolInputAvailable,
    parse_parts,
)
from openagents.agent.ui import AssistantMessage, History, Metadata, UIMessageJson, history
from openagents.agent.ui_model import UIModel
from openagents.domain.attachments import Attachment, AttachmentFile

PNG = b"\x89PNG\r\n\x1a\n" + bytes(8)


def fresh(model: UIModel) -> dict[str, JsonValue]:
    """The form made anew, from a copy that never kept one."""
    return type(model).model_validate(model.model_dump(by_alias=True)).to_json()


def test_a_part_keeps_its_form_while_it_is_unchanged() -> None:
    part = TextPart(text="a", state="streaming")
    form = part.to_json()
    assert part.to_json() is form
    assert form == {"type": "text", "text": "a", "state": "streaming"}


def test_setting_a_field_makes_the_form_again() -> None:
    part = TextPart(text="a", state="streaming")
    first = part.to_json()
    part.text += "b"
    assert part.to_json() == {"type": "text", "text": "ab", "state": "streaming"}
    part.state = "done"
    assert part.to_json() == {"type": "text", "text": "ab", "state": "done"} == fresh(part)
    assert first == {"type": "text", "text": "a", "state": "streaming"}  # handed out: as it was
    reasoning = ReasoningPart(text="r")
    reasoning.to_json()
    reasoning.provider_metadata = {"openagents": {"signature": "s"}}
    assert reasoning.to_json()["providerMetadata"] == {"openagents": {"signature": "s"}}


def test_an_unknown_key_set_makes_the_form_again() -> None:
    [part] = parse_parts([{"type": "data-x", "data": 1}])
    assert isinstance(part, OtherPart)
    assert part.to_json() == {"type": "data-x", "data": 1}
    part.data = 2
    assert part.to_json() == {"type": "data-x", "data": 2}


def test_a_nested_approval_changed_in_place_makes_the_parts_form_again() -> None:
    approval = Approval(id="a1", reason="why")
    part = ToolApprovalRequested(
        type="tool-bash", tool_call_id="c1", input={"command": "ls"}, approval=approval
    )
    form = part.to_json()
    assert form["approval"] == {"id": "a1", "reason": "why"}
    assert part.to_json() is form
    approval.approved = True
    assert part.to_json()["approval"] == {"id": "a1", "approved": True, "reason": "why"}
    assert part.to_json() == fresh(part)


def test_a_copy_with_changes_has_its_own_form() -> None:
    approval = Approval(id="a1", reason="why")
    approval.to_json()
    changed = approval.model_copy(update={"approved": False, "reason": "no"})
    assert changed.to_json() == {"id": "a1", "approved": False, "reason": "no"}
    assert approval.to_json() == {"id": "a1", "reason": "why"}
    metadata = Metadata(step_finish_reasons=["tool_use"])
    metadata.to_json()
    metadata.step_finish_reasons = [*(metadata.step_finish_reasons or []), "end_turn"]
    assert metadata.to_json() == {"stepFinishReasons": ["tool_use", "end_turn"]}


def test_a_kept_form_does_not_change_equality() -> None:
    kept, plain = TextPart(text="a"), TextPart(text="a")
    kept.to_json()
    assert kept == plain
    assert kept != TextPart(text="b")
    assert kept != ReasoningPart(text="a")


def test_the_message_form_follows_its_parts() -> None:
    message = AssistantMessage("m1")
    message.parts.append(StepStartPart())
    message.parts.append(
        ToolInputAvailable(type="tool-todo_write", tool_call_id="c1", input={"todos": []})
    )
    before = message.to_json()
    call = message.tool_part("c1")
    assert call is not None
    message.put(call.available({"ok": True}))
    after = message.to_json()
    assert before["parts"] != after["parts"]
    assert after == AssistantMessage.load(after, "m1").to_json()


def user(text: str) -> UIMessageJson:
    return {"id": f"u-{text}", "role": "user", "parts": [{"type": "text", "text": text}]}


def test_the_kept_history_is_the_history_made_anew_at_every_step() -> None:
    """A turn's steps as the model and tool steps change the message: streamed text, a tool
    call, its output (the part replaced), a text part finished; at each, ``History`` gives what
    ``history`` gives over the same messages."""
    others = [user("hello")]
    message = AssistantMessage("m1")
    made = History()

    def same() -> None:
        messages = [*others, message.to_json()]
        assert made(messages) == history(messages)

    same()
    for step in range(4):
        message.parts.append(StepStartPart())
        text = TextPart(text="", state="streaming")
        message.parts.append(text)
        same()
        text.text += f"step {step}"
        same()
        message.finish_streaming()
        message.parts.append(
            ToolInputAvailable(type="tool-todo_write", tool_call_id=f"c{step}", input={"n": step})
        )
        same()
        call = message.tool_part(f"c{step}")
        assert call is not None
        message.put(call.available({"done": step}))
        same()
    others.append(user("more"))  # a message added before the run's own
    same()
    message.parts[1] = TextPart(text="rewritten", state="done")  # an earlier step changed
    same()
    assert "rewritten" in repr(made([*others, message.to_json()]))


def test_a_user_file_is_read_at_every_call() -> None:
    reads: list[str] = []
    url = "/api/sessions/s/attachments/a1"

    def files(found: str) -> AttachmentFile | None:
        reads.append(found)
        return AttachmentFile(Attachment("a1", "u", "s", "image/png", len(PNG), "p.png"), PNG)

    message: UIMessageJson = {
        "id": "u1",
        "role": "user",
        "parts": [{"type": "text", "text": "see"}, {"type": "file", "url": url}],
    }
    made = History()
    assert made([message], files) == made([message], files) == history([message], files)
    assert reads == [url, url, url]
