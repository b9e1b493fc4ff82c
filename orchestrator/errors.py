"""Errors a user can cause. The CLI prints them on one line and exits 2."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pydantic import BaseModel, ValidationError


class UserError(Exception):
    """Bad input: names the file and the field when there is one."""

    def __init__(self, message: str, *, file: str | None = None, field: str | None = None) -> None:
        self.file = file
        self.field = field
        self.message = message
        super().__init__(self.one_line())

    def one_line(self) -> str:
        where = ": ".join(p for p in (self.file, self.field) if p)
        return f"{where}: {self.message}" if where else self.message


class SpecError(UserError):
    """A task or experiment spec that cannot be used."""


def first_validation_error(exc: ValidationError, model: type[BaseModel] | None = None) -> tuple[str, str]:
    """The first problem pydantic found, as (dotted field path, plain message).

    An unknown key comes first when there is one (a misspelt key is why a field then seems missing), named
    with the closest valid name when ``model`` (the model validated) is given (orchestrator/spec/unknown.py).
    """
    from orchestrator.spec.unknown import UNKNOWN_KEY, hint

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
