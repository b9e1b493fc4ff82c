"""Unknown keys in a spec file are errors that name the key and the closest valid name.

A misspelt key (``[enviroment]``, ``cpu =``) silently falling back to a default changes what a sweep
measures, so every spec model refuses keys it does not know. Models with ``extra="forbid"`` get
pydantic's ``extra_forbidden`` error, which :func:`hint` turns into "did you mean ...". Task models
accept, besides their own fields, the fields of Harbor's and Terminal-Bench's formats that headroom
does not use (``KNOWN_IGNORED``): those are listed as ignored by ``tasks validate`` and ``tasks import``,
never an error and never dropped unseen; any other key is refused by :func:`refuse_unknown`.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, get_args, get_origin

if (
    TYPE_CHECKING
):  # pydantic loads with the models, not with `headroom --help` (importers/outcomes.py uses did_you_mean)
    from pydantic import BaseModel, ValidationError

#: The error type :func:`refuse_unknown` raises; ``ctx`` holds the key and the hint.
UNKNOWN_KEY = "unknown_key"


def closest(name: str, choices: Iterable[str]) -> str | None:
    """The valid name ``name`` most likely misspells (difflib's ratio, cut-off 0.6), or None."""
    got = difflib.get_close_matches(str(name), sorted(set(choices)), n=1, cutoff=0.6)
    return got[0] if got else None


def valid_names(model: type[BaseModel]) -> set[str]:
    """A model's field names, their aliases, and the other spellings it reads (``SPELLINGS``)."""
    names = set(model.model_fields)
    names |= {f.alias for f in model.model_fields.values() if f.alias}
    names |= set(getattr(model, "SPELLINGS", ()))
    return names


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    guess = closest(name, choices)
    return f" (did you mean {guess!r}?)" if guess else ""


#: Validation context of a spec read back from a store: written by an older headroom, it is history, not input.
RECORDED = "recorded"


def refuse_unknown(model: type[BaseModel], data: Any, ignored: Iterable[str] = (), context: Any = None) -> None:
    """Raise for the first key of ``data`` that is neither ``model``'s nor a known-but-ignored one.

    ``context`` is the validation's: with ``{RECORDED: True}`` (a spec a store holds) nothing is refused.
    """
    from pydantic_core import PydanticCustomError

    if not isinstance(data, dict) or (isinstance(context, dict) and context.get(RECORDED)):
        return
    known = valid_names(model)
    allowed = known | set(ignored)
    for key in data:
        if key not in allowed:
            raise PydanticCustomError(
                UNKNOWN_KEY,
                "unknown key{hint}",
                {"key": str(key), "hint": did_you_mean(str(key), known)},
            )


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models an annotation holds (``X | None``, ``list[X]``, ``dict[str, X]``)."""
    from pydantic import BaseModel

    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    if get_origin(annotation) is None:
        return []
    return [m for arg in get_args(annotation) for m in _models_in(arg)]  # unions, lists, dicts, Annotated


def model_at(model: type[BaseModel], loc: Sequence[str | int]) -> type[BaseModel] | None:
    """The model that holds the field at ``loc`` (list indexes and dict keys are stepped over)."""
    current: type[BaseModel] | None = model
    for part in loc:
        if current is None:
            return None
        if isinstance(part, int) or part not in current.model_fields:
            continue  # a list index, a dict key or a union member's tag: the same model goes on
        inner = _models_in(current.model_fields[part].annotation)
        current = inner[0] if inner else None
    return current


def hint(model: type[BaseModel] | None, loc: Sequence[str | int]) -> str:
    """For an unknown key at ``loc`` (the key last): " (did you mean 'x'?)" or ""."""
    if model is None or not loc:
        return ""
    holder = model_at(model, loc[:-1])
    return did_you_mean(str(loc[-1]), valid_names(holder)) if holder is not None else ""


def first_validation_error(exc: ValidationError, model: type[BaseModel] | None = None) -> tuple[str, str]:
    """The first problem pydantic found, as (dotted field path, plain message).

    An unknown key comes first when there is one (a misspelt key is why a field then seems missing), named
    with the closest valid name when ``model`` (the model validated) is given.
    """
    errors = exc.errors()
    err = next((e for e in errors if e["type"] in (UNKNOWN_KEY, "extra_forbidden")), errors[0])
    loc = list(err["loc"])
    if err["type"] == UNKNOWN_KEY:
        loc.append((err.get("ctx") or {}).get("key", "?"))
        msg = "unknown key" + (err.get("ctx") or {}).get("hint", "")
    elif err["type"] == "extra_forbidden":
        msg = "unknown key" + hint(model, loc)
    elif err["type"] == "missing":
        msg = "required field is missing"
    else:
        msg = str(err["msg"]).removeprefix("Value error, ")
    field = ".".join(str(part) for part in loc) or "(root)"
    return field, msg
