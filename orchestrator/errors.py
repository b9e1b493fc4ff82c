"""Errors a user can cause. The CLI prints them on one line and exits 2."""

from __future__ import annotations


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
