"""Errors a user can cause. The CLI prints them on one line and exits 2."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pydantic import ValidationError


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


def first_validation_error(exc: ValidationError) -> tuple[str, str]:
    """The first problem pydantic found, as (dotted field path, plain message)."""
    err = exc.errors()[0]
    field = ".".join(str(part) for part in err["loc"]) or "(root)"
    msg = "required field is missing" if err["type"] == "missing" else str(err["msg"]).removeprefix("Value error, ")
    return field, msg
