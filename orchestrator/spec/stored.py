"""What every stored, versioned record shares (a try's :mod:`~orchestrator.spec.evidence`, a run's
:mod:`~orchestrator.spec.provenance`): only what a writer set is written, and a stored row's keys that no
field holds are set aside by their dotted path, so an older row reads and a re-stored copy loses nothing."""

from __future__ import annotations

import types
import typing
from typing import Any

from pydantic import BaseModel, ConfigDict, SerializationInfo, SerializerFunctionWrapHandler, model_serializer


class OnlySet(BaseModel):
    """A record's part: unknown keys refused, assignments validated, only what was set written (by field name
    or, when dumped ``by_alias``, by alias)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, json_schema_mode_override="validation")

    @model_serializer(mode="wrap")
    def _only_set(self, handler: SerializerFunctionWrapHandler, info: SerializationInfo) -> dict[str, Any]:
        # WHY: these records were dicts holding only the keys a writer wrote; writing every unset field as
        # null would change their shape (and make each of a million evidence rows several times larger).
        data = handler(self)
        fields = type(self).model_fields
        unset = {
            (f.alias or name) if info.by_alias else name
            for name, f in fields.items()
            if name not in self.model_fields_set and name != "schema_version"
        }
        return {k: v for k, v in data.items() if k not in unset}


def set_aside(model: type[BaseModel], data: dict[str, Any], prefix: str, legacy: dict[str, Any]) -> None:
    """Move the keys ``model`` (a model that refuses unknown keys) has no field for into ``legacy``, at every depth.

    The top level's own ``legacy`` is kept where it is."""
    fields = {f.alias or name: f for name, f in model.model_fields.items()} | dict(model.model_fields)
    for key in list(data):
        if key == "legacy" and not prefix:
            continue
        field = fields.get(key)
        if field is None:
            if model.model_config.get("extra") != "allow":
                legacy[prefix + key] = data.pop(key)
            continue
        value = data[key]
        for sub, shape in submodels(field.annotation):
            if shape == "one":
                items = [("", value)]
            elif shape == "list" and isinstance(value, list):
                items = [(f"{i}.", v) for i, v in enumerate(value)]
            elif shape == "dict" and isinstance(value, dict):
                items = [(f"{k}.", v) for k, v in value.items()]
            else:
                items = []
            for where, item in items:
                if isinstance(item, dict):
                    set_aside(sub, item, f"{prefix}{key}.{where}", legacy)


def submodels(annotation: Any) -> list[tuple[type[BaseModel], str]]:
    """The models a field holds: itself (``one``), in a ``list`` or as ``dict`` values."""
    origin = typing.get_origin(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [(annotation, "one")]
    if origin in (typing.Union, types.UnionType):
        return [s for a in typing.get_args(annotation) for s in submodels(a)]
    if origin is list:
        return [(m, "list") for m, shape in submodels(typing.get_args(annotation)[0]) if shape == "one"]
    if origin is dict:
        return [(m, "dict") for m, shape in submodels(typing.get_args(annotation)[1]) if shape == "one"]
    return []


def check_version(what: str, data: dict[str, Any], current: int) -> None:
    """Refuse a record newer than this headroom reads (a ValueError: pydantic reports it as a validation error)."""
    version = data.get("schema_version", 0)
    if not isinstance(version, int) or version > current:
        raise ValueError(
            f"{what} schema version {version!r} is newer than this headroom reads ({current}); upgrade headroom to read it"
        )
