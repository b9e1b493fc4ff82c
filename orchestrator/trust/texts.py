"""The texts an audit compares: task prompts (and answers), and user-supplied train/dev files.

A task's prompt is its ``instruction.md``; its answer is the reference solution
(``solution/solve.sh``) when there is one. External files are CSV or JSONL with
an id column and a text column, named by the user.
"""

from __future__ import annotations

import csv
import json
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path

from orchestrator.errors import UserError
from orchestrator.spec.task import Task

_SPACE = re.compile(r"\s+")


class _PunctuationToSpace(dict[int, int | None]):
    """A str.translate table that computes each character's entry once: punctuation becomes a space."""

    def __missing__(self, code: int) -> int | None:
        value = 32 if unicodedata.category(chr(code)).startswith("P") else None
        self[code] = value if value is not None else code
        return self[code]


_PUNCT = _PunctuationToSpace()


def normalize(text: str) -> str:
    """NFKC, case-folded, punctuation dropped, whitespace collapsed: what "the same text" means here."""
    text = unicodedata.normalize("NFKC", text).casefold().translate(_PUNCT)
    return _SPACE.sub(" ", text).strip()


@dataclass(frozen=True)
class Item:
    id: str
    text: str
    source: str  # "tasks" or the file it came from


def task_items(tasks: list[Task], with_answer: bool) -> list[Item]:
    out = []
    for t in tasks:
        text = t.instruction
        if with_answer:
            solve = Path(t.path) / "solution" / "solve.sh"
            if solve.is_file():
                text = f"{text}\n{solve.read_text(encoding='utf-8', errors='replace')}"
        out.append(Item(t.id, text, "tasks"))
    return out


def file_items(path: Path, id_column: str, text_column: str) -> list[Item]:
    """Rows of a CSV or JSONL file; a row without the columns is an error naming its line."""
    if not path.is_file():
        raise UserError("no such file", file=str(path))
    items: list[Item] = []
    try:
        if path.suffix.lower() in (".jsonl", ".ndjson"):
            with path.open(encoding="utf-8") as f:
                for n, line in enumerate(f, 1):
                    if not line.strip():
                        continue
                    try:
                        row = json.loads(line)
                    except json.JSONDecodeError as exc:
                        raise UserError(f"line {n}: not JSON ({exc.msg})", file=str(path)) from None
                    items.append(_item(row, id_column, text_column, path, n))
        elif path.suffix.lower() in (".csv", ".tsv"):
            with path.open(encoding="utf-8", newline="") as f:
                reader = csv.DictReader(f, delimiter="\t" if path.suffix.lower() == ".tsv" else ",")
                for n, row in enumerate(reader, 2):
                    items.append(_item(row, id_column, text_column, path, n))
        else:
            raise UserError("expected a .csv, .tsv or .jsonl file", file=str(path))
    except UnicodeDecodeError:
        raise UserError("not UTF-8 text", file=str(path)) from None
    except OSError as exc:
        raise UserError(f"cannot read ({exc.strerror})", file=str(path)) from None
    return items


def _item(row: object, id_column: str, text_column: str, path: Path, line: int) -> Item:
    if not isinstance(row, dict) or id_column not in row or text_column not in row:
        raise UserError(f"line {line}: needs the columns {id_column!r} and {text_column!r}", file=str(path))
    return Item(str(row[id_column]), str(row[text_column] or ""), path.name)
