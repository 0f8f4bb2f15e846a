"""The base of the typed UI message (``parts.py``) and its stream (``chunks.py``): pydantic
models with the AI SDK's camelCase names, unknown keys kept (as the SDK's loose objects do),
and a JSON form that leaves out the optional keys a value does not have.

Payloads the turn only carries (a tool's input and output, provider metadata) are ``Json``:
validated as "any value", never walked (a file's content need not be checked per step).
"""

from __future__ import annotations

from typing import Annotated, ClassVar

from pydantic import BaseModel, ConfigDict, GetPydanticSchema
from pydantic.alias_generators import to_camel
from pydantic_core import core_schema

from openagents.agent.models.port import JsonValue

Json = Annotated[JsonValue, GetPydanticSchema(lambda _type, _handler: core_schema.any_schema())]


class UIModel(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True, alias_generator=to_camel)

    # the keys (by alias) left out of the JSON form when their value is None
    OPTIONAL: ClassVar[frozenset[str]] = frozenset()

    def to_json(self) -> dict[str, JsonValue]:
        data: dict[str, JsonValue] = self.model_dump(by_alias=True)
        for key in self.OPTIONAL:
            if key in data and data[key] is None:
                del data[key]
        return data
