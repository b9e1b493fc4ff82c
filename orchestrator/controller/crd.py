"""Generate the CustomResourceDefinitions from the pydantic models.

Pydantic writes JSON Schema (2020-12 flavoured: ``$ref``/``$defs``, ``anyOf`` with
``null``, numeric ``exclusiveMinimum``). A CRD needs a *structural* OpenAPI v3 schema:
everything inlined, a type on every node, ``nullable`` instead of a null branch,
``x-kubernetes-preserve-unknown-fields`` where free-form maps are allowed. This module
does that translation and nothing else, so the committed CRDs can be regenerated and a
test keeps them in step with the models::

    python -m orchestrator.controller.crd --write   # helm/headroom/crds and manifests/crds
"""

from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel

from orchestrator.controller.resources import (
    EXPERIMENT_PLURAL,
    GROUP,
    TRIAL_PLURAL,
    VERSION,
    ExperimentResourceSpec,
    ExperimentStatus,
    TrialSpec,
    TrialStatus,
)
from orchestrator.errors import SchemaError

REPO = Path(__file__).resolve().parents[2]
CRD_DIRS = (REPO / "helm" / "headroom" / "crds", REPO / "manifests" / "crds")

# Keywords a CRD schema accepts (apiextensions JSONSchemaProps), minus the ones we drop.
_DROP = {"title", "examples", "$schema"}


def structural_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The model's validation schema as a structural OpenAPI v3 schema."""
    raw = model.model_json_schema(by_alias=True, mode="validation")
    defs = raw.pop("$defs", {})
    return _convert(raw, defs, path=model.__name__)


def _resolve(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    ref = node.get("$ref")
    if ref is None:
        return node
    target = copy.deepcopy(defs[ref.rsplit("/", 1)[-1]])
    rest = {k: v for k, v in node.items() if k != "$ref"}
    return {**target, **rest}  # a description next to the $ref wins


def _convert(node: dict[str, Any], defs: dict[str, Any], path: str) -> dict[str, Any]:
    node = _resolve(node, defs)
    if "allOf" in node:  # pydantic wraps a $ref to carry a description
        parts = node.pop("allOf")
        if len(parts) != 1:
            raise SchemaError(f"{path}: allOf with {len(parts)} parts")
        node = {**_resolve(parts[0], defs), **node}
    out: dict[str, Any] = {}
    nullable = False
    branches = node.pop("anyOf", None) or node.pop("oneOf", None)
    if branches is not None:
        non_null = [b for b in branches if b.get("type") != "null"]
        nullable = len(non_null) < len(branches)
        if len(non_null) == 1:
            node = {**_resolve(non_null[0], defs), **{k: v for k, v in node.items()}}
        elif {b.get("type") for b in non_null} == {"integer", "number"}:
            node = {**node, "type": "number"}
        elif {b.get("type") for b in non_null} == {"integer", "string"}:
            node = {k: v for k, v in node.items() if k != "type"}
            out["x-kubernetes-int-or-string"] = True
        else:
            raise SchemaError(f"{path}: a union of {[b.get('type') for b in non_null]} has no structural form")
        node = _resolve(node, defs)
    for key, value in node.items():
        if key in _DROP:
            continue
        if key == "default":
            if value is not None:
                out["default"] = value
        elif key == "const":
            out["enum"] = [value]
        elif key in ("exclusiveMinimum", "exclusiveMaximum") and not isinstance(value, bool):
            bound = "minimum" if key == "exclusiveMinimum" else "maximum"
            out[bound] = value
            out[key] = True
        elif key == "properties":
            out["properties"] = {name: _convert(sub, defs, f"{path}.{name}") for name, sub in value.items()}
        elif key == "items":
            out["items"] = _convert(value, defs, f"{path}[]")
        elif key == "additionalProperties":
            if value is True or value == {}:
                out["x-kubernetes-preserve-unknown-fields"] = True
            elif isinstance(value, dict):
                out["additionalProperties"] = _convert(value, defs, f"{path}{{}}")
            # False: the API server prunes unknown fields anyway
        elif key == "type" and value == "null":
            raise SchemaError(f"{path}: a field that can only be null")
        else:
            out[key] = value
    if out.get("type") == "object" and "properties" in out and "additionalProperties" in out:
        # A structural schema cannot have both: keep the named fields, allow the rest.
        del out["additionalProperties"]
        out["x-kubernetes-preserve-unknown-fields"] = True
    if out.get("type") == "object" and not {"properties", "additionalProperties"} & out.keys():
        out["x-kubernetes-preserve-unknown-fields"] = True
    if "enum" in out and "type" not in out:
        kinds = {type(v).__name__ for v in out["enum"]}
        out["type"] = {"str": "string", "int": "integer", "float": "number", "bool": "boolean"}[kinds.pop()]
    if (
        "type" not in out
        and not out.get("x-kubernetes-int-or-string")
        and not out.get("x-kubernetes-preserve-unknown-fields")
    ):
        raise SchemaError(f"{path}: no type")
    if nullable:
        out["nullable"] = True
    return out


def _crd(
    kind: str,
    plural: str,
    short: list[str],
    spec: dict[str, Any],
    status: dict[str, Any],
    columns: list[dict[str, Any]],
    description: str,
) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{GROUP}", "labels": {"app.kubernetes.io/part-of": "headroom"}},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {
                "kind": kind,
                "listKind": f"{kind}List",
                "plural": plural,
                "singular": kind.lower(),
                "shortNames": short,
                "categories": ["headroom"],
            },
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": columns,
                    "schema": {
                        "openAPIV3Schema": {
                            "description": description,
                            "type": "object",
                            "required": ["spec"],
                            "properties": {
                                "apiVersion": {"type": "string"},
                                "kind": {"type": "string"},
                                "metadata": {"type": "object"},
                                "spec": spec,
                                "status": status,
                            },
                        }
                    },
                }
            ],
        },
    }


def experiment_crd() -> dict[str, Any]:
    spec = structural_schema(ExperimentResourceSpec)
    # The plan is derived from the spec: changing it under a running sweep would orphan Trials.
    spec["x-kubernetes-validations"] = [
        {"rule": "self == oldSelf", "message": "an Experiment's spec cannot change; create a new Experiment"}
    ]
    return _crd(
        "Experiment",
        EXPERIMENT_PLURAL,
        ["hexp"],
        spec,
        structural_schema(ExperimentStatus),
        [
            {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
            {"name": "Progress", "type": "string", "jsonPath": ".status.progress"},
            {"name": "In-Flight", "type": "integer", "jsonPath": ".status.inFlight"},
            {
                "name": "Infra-Errors",
                "type": "string",
                "jsonPath": ".status.infraErrors",
                "description": "infra-error rate per configuration (resource arm)",
            },
            {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
        ],
        "A resource sweep: tasks x configurations x attempts, run as one Pod per trial try.",
    )


def trial_crd() -> dict[str, Any]:
    return _crd(
        "Trial",
        TRIAL_PLURAL,
        ["htrial"],
        structural_schema(TrialSpec),
        structural_schema(TrialStatus),
        [
            {"name": "Task", "type": "string", "jsonPath": ".spec.task"},
            {"name": "Configuration", "type": "string", "jsonPath": ".spec.configuration.label"},
            {"name": "Attempt", "type": "integer", "jsonPath": ".spec.attempt"},
            {"name": "Try", "type": "integer", "jsonPath": ".spec.try"},
            {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
            {"name": "Outcome", "type": "string", "jsonPath": ".status.outcome"},
            {"name": "Reason", "type": "string", "jsonPath": ".status.reason"},
            {"name": "Node", "type": "string", "jsonPath": ".status.node", "priority": 1},
            {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
        ],
        "One try of one planned trial (task x configuration x attempt); its status is the result.",
    )


class _Dumper(yaml.SafeDumper):
    """Quotes strings that YAML 1.1 readers (the Go YAML behind kubectl and helm) take for booleans."""


_YAML11_BOOLS = {"y", "n", "yes", "no", "on", "off", "true", "false"}


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "'" if value.lower() in _YAML11_BOOLS else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _represent_str)


def dump(doc: dict[str, Any]) -> str:
    return yaml.dump(doc, Dumper=_Dumper, sort_keys=False)


def rendered() -> dict[str, str]:
    """File name -> YAML text of every CRD."""
    header = (
        "# Generated by `python -m orchestrator.controller.crd --write` from orchestrator/controller/resources.py.\n"
    )
    return {
        f"{GROUP}_{EXPERIMENT_PLURAL}.yaml": header + dump(experiment_crd()),
        f"{GROUP}_{TRIAL_PLURAL}.yaml": header + dump(trial_crd()),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="write the CRDs into the chart and manifests/")
    args = parser.parse_args(argv)
    files = rendered()
    if not args.write:
        sys.stdout.write("---\n".join(files.values()))
        return 0
    for folder in CRD_DIRS:
        folder.mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            (folder / name).write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
