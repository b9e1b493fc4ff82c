"""The report document is a typed, versioned model: the JSON is its dump, and the renderers read it."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from pydantic import ValidationError
from rich.console import Console

from benchmarks.bench_stats import write_store
from orchestrator.report import document, html, markdown, render, terminal
from orchestrator.report.model import SCHEMA, SCHEMA_VERSION, ReportDocument
from orchestrator.stats.synthetic import make_sweep
from orchestrator.store.sqlite import Store

#: The JSON report's top-level keys before the model existed; the model keeps every one of them.
OLD_KEYS = {
    "schema",
    "run",
    "experiment",
    "provenance",
    "task_provenance_mix",
    "trust",
    "configurations",
    "tries",
    "exclusions",
    "statistics",
    "checks",
}


@pytest.fixture(scope="module")
def doc(tmp_path_factory: pytest.TempPathFactory) -> ReportDocument:
    path = tmp_path_factory.mktemp("model") / "m.db"
    write_store(make_sweep(4, 2, seed=7), path).close()
    return document.build(Store.open_existing(path))


def test_the_json_format_is_the_model_dump_with_the_old_keys_and_a_version(doc: ReportDocument) -> None:
    out = json.loads(render.render_text(doc, "json"))
    assert set(out) == OLD_KEYS | {"schema_version", "headline_rule"}
    assert out["schema"] == SCHEMA == "headroom.report/2" and out["schema_version"] == SCHEMA_VERSION == 2
    assert out == doc.to_dict()
    # The JSON reads back into the same model: a consumer can validate what it was given.
    assert ReportDocument.model_validate(out).to_dict() == out
    c = out["configurations"][0]
    assert {"label", "pass_rate", "infra_error_rate", "score_intervals", "cost", "enforcement"} <= set(c)


def test_an_undeclared_or_missing_field_fails_validation(doc: ReportDocument) -> None:
    out = doc.to_dict()
    with pytest.raises(ValidationError, match="surprise"):
        ReportDocument.model_validate({**out, "surprise": 1})
    bad = json.loads(json.dumps(out))
    bad["configurations"][0]["made_up_rate"] = {}
    with pytest.raises(ValidationError, match="made_up_rate"):
        ReportDocument.model_validate(bad)
    del bad["configurations"][0]["made_up_rate"], bad["run"]["enforcement"]
    with pytest.raises(ValidationError, match="enforcement"):
        ReportDocument.model_validate(bad)
    with pytest.raises(ValidationError, match="schema_version"):
        ReportDocument.model_validate({**out, "schema_version": 1})


def test_every_renderer_reads_the_model(doc: ReportDocument) -> None:
    changed = doc.model_copy(deep=True)
    changed.run.name = "renamed-by-the-test"
    changed.configurations[0].label = "relabelled-by-the-test"
    buf = io.StringIO()
    terminal.print_report(changed, Console(file=buf, width=200, color_system=None))
    for text in (buf.getvalue(), markdown.render(changed), html.render(changed), render.render_text(changed, "json")):
        assert "renamed-by-the-test" in text and "relabelled-by-the-test" in text
    assert "renamed-by-the-test" not in markdown.render(doc)  # the copy, not the original, was changed


def test_the_builder_returns_the_model(tmp_path: Path) -> None:
    path = tmp_path / "e.db"
    write_store(make_sweep(3, 1, seed=1), path).close()
    built = document.build(Store.open_existing(path))
    assert isinstance(built, ReportDocument) and built.run.trials_finished == sum(c.n for c in built.configurations)


def test_the_statistical_blocks_are_typed_and_forbid_unknown_keys(doc: ReportDocument) -> None:
    from orchestrator.report.blocks import Statistics
    from orchestrator.spec.analysis import ComparisonItem, Rate

    stats = doc.statistics
    assert isinstance(stats, Statistics) and isinstance(stats.comparisons.items[0], ComparisonItem)
    assert isinstance(doc.configurations[0].score_infra_as_failure, Rate)
    out = doc.to_dict()
    for path in (
        ("statistics", "comparisons", "items", 0, "score", "sign"),
        ("statistics", "mdd"),
        ("configurations", 0, "cost"),
        ("configurations", 0, "spread"),
        ("statistics", "tasks", 0),
    ):
        bad = json.loads(json.dumps(out))
        node = bad
        for key in path:
            node = node[key]
        node["made_up"] = 1
        with pytest.raises(ValidationError, match="made_up"):
            ReportDocument.model_validate(bad)


def test_what_other_parts_record_passes_through_as_written(doc: ReportDocument) -> None:
    """The experiment is read through a typed view (fields the report does not read are kept); the provenance is
    the run's own typed model (orchestrator/spec/provenance.py), whose stored rows set unknown keys aside in
    ``legacy`` when the store reads them (tests/engine/test_provenance.py), so a document never holds one."""
    out = doc.to_dict()
    again = ReportDocument.model_validate(out)
    assert again.to_dict() == out and out["provenance"]["schema_version"] == 1
    out["experiment"]["recorded_by_a_newer_headroom"] = {"kept": True}
    assert ReportDocument.model_validate(out).to_dict()["experiment"]["recorded_by_a_newer_headroom"] == {"kept": True}
    out["provenance"]["made_up"] = 1
    with pytest.raises(ValidationError, match="made_up"):
        ReportDocument.model_validate(out)


def test_the_comparison_is_a_typed_document(tmp_path: Path) -> None:
    from orchestrator.report import comparison
    from orchestrator.report.model import ComparisonDocument

    path = tmp_path / "c.db"
    write_store(make_sweep(4, 2, seed=7), path).close()
    store = Store.open_existing(path)
    typed = document.comparison_document(store, None, store, None)
    assert isinstance(typed, ComparisonDocument) and typed.schema_id == "headroom.comparison/2"
    as_json = document.comparison_document(
        store, None, store, None
    ).to_dict()  # what `headroom runs compare --format json` prints
    assert as_json == typed.to_dict() and ComparisonDocument.model_validate(as_json).to_dict() == as_json
    assert comparison.markdown(typed) == comparison.markdown(as_json)


def test_the_report_publishes_the_analysis_as_the_statistics_produced_it(tmp_path: Path) -> None:
    """``analyze`` returns the typed result; the document composes it without re-declaring or re-shaping a figure:
    its ``statistics`` is the analysis' JSON without the configurations, and each configuration is the analysis'
    block plus the enforcement the store recorded. A limit that did not bite replaces only the calibration."""
    from orchestrator.report import checks
    from orchestrator.report.blocks import Statistics
    from orchestrator.report.model import Configuration
    from orchestrator.spec.analysis import Analysis, Calibration
    from orchestrator.spec.provenance import read_stored
    from orchestrator.stats.analyze import analyze

    path = tmp_path / "p.db"
    write_store(make_sweep(12, 2, seed=3), path).close()
    store = Store.open_existing(path)
    analysis = analyze(store.rule_frame(store.run(None).run_id))
    assert isinstance(analysis, Analysis) and analysis.calibration is not None
    out = document.build(store).to_dict()
    expected = analysis.to_dict()
    configs = expected.pop("configs")
    published = dict(out["statistics"])
    assert published.pop("scoring_rules")["requested"]  # the one section the report adds beside the analysis
    assert published == expected
    assert [{k: v for k, v in c.items() if k not in ("enforcement", "qos_class")} for c in out["configurations"]] == (
        configs
    )
    # Composed from the produced models themselves, not from a dump of them.
    section = Statistics.of(analysis, None)
    assert section.comparisons is analysis.comparisons and section.mdd is analysis.mdd
    assert Configuration.of(analysis.configs[0], None).cost is analysis.configs[0].cost
    flagged = checks.build(
        read_stored({"canary": {"status": "flagged", "problems": ["1x-strict: the hog was not killed"]}}),
        store.rule_frame(store.run(None).run_id),
        backend="local",
        drift=analysis.drift,
    )
    refused = checks.calibration(flagged, analysis.calibration)
    assert isinstance(refused, Calibration) and refused.status == "refused" and refused.evidence == []
    assert checks.calibration(flagged, None) is None  # nothing computed (a labels axis): nothing to refuse
    store.close()
