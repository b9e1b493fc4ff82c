"""Task sets named as an image (``taskSource.image``): the controller learns them without pulling.

The controller cannot (and must not need to) pull images, so it asks the cluster: a short
*catalog pod* runs the task-set image under Pod Security "restricted" (non-root, read-only
root filesystem, no capabilities, no service-account token) and prints
``/headroom-tasks/catalog.json`` (:mod:`orchestrator.tasks.image`) to its log. The controller
reads the log, keeps the catalog in an immutable ConfigMap named after the image reference
(``headroom-catalog-<sha256(ref)[:20]>``), and deletes the pod. Every later Experiment that
names the same reference, and a restarted controller, reads that ConfigMap instead: the
catalog pod runs once per reference. Crash-only: the pod and the ConfigMap are named by
the reference, so a controller killed at any point finds them again and carries on.

From the catalog it writes each task's metadata (``task.toml``, the instruction, a stand-in
``tests/test.sh``) into a scratch folder, loads it with the engine's loader (same checks,
same selection of ``spec.tasks``) and then gives each task the digest the catalog recorded
(the loader's digest of the real folder when the image was built). Trial pods copy the
real files from the image with an init container (see :mod:`orchestrator.backends.kubernetes.pod`).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

from orchestrator.agentio import safejson
from orchestrator.backends.kubernetes.pod import MANAGED_BY
from orchestrator.errors import CatalogPending, SpecError
from orchestrator.kube.api import ApiException, client
from orchestrator.kube.raw import CoreJson
from orchestrator.spec.kubernetes import KubernetesOptions
from orchestrator.spec.task import Task
from orchestrator.tasks import needs
from orchestrator.tasks.image import CATALOG, FORMAT, TESTS_MANIFEST_FILE
from orchestrator.tasks.loader import load_tasks

CATALOG_KEY = "catalog.json"
LABEL_CATALOG = "headroom.dev/task-catalog"
ANNOTATION_IMAGE = "headroom.dev/task-set-image"
ANNOTATION_IMAGE_ID = "headroom.dev/task-set-image-id"
CONTAINER = "catalog"
#: Image pull or start failures that will not go away by waiting.
_STUCK = {
    "ErrImageNeverPull",
    "InvalidImageName",
    "ImagePullBackOff",
    "ErrImagePull",
    "CreateContainerConfigError",
    "CreateContainerError",
}
_RESOURCES = {"cpu": "50m", "memory": "32Mi"}


def ref_key(image: str) -> str:
    return hashlib.sha256(image.encode()).hexdigest()[:20]


def catalog_name(image: str) -> str:
    return f"headroom-catalog-{ref_key(image)}"


def catalog_pod(image: str, options: KubernetesOptions) -> dict[str, Any]:
    """The pod that prints the image's catalog; placed like the Experiment's trial pods (its nodes pull the image)."""
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "activeDeadlineSeconds": 600,
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "terminationGracePeriodSeconds": 1,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": 65532,
            "runAsGroup": 65532,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": [
            {
                "name": CONTAINER,
                "image": image,
                "imagePullPolicy": options.image_pull_policy,
                "command": ["cat", CATALOG],
                "resources": {"requests": dict(_RESOURCES), "limits": dict(_RESOURCES)},
                "securityContext": {
                    "runAsNonRoot": True,
                    "allowPrivilegeEscalation": False,
                    "readOnlyRootFilesystem": True,
                    "capabilities": {"drop": ["ALL"]},
                },
            }
        ],
    }
    if options.node_selector:
        spec["nodeSelector"] = dict(options.node_selector)
    if options.tolerations:
        spec["tolerations"] = list(options.tolerations)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": catalog_name(image),
            "labels": {**MANAGED_BY, LABEL_CATALOG: ref_key(image)},
            "annotations": {ANNOTATION_IMAGE: image},
        },
        "spec": spec,
    }


def parse(text: str, image: str) -> dict[str, Any]:
    try:
        cat = safejson.loads(text, max_bytes=max(len(text), safejson.MAX_BYTES))  # the image's own output
        ok = isinstance(cat, dict) and cat.get("format") == FORMAT and isinstance(cat.get("tasks"), dict)
    except ValueError:
        ok = False
    if not ok:
        raise SpecError(
            f"image {image} has no headroom task catalog at {CATALOG} (build it with "
            "`headroom tasks image DIR --tag REF`)",
            field="task_source.image",
        )
    return cat


def _delete_pod(core: client.CoreV1Api, namespace: str, name: str) -> None:
    try:
        core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)
    except ApiException as exc:
        if exc.status != 404:
            raise


def cached_catalog(core: client.CoreV1Api, namespace: str, image: str) -> dict[str, Any]:
    """The catalog the controller cached for ``image`` (SpecError when it has not read it yet)."""
    try:
        cm = CoreJson(core.api_client).read_config_map(namespace, catalog_name(image))
    except ApiException as exc:
        if exc.status == 404:
            raise SpecError(
                f"no cached task catalog of image {image} in {namespace} (the controller writes "
                f"ConfigMap {catalog_name(image)} when it first plans an Experiment over it)",
                field="task_source.image",
            ) from None
        raise
    return parse((cm.get("data") or {}).get(CATALOG_KEY, ""), image)


def read_catalog(
    core: client.CoreV1Api, namespace: str, image: str, options: KubernetesOptions, on_read: Any = None
) -> dict[str, Any]:
    """The image's catalog: from its cache ConfigMap, else from the catalog pod (created when missing).

    Raises :class:`CatalogPending` while the pod runs, and SpecError when the image cannot
    run or holds no catalog (the pod is deleted, so the next look tries again).
    """
    name = catalog_name(image)
    try:
        # JSON (kube/raw.py): once the catalog is cached, planning over the image never loads the typed core API.
        cm = CoreJson(core.api_client).read_config_map(namespace, name)
        return parse((cm.get("data") or {}).get(CATALOG_KEY, ""), image)
    except ApiException as exc:
        if exc.status != 404:
            raise
    try:
        pod = core.read_namespaced_pod(name, namespace)
    except ApiException as exc:
        if exc.status != 404:
            raise
        try:
            core.create_namespaced_pod(namespace, catalog_pod(image, options))  # type: ignore[arg-type]  # the client serialises a plain dict body
        except ApiException as create_exc:
            if create_exc.status != 409:
                raise
        raise CatalogPending(name) from None
    phase = pod.status.phase if pod.status else None
    statuses = (pod.status.container_statuses or []) if pod.status else []
    if phase == "Succeeded":
        text = core.read_namespaced_pod_log(name, namespace, container=CONTAINER)
        try:
            cat = parse(text, image)
        except SpecError:
            _delete_pod(core, namespace, name)
            raise
        image_id = statuses[0].image_id if statuses else ""
        body = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": name,
                "labels": {**MANAGED_BY, LABEL_CATALOG: ref_key(image)},
                "annotations": {
                    ANNOTATION_IMAGE: image,
                    ANNOTATION_IMAGE_ID: image_id or "",
                    "headroom.dev/task-set-digest": str(cat.get("set_digest", "")),
                },
            },
            "immutable": True,
            "data": {CATALOG_KEY: json.dumps(cat, sort_keys=True)},
        }
        try:
            core.create_namespaced_config_map(namespace, body)  # type: ignore[arg-type]  # the client serialises a plain dict body
        except ApiException as exc:
            if exc.status == 422:
                _delete_pod(core, namespace, name)
                raise SpecError(
                    f"the catalog of {image} does not fit in a ConfigMap ({len(text) // 1024} KiB)",
                    field="task_source.image",
                ) from None
            if exc.status != 409:
                raise
        if on_read is not None:
            on_read(image, image_id, len(cat["tasks"]))
        _delete_pod(core, namespace, name)
        return cat
    stuck = [
        s.state.waiting.reason for s in statuses if s.state and s.state.waiting and s.state.waiting.reason in _STUCK
    ]
    stuck += [
        f"Unschedulable: {c.message}"
        for c in (pod.status.conditions or [])  # type: ignore[union-attr]  # a pod read back has a status
        if pod.status and c.type == "PodScheduled" and c.status == "False" and c.reason == "Unschedulable"
    ]
    if phase == "Failed" or stuck:
        detail = stuck[0] if stuck else (pod.status.reason or pod.status.message or "failed")  # type: ignore[union-attr]  # a pod read back from the server has a status
        if phase == "Failed":
            try:
                detail += ": " + core.read_namespaced_pod_log(name, namespace, container=CONTAINER)[-300:].strip()
            except ApiException:
                pass
        _delete_pod(core, namespace, name)
        raise SpecError(f"cannot read the task catalog of image {image} ({detail})", field="task_source.image")
    raise CatalogPending(name)


def write_metadata(cat: dict[str, Any], root: Path) -> None:
    """What the loader reads, per task: task.toml, instruction.md, a stand-in tests/test.sh, the tests' manifest."""
    if root.is_dir():
        return
    root.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{root.name}-", dir=root.parent))
    try:
        for task_id, entry in cat["tasks"].items():
            if "/" in task_id or task_id in ("", ".", ".."):
                raise SpecError(f"the catalog names a task {task_id!r}", field="task_source.image")
            d = tmp / task_id
            d.mkdir()
            (d / "task.toml").write_text(entry["task_toml"], encoding="utf-8")
            (d / "instruction.md").write_text(entry["instruction"], encoding="utf-8")
            if entry.get("has_tests", True):
                (d / "tests").mkdir()
                (d / "tests" / "test.sh").write_text("# delivered by the task-set image\n")
            (d / TESTS_MANIFEST_FILE).write_text(entry.get("tests_manifest", ""))
        tmp.rename(root)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def load_set(
    cat: dict[str, Any], image: str, scratch: Path, select: list[str] | None = None
) -> tuple[list[Task], Path]:
    """The tasks of a task-set image, with the digests and built images its catalog recorded."""
    content = hashlib.sha256(json.dumps(cat, sort_keys=True).encode()).hexdigest()[:12]
    root = scratch / f"image-{ref_key(image)}-{content}"
    write_metadata(cat, root)
    tasks = load_tasks(root, select)
    out = []
    for t in tasks:
        entry = cat["tasks"][t.id]
        if not entry.get("has_tests", True):
            raise SpecError(
                f"golden task {t.id!r} has no tests/: the kubernetes backend needs tests/test.sh", field="tests/test.sh"
            )
        if "needs" in entry:  # what its files need (the faithful check); an older catalog: task.toml's only
            needs.remember(t.path, entry["needs"])
        update: dict[str, Any] = {"digest": entry["digest"]}
        built = entry.get("built_image")
        if built and not t.spec.environment.docker_image:
            env = t.spec.environment.model_copy(update={"docker_image": built})
            update["spec"] = t.spec.model_copy(update={"environment": env})
        out.append(t.model_copy(update=update))
    return out, root
