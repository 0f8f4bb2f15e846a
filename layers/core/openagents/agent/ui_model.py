"""The base of the typed UI message (``parts.py``) and its stream (``chunks.py``): pydantic
models with the AI SDK's camelCase names, unknown keys kept (as the SDK's loose objects do),
and a JSON form that leaves out the optional keys a value does not have.

Payloads the turn only carries (a tool's input and output, provider metadata) are ``Json``:
validated as "any value", never walked (a file's content need not be checked per step).

A model's JSON form is made once and kept until the model changes: a step writes (and builds the
model's history from) every part of the message, most of them as earlier steps left them. It is
dropped when a field is set (``part.text += delta``, ``part.state = "done"``), on ``model_copy``,
and when a nested model's own form changed (``_nested``). Values are replaced, never changed in
place (a tool part moves on by becoming a new part), and the form handed out is shared: read it,
never change it.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

from pydantic import BaseModel, ConfigDict, GetPydanticSchema, PrivateAttr
from pydantic.alias_generators import to_camel
from pydantic_core import core_schema

from openagents.agent.models.port import JsonValue

Json = Annotated[JsonValue, GetPydanticSchema(lambda _type, _handler: core_schema.any_schema())]

_Kept = tuple[tuple[object, ...], dict[str, JsonValue]]  # the nested models' forms, the form


class UIModel(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True, alias_generator=to_camel)

    # the keys (by alias) left out of the JSON form when their value is None
    OPTIONAL: ClassVar[frozenset[str]] = frozenset()
    # the JSON form as last made, with the nested models' forms it was made from
    _json: _Kept | None = PrivateAttr(default=None)

    def __setattr__(self, name: str, value: Any) -> None:
        super().__setattr__(name, value)
        if name != "_json":
            self._forget_json()

    def _forget_json(self) -> None:
        private = self.__pydantic_private__
        if private is not None:
            private["_json"] = None

    def __eq__(self, other: object) -> bool:
        """Equal fields (the kept JSON form, a private attribute, left out)."""
        if not isinstance(other, BaseModel):
            return NotImplemented
        return (
            type(self) is type(other)
            and self.__dict__ == other.__dict__
            and (self.__pydantic_extra__ or {}) == (other.__pydantic_extra__ or {})
        )

    __hash__ = None  # type: ignore[assignment]  # mutable, as pydantic's models are

    def model_copy(self, *, update: Any = None, deep: bool = False) -> Any:
        copied = super().model_copy(update=update, deep=deep)
        copied._forget_json()  # ``update`` is laid into the copy without ``__setattr__``
        return copied

    def to_json(self) -> dict[str, JsonValue]:
        """The model's JSON form (shared while the model is unchanged: not to be changed)."""
        nested = self._nested()
        private = self.__pydantic_private__
        kept: _Kept | None = private.get("_json") if private is not None else None
        if kept is not None and kept[0] == nested:  # the nested forms unchanged (or equal)
            return kept[1]
        data = self._json_form(nested)
        if private is not None:
            private["_json"] = (nested, data)
        return data

    def _nested(self) -> tuple[object, ...]:
        """The JSON forms of the nested models this one's form holds (none here)."""
        return ()

    def _json_form(self, nested: tuple[object, ...]) -> dict[str, JsonValue]:
        data: dict[str, JsonValue] = self.model_dump(by_alias=True)
        for key in self.OPTIONAL:
            if key in data and data[key] is None:
                del data[key]
        return data
