"""The report, the comparison and the calibration of a run, shown from the store when they were computed before.

Each is a pure function of what it reads in the store, the options it was asked with and the code that computes
it, so each is kept in the store (:mod:`orchestrator.store.derived`) under a key made of exactly those: the
store's token (SQLite replaces it on any row change, whoever writes it), its schema version, every option that
changes the result, and :func:`code_version`, a digest of headroom's own source and of the versions of the
libraries that compute the statistics. When the key matches, the command renders the stored document and never
imports pandas, scipy or statsmodels; otherwise it computes as it always did, and keeps the result when the
store can be written (a read-only store, or one that changed meanwhile, just keeps nothing).

What is stored is the document the renderers read, as JSON, with every string raw as it was recorded: the
renderers escape it on the way out exactly as they do for a document just built.
"""

from __future__ import annotations

import hashlib
import sys
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel

from orchestrator.store import derived

if TYPE_CHECKING:
    from collections.abc import Callable

    from orchestrator.report.model import ComparisonDocument, ReportDocument
    from orchestrator.store.sqlite import Store

T = TypeVar("T")

#: The libraries whose results the documents hold: a new version of any of them may compute another number.
LIBRARIES = ("numpy", "pandas", "scipy", "statsmodels", "pyarrow", "pydantic", "adbc-driver-sqlite")


@cache
def code_version() -> str:
    """A digest of every source file of headroom (its ``.py`` and ``.sql``) and of the libraries' versions.

    The whole package, not a list of the analysis modules: a module the statistics come to import later is then
    covered without anyone remembering to add it. About 0.01 s of reading and hashing.
    """
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    root = Path(__file__).resolve().parent.parent
    h = hashlib.sha256(sys.version.encode())
    for path in sorted(p for p in root.rglob("*") if p.suffix in (".py", ".sql") and p.is_file()):
        h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    for lib in LIBRARIES:
        try:
            h.update(f"{lib}={dist_version(lib)}\0".encode())
        except PackageNotFoundError:
            h.update(f"{lib}=absent\0".encode())
    return h.hexdigest()


def kept(
    kind: str,
    stores: list[Store],
    options: dict[str, Any],
    compute: Callable[[], T],
    load: Callable[[str], T],
    dump: Callable[[T], str],
) -> T:
    """The result under this key in ``stores[0]``, or ``compute()``'s, kept there when every store held still.

    ``load`` raises ValueError for a value it cannot read (then the result is computed again, and replaced).
    """
    before = [derived.version(s.db) for s in stores]
    known = [v for v in before if v is not None]
    key = derived.key(kind, known, options, code_version()) if len(known) == len(before) else None
    if key is not None and (text := derived.lookup(stores[0].db, kind, key)) is not None:
        try:
            return load(text)
        except ValueError:  # pydantic's ValidationError and json's JSONDecodeError are ValueErrors
            pass
    result = compute()
    if key is None or [derived.version(s.db) for s in stores] != before:
        return result  # a store changed while this was computed: its reads may span two states, so keep nothing
    text = dump(result)
    # Faithful or not kept: what a later command reads back must be this result, field for field.
    if dump(load(text)) == text:
        derived.save(stores[0].path, kind, key, known[0], text)
    return result


def _json(doc: BaseModel) -> str:
    return doc.model_dump_json(by_alias=True, exclude_unset=True)


def _rules_key(rules: str | None) -> str | None:
    """``--rules`` as the key holds it: unset and ``auto`` are one request (``scoring_rules.parse_rules``), so the
    report a sweep prints at its end (no ``--rules``) is the one ``headroom report`` asks for by default."""
    return "auto" if rules is None or rules.strip() in ("", "auto") else rules


def report_document(
    store: Store,
    run_id: str | None,
    reference: str | None = None,
    rules: str | None = None,
    margin: float | None = None,
) -> ReportDocument:
    """:func:`orchestrator.report.document.build`'s document, from the store when it holds it for these options."""
    from orchestrator.report.model import ReportDocument

    rid = store.run(run_id).run_id  # "the latest run" is a different key once another run is added

    def compute() -> ReportDocument:
        from orchestrator.report import document

        return document.build(store, rid, reference=reference, rules=rules, margin=margin)

    options = {"run": rid, "reference": reference, "rules": _rules_key(rules), "margin": margin}
    return kept("report", [store], options, compute, ReportDocument.model_validate_json, _json)


def report_text(
    store: Store,
    run_id: str | None,
    fmt: str,
    reference: str | None = None,
    rules: str | None = None,
    margin: float | None = None,
) -> str:
    """The report rendered in ``fmt`` (json, markdown, html), kept only for HTML: its plots are drawn with
    matplotlib (about a second of import), and the page is a pure function of the document and the code; the
    other formats render from the stored document in a few milliseconds, so they are not kept twice."""
    from orchestrator.report import render

    if fmt != "html":
        return render.render_text(report_document(store, run_id, reference, rules, margin), fmt)
    rid = store.run(run_id).run_id

    def compute() -> str:
        return render.render_text(report_document(store, rid, reference, rules, margin), fmt)

    def same(text: str) -> str:
        return text

    options = {"run": rid, "reference": reference, "rules": _rules_key(rules), "margin": margin}
    return kept("report/html", [store], options, compute, same, same)


def comparison_document(
    store_a: Store, run_a: str | None, store_b: Store, run_b: str | None, rules: str | None = None
) -> ComparisonDocument:
    """:func:`orchestrator.report.document.comparison_document`'s document, kept in A's store; keyed on both."""
    from orchestrator.report.model import ComparisonDocument

    ra, rb = store_a.run(run_a).run_id, store_b.run(run_b).run_id

    def compute() -> ComparisonDocument:
        from orchestrator.report import document

        return document.comparison_document(store_a, ra, store_b, rb, rules=rules)

    # One file given twice is one store, its version counted once.
    same = store_a.path.resolve() == store_b.path.resolve()
    options = {"a": ra, "b": rb, "rules": _rules_key(rules), "same_store": same}
    stores = [store_a] if same else [store_a, store_b]
    return kept("comparison", stores, options, compute, ComparisonDocument.model_validate_json, _json)


def calibration(
    store: Store,
    run_id: str | None,
    *,
    alpha: float,
    margin: float,
    min_peaks: int,
    compute_document: Callable[[Store, str], dict[str, Any]],
) -> dict[str, Any]:
    """``runs calibrate``'s document (``compute_document``, the command's own, for the run), kept in the store;
    its oracle check is the run's own (provenance), so the store's version covers it. Every input of
    ``compute_document`` besides the store is in the options, so the key names it."""
    import json

    rid = store.run(run_id).run_id

    def compute() -> dict[str, Any]:
        return compute_document(store, rid)

    def load(text: str) -> dict[str, Any]:
        doc = json.loads(text)
        if not isinstance(doc, dict):
            raise ValueError("not a calibration document")
        return doc

    options = {"run": rid, "alpha": alpha, "margin": margin, "min_peaks": min_peaks}
    return kept("calibration", [store], options, compute, load, lambda doc: json.dumps(doc, allow_nan=False))
