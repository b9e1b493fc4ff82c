"""The CRDs are generated from the pydantic models, and the committed files match the models."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel, Field

from orchestrator.controller import crd
from orchestrator.controller.resources import ExperimentResourceSpec
from orchestrator.errors import SchemaError
from orchestrator.spec.experiment import Experiment

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("folder", crd.CRD_DIRS, ids=lambda p: str(p.relative_to(REPO)))
def test_committed_crds_match_the_models(folder: Path) -> None:
    for name, text in crd.rendered().items():
        committed = folder / name
        assert committed.is_file(), f"{committed} missing: run python -m orchestrator.controller.crd --write"
        assert committed.read_text() == text, (
            f"{committed} is out of step with orchestrator/controller/resources.py or the Experiment model: "
            "run python -m orchestrator.controller.crd --write"
        )


def _walk(node: dict[str, Any], path: str = "") -> list[tuple[str, dict[str, Any]]]:
    out = [(path, node)]
    for name, sub in (node.get("properties") or {}).items():
        out += _walk(sub, f"{path}.{name}")
    if isinstance(node.get("items"), dict):
        out += _walk(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        out += _walk(node["additionalProperties"], f"{path}{{}}")
    return out


@pytest.mark.parametrize("make", [crd.experiment_crd, crd.trial_crd])
def test_schemas_are_structural(make: Any) -> None:
    schema = make()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    for path, node in _walk(schema):
        assert not {"$ref", "$defs", "anyOf", "oneOf", "allOf", "const", "title"} & node.keys(), path
        assert (
            "type" in node or node.get("x-kubernetes-int-or-string") or node.get("x-kubernetes-preserve-unknown-fields")
        ), f"{path} has no type"
        assert not ("properties" in node and "additionalProperties" in node), path
        if "exclusiveMinimum" in node:
            assert node["exclusiveMinimum"] is True and "minimum" in node, path


def test_every_experiment_field_reaches_the_crd_except_the_host_path() -> None:
    spec = crd.experiment_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    fields = set(Experiment.model_fields) - {"tasks_dir"}
    assert fields <= set(spec["properties"]), fields - set(spec["properties"])
    assert "tasks_dir" not in spec["properties"]  # a host path: pruned by the API server
    assert spec["required"] == ["task_source"]
    conf = spec["properties"]["configurations"]["items"]["properties"]["limit_multiplier"]
    assert conf["nullable"] is True and conf["type"] == "number"  # null = unbounded
    assert spec["properties"]["attempts"]["minimum"] == 1
    assert "oom_killed" in spec["properties"]["retry"]["properties"]["reasons"]["items"]["enum"]


def test_a_new_model_field_changes_the_schema() -> None:
    class Grown(ExperimentResourceSpec):
        priority: int = Field(default=0, ge=0, le=9, description="queue priority")

    grown = crd.structural_schema(Grown)["properties"]["priority"]
    assert grown == {"default": 0, "description": "queue priority", "maximum": 9, "minimum": 0, "type": "integer"}


def test_unions_without_a_structural_form_are_refused() -> None:
    class Bad(BaseModel):
        value: int | list[str]

    with pytest.raises(SchemaError, match="value"):
        crd.structural_schema(Bad)


def test_printer_columns() -> None:
    cols = {c["name"]: c["jsonPath"] for c in crd.experiment_crd()["spec"]["versions"][0]["additionalPrinterColumns"]}
    assert cols["Progress"] == ".status.progress"
    assert cols["Infra-Errors"] == ".status.infraErrors"
    assert cols["Age"] == ".metadata.creationTimestamp"


def test_rendered_files_parse_as_one_document_each() -> None:
    for text in crd.rendered().values():
        docs = [d for d in yaml.safe_load_all(text) if d]
        assert len(docs) == 1 and docs[0]["kind"] == "CustomResourceDefinition"


def test_yaml_11_booleans_are_quoted() -> None:
    # Go's YAML reader (helm, kubectl) takes a bare n or yes for a boolean; the Wilson interval's n must stay a name.
    text = crd.rendered()["headroom.dev_experiments.yaml"]
    assert "- 'n'" in text and "\n                      - n\n" not in text


def test_install_bundle_carries_the_current_crds() -> None:
    # The bundle is rendered by helm (checked in tests/cluster); this catches a stale bundle without a cluster.
    bundle = (REPO / "manifests" / "install.yaml").read_text()
    for name, text in crd.rendered().items():
        source = f"# Source: headroom/crds/{name}\n"
        assert source in bundle, f"manifests/install.yaml lacks {name}"
        assert source + text in bundle, (
            f"manifests/install.yaml carries a stale {name}: "
            "helm template headroom helm/headroom --namespace headroom --include-crds"
        )
