"""The experiment's ``kubernetes:`` section: where and how trial Pods run.

The image override is the experiment's ``image`` and the cap on Pods in flight
is its ``concurrency``; everything cluster-specific lives here.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, field_validator
from pydantic.alias_generators import to_camel
from pydantic.json_schema import SkipJsonSchema

PullPolicy = Literal["Always", "IfNotPresent", "Never"]


class Toleration(BaseModel):
    """One of the trial pods' tolerations, as the API server spells it (``tolerationSeconds``; the Python client's
    ``toleration_seconds`` is taken too). Checked when the experiment is read: the pods are created under strict
    field validation, where a misspelt field would refuse every try of the run."""

    model_config = ConfigDict(extra="forbid", alias_generator=to_camel, populate_by_name=True)

    key: str | None = None
    operator: Literal["Exists", "Equal"] | None = None
    value: str | None = None
    effect: Literal["", "NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None
    toleration_seconds: int | None = None


#: validates the list as one, so an error names the toleration by its place (``tolerations.1.operatr``)
_TOLERATIONS = TypeAdapter(list[Toleration])


class KubernetesOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    namespace: str = Field(default="default", min_length=1, max_length=63, pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    kubeconfig: str | None = Field(
        default=None, description="path; default: $KUBECONFIG, ~/.kube/config, then in-cluster"
    )
    context: str | None = Field(default=None, description="kubeconfig context (default: the current one)")
    image_pull_policy: PullPolicy = "IfNotPresent"
    run_as_root: bool = Field(
        default=False,
        description="the task images must run as root: Pod Security 'baseline' instead of 'restricted' (recorded)",
    )
    run_as_user: int = Field(default=1000, ge=1, description="the agent's uid under 'restricted'")
    keep_pods: bool = Field(default=False, description="keep harvested pods for debugging (finalizer still removed)")
    queue: str | None = Field(default=None, description="Kueue LocalQueue: sets the kueue.x-k8s.io/queue-name label")
    pending_deadline_s: float = Field(
        default=600, gt=0, description="an unschedulable pod fails after this (a TriggeredScaleUp event restarts it)"
    )
    pull_deadline_s: float = Field(default=300, gt=0, description="an image that cannot be pulled fails after this")
    config_deadline_s: float = Field(default=60, gt=0, description="CreateContainerConfigError fails after this")
    api_retry_s: float = Field(default=120, gt=0, description="API errors are retried this long before api_error")
    node_selector: dict[str, str] = Field(default_factory=dict)
    tolerations: list[dict[str, Any]] = Field(default_factory=list)
    canary_max_nodes: int = Field(
        default=8,
        ge=1,
        le=1000,
        description="the enforcement canary checks at most this many candidate nodes (one of each node setup first)",
    )
    runtime_class_name: str | None = Field(default=None, description="e.g. gvisor or kata for stronger isolation")
    workdir: str | None = Field(default=None, description="override the image's WORKDIR (the agent's cwd)")
    pod_annotations: dict[str, str] = Field(default_factory=dict, description="added to every trial pod")
    pod_labels: dict[str, str] = Field(default_factory=dict, description="added to every trial pod")
    # Set by the controller from an Experiment's taskSource.image (never by hand, so not in the CRD):
    # trial pods then copy their task's files from this image instead of mounting ConfigMaps.
    # Excluded from dumps, so experiment digests stay what they were.
    task_set_image: SkipJsonSchema[str | None] = Field(default=None, exclude=True)
    warden_image: str | None = Field(
        default=None, description="image of the container holding the tests (default: the task image, which is cached)"
    )

    @field_validator("tolerations")
    @classmethod
    def _tolerations_as_the_api_spells_them(cls, value: list[dict[str, Any]]) -> list[dict[str, Any]]:
        # kept as plain dicts (what the pod body and the node matching read, and what digests were made of)
        return [t.model_dump(by_alias=True, exclude_none=True) for t in _TOLERATIONS.validate_python(value)]
