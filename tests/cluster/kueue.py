"""Real Kueue beside the test plane: its controller manager, CRDs and webhooks, on loopback.

Built from the Go module proxy by ``scripts/k8s/kueue.sh`` (the manager binary, the CRDs and
the webhook manifests of the same module). Started once per session by the ``kueue`` fixture,
only when a test asks for it:

* the CRDs are applied as the module ships them;
* the manager runs with the pod integration only, its webhook server on 127.0.0.1 with the
  plane's serving certificate (its SANs include 127.0.0.1; the plane's CA signs it);
* the module's webhook configurations are applied with each ``service`` reference turned into
  ``url: https://127.0.0.1:<port><path>``, keeping the pod and Kueue-object webhooks only (the
  other frameworks are not enabled), and the pod webhooks limited to namespaces labelled
  ``headroom.test/kueue=true``, so that the rest of the suite's pods never go through Kueue.

Teardown removes the webhook configurations first: a pod create must never wait on a stopped
webhook.
"""

from __future__ import annotations

import copy
import os
import subprocess
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client

from .plane import Cluster, Component, _http_ok, free_port, wait_for

REPO = Path(__file__).resolve().parents[2]
NAMESPACE_LABEL = "headroom.test/kueue"
SYSTEM_NAMESPACE = "kueue-system"
WEBHOOK_PREFIX = "headroom-test-kueue-"
_KEPT_PATHS = ("--v1-pod", "-kueue-x-k8s-io-")


class KueueMissing(RuntimeError):
    pass


def find_kueue() -> Path:
    """The folder scripts/k8s/kueue.sh built (bin/kueue, crds/, webhook/)."""
    out = subprocess.run([str(REPO / "scripts/k8s/kueue.sh"), "--print"], capture_output=True, text=True)
    root = Path(out.stdout.strip().splitlines()[0]) if out.stdout.strip() else None
    if out.returncode != 0 or root is None or not (root / "bin/kueue").is_file():
        raise KueueMissing(
            "Kueue is not built: run scripts/k8s/kueue.sh (Go module proxy; cached under ~/.cache/headroom/kueue)"
        )
    return root


def webhook_configurations(manifests: Path, port: int, ca_bundle: str) -> list[dict[str, Any]]:
    """The module's webhook configurations, pointed at the manager on loopback (see the module docstring)."""
    out = []
    for doc in yaml.safe_load_all(manifests.read_text()):
        if not doc:
            continue
        doc = copy.deepcopy(doc)
        doc["metadata"] = {"name": WEBHOOK_PREFIX + doc["kind"].lower()}
        kept = []
        for hook in doc.get("webhooks") or []:
            path = hook["clientConfig"]["service"]["path"]
            if not any(k in path for k in _KEPT_PATHS):
                continue
            hook["clientConfig"] = {"url": f"https://127.0.0.1:{port}{path}", "caBundle": ca_bundle}
            if path.endswith("--v1-pod"):
                hook["namespaceSelector"] = {"matchLabels": {NAMESPACE_LABEL: "true"}}
            kept.append(hook)
        doc["webhooks"] = kept
        out.append(doc)
    return out


class Kueue:
    def __init__(self, cluster: Cluster, root: Path) -> None:
        assert cluster.plane is not None and cluster.plane.pki is not None
        self.cluster, self.root = cluster, root
        self.workdir = cluster.plane.dir / "kueue"
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.webhook_port, self.probe_port, self.metrics_port = free_port(), free_port(), free_port()
        self.component: Component | None = None
        self._webhooks: list[dict[str, Any]] = []

    def start(self) -> None:
        api = self.cluster.core.api_client
        ext = client.ApiextensionsV1Api(api)
        names = []
        for crd_file in sorted((self.root / "crds").glob("*.yaml")):
            crd = yaml.safe_load(crd_file.read_text())
            names.append(crd["metadata"]["name"])
            try:
                ext.create_custom_resource_definition(crd)
            except client.ApiException as exc:
                if exc.status != 409:
                    raise

        def established(name: str) -> bool:
            st = ext.read_custom_resource_definition(name).status
            return any(c.type == "Established" and c.status == "True" for c in (st.conditions or []) if st)

        # Kueue sets up its indexes at start: its kinds must be served by then
        wait_for(lambda: all(established(n) for n in names), 60, "Kueue's CRDs to be established")
        try:
            self.cluster.core.create_namespace({"metadata": {"name": SYSTEM_NAMESPACE}})
        except client.ApiException as exc:
            if exc.status != 409:
                raise
        pki = self.cluster.plane.pki  # type: ignore[union-attr]
        certs = self.workdir / "certs"
        certs.mkdir(exist_ok=True)
        (certs / "tls.crt").write_bytes(pki.apiserver[0].read_bytes())
        (certs / "tls.key").write_bytes(pki.apiserver[1].read_bytes())
        config = {
            "apiVersion": "config.kueue.x-k8s.io/v1beta2",
            "kind": "Configuration",
            "namespace": SYSTEM_NAMESPACE,
            "health": {"healthProbeBindAddress": f"127.0.0.1:{self.probe_port}"},
            "metrics": {"bindAddress": f"127.0.0.1:{self.metrics_port}"},
            "webhook": {"host": "127.0.0.1", "port": self.webhook_port, "certDir": str(certs)},
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {"enable": False},
            "managedJobsNamespaceSelector": {"matchLabels": {NAMESPACE_LABEL: "true"}},
            "integrations": {"frameworks": ["pod"]},
        }
        cfg = self.workdir / "config.yaml"
        cfg.write_text(yaml.safe_dump(config))
        # The visibility server (on-demand queue listings; it wants certificates under /visibility) is off:
        # nothing here reads it. Kueue reads its metrics certificate from a fixed path (/etc/kueue/metrics/certs) when it does
        # not manage certificates itself. It gets one in a private mount namespace: /etc seen through
        # an overlay whose upper layer (a tmpfs) holds it, so the host's /etc is never written.
        layer = self.workdir / "etc-layer"
        layer.mkdir(exist_ok=True)
        script = (
            'set -e; mount -t tmpfs tmpfs "$1"; mkdir -p "$1/u/kueue/metrics/certs" "$1/w"; '
            'cp "$2/tls.crt" "$2/tls.key" "$1/u/kueue/metrics/certs/"; '
            'mount -t overlay overlay -o "lowerdir=/etc,upperdir=$1/u,workdir=$1/w" /etc; '
            'exec "$3" --config="$4" --feature-gates=VisibilityOnDemand=false'
        )
        self.component = Component(
            "kueue",
            [
                "unshare",
                "--mount",
                "--propagation",
                "private",
                "sh",
                "-c",
                script,
                "kueue",
                str(layer),
                str(certs),
                str(self.root / "bin/kueue"),
                str(cfg),
            ],
            self.workdir / "kueue.log",
        )
        self.component.start(env={**os.environ, "KUBECONFIG": str(self.cluster.kubeconfig)})
        wait_for(lambda: self._ready(), 120, f"Kueue to be ready (log: {self.workdir / 'kueue.log'})", interval=0.5)
        import base64

        ca = base64.b64encode(pki.ca_crt.read_bytes()).decode()
        adm = client.AdmissionregistrationV1Api(api)
        for doc in webhook_configurations(self.root / "webhook/manifests.yaml", self.webhook_port, ca):
            create = (
                adm.create_mutating_webhook_configuration
                if doc["kind"] == "MutatingWebhookConfiguration"
                else adm.create_validating_webhook_configuration
            )
            create(doc)
            self._webhooks.append(doc)

    def _ready(self) -> bool:
        if self.component is None or not self.component.alive():
            raise RuntimeError(f"Kueue exited; log tail:\n{(self.workdir / 'kueue.log').read_text()[-3000:]}")
        return _http_ok(f"http://127.0.0.1:{self.probe_port}/readyz")

    def stop(self) -> None:
        adm = client.AdmissionregistrationV1Api(self.cluster.core.api_client)
        for doc in self._webhooks:
            delete = (
                adm.delete_mutating_webhook_configuration
                if doc["kind"] == "MutatingWebhookConfiguration"
                else adm.delete_validating_webhook_configuration
            )
            try:
                delete(doc["metadata"]["name"])
            except client.ApiException:
                pass
        self._webhooks.clear()
        if self.component is not None:
            self.component.stop()
