"""A real Kubernetes control plane for the test suite, on loopback only.

``LocalPlane`` starts etcd, kube-apiserver (Node,RBAC authorization, PodSecurity
admission, service-account signing keys made at startup), kube-scheduler,
kube-controller-manager and kwok from the binaries that ``scripts/k8s/build.sh``
builds from the Go module proxy, writes a kubeconfig and creates fake (kwok-managed)
nodes. ``Cluster`` is what tests use; it is the same whether the plane is local or an
existing cluster reached through ``HEADROOM_TEST_KUBECONFIG``.

The kwok Stages in ``manifests/kwok`` decide how pods on fake nodes end, driven by the
annotation ``headroom.test/outcome`` (see docs/kubernetes-test-plane.md).
"""

from __future__ import annotations

import atexit
import ctypes
import datetime as dt
import ipaddress
import os
import random
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
STAGES_DIR = REPO / "manifests" / "kwok"
ENV_SH = REPO / "scripts" / "k8s" / "env.sh"
BUILD_SH = "scripts/k8s/build.sh"

PLANE_COMPONENTS = ("etcd", "kube-apiserver", "kube-scheduler", "kube-controller-manager", "kwok")
ALL_COMPONENTS = (*PLANE_COMPONENTS, "helm", "kubelet")  # kubelet: the opt-in real node

# Contract with manifests/kwok (documented in docs/kubernetes-test-plane.md).
FAKE_NODE_ANNOTATION = "kwok.x-k8s.io/node"
FAKE_NODE_VALUE = "fake"
FAKE_NODE_LABELS = {"type": "kwok", "headroom.test/fake-node": "true"}
FAKE_NODE_TAINT = {"key": FAKE_NODE_ANNOTATION, "value": FAKE_NODE_VALUE, "effect": "NoSchedule"}
FAKE_NODE_TOLERATION = {
    "key": FAKE_NODE_ANNOTATION,
    "operator": "Exists",
    "effect": "NoSchedule",
}
OUTCOME_ANNOTATION = "headroom.test/outcome"
OUTCOME_AFTER_ANNOTATION = "headroom.test/outcome-after"
OUTCOME_CONTAINER_ANNOTATION = "headroom.test/container"
OUTCOME_MESSAGE_ANNOTATION = "headroom.test/message"

SERVICE_CIDR = "10.96.0.0/16"
POD_CIDR = "10.244.0.0/16"


class PlaneError(RuntimeError):
    """The test control plane could not be built, started or reached."""


class MissingBinaries(PlaneError):
    """The binaries from scripts/k8s/build.sh are not there."""


# ---------------------------------------------------------------------------------------
# binaries


def find_bin_dir() -> Path:
    """The folder holding the pinned binaries, or raise MissingBinaries.

    ``HEADROOM_K8S_BIN`` wins; otherwise ``scripts/k8s/env.sh`` computes the cache folder
    from the pins (independent of the checkout, so a fresh clone on a warm machine works).
    """
    env_bin = os.environ.get("HEADROOM_K8S_BIN")
    if env_bin:
        bin_dir = Path(env_bin)
    else:
        proc = subprocess.run(["bash", str(ENV_SH)], capture_output=True, text=True, check=False, timeout=30)
        bin_dir = Path(proc.stdout.strip()) if proc.stdout.strip() else REPO / ".cache/k8s/bin"
    missing = [c for c in ALL_COMPONENTS if not os.access(bin_dir / c, os.X_OK)]
    if missing:
        raise MissingBinaries(
            f"Kubernetes test-plane binaries missing in {bin_dir}: {', '.join(missing)}.\n"
            f"Build them (from the Go module proxy, cached per pin) with:  {BUILD_SH}\n"
            "or point the tests at an existing cluster with HEADROOM_TEST_KUBECONFIG=<path>,\n"
            "or skip the cluster tests with HEADROOM_SKIP_CLUSTER=1."
        )
    return bin_dir


# ---------------------------------------------------------------------------------------
# small helpers


#: The ports this process has handed out: never twice, even once their server has gone.
_HANDED: set[int] = set()
_PICK = random.SystemRandom()


def _ephemeral_low() -> int:
    """The first port of the kernel's range for outgoing connections (32768 where it cannot be read)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now, for a server started next, below the kernel's range for outgoing
    connections. A port from that range (what binding to port 0 gives) can be taken by any client's connection in
    the moment before the server binds it: a suite run lost a plane that way (etcd: "bind: address already in
    use" on 55345), where client connections never take a port below the range."""
    top = _ephemeral_low()
    if top > 10_100:
        for _ in range(200):
            port = _PICK.randrange(10_000, top)
            if port in _HANDED:
                continue
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    continue
            _HANDED.add(port)
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:  # a machine whose range starts low: the kernel's
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    _HANDED.add(port)
    return port


def _die_with_parent() -> None:  # runs in the child between fork and exec
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: no orphans if pytest is killed
    except OSError:
        pass


def tail(path: Path, lines: int = 40) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return "\n".join(text[-lines:])


def write_yaml(path: Path, docs: Iterable[Mapping[str, Any]]) -> None:
    path.write_text(yaml.safe_dump_all(list(docs), sort_keys=False))


# ---------------------------------------------------------------------------------------
# PKI (cryptography): one CA, apiserver serving cert, client certs, SA signing key


@dataclass
class Pki:
    root: Path

    def __post_init__(self) -> None:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

        self.root.mkdir(parents=True, exist_ok=True)
        now = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)
        later = now + dt.timedelta(days=2)

        def save_key(key: ec.EllipticCurvePrivateKey, name: str) -> Path:
            p = self.root / name
            p.write_bytes(
                key.private_bytes(
                    serialization.Encoding.PEM,
                    serialization.PrivateFormat.PKCS8,
                    serialization.NoEncryption(),
                )
            )
            p.chmod(0o600)
            return p

        def save_cert(cert: x509.Certificate, name: str) -> Path:
            p = self.root / name
            p.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
            return p

        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "headroom-test-ca")])
        ca_cert = (
            x509.CertificateBuilder()
            .subject_name(ca_name)
            .issuer_name(ca_name)
            .public_key(ca_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now)
            .not_valid_after(later)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    key_cert_sign=True,
                    crl_sign=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .sign(ca_key, hashes.SHA256())
        )
        self.ca_key = save_key(ca_key, "ca.key")
        self.ca_crt = save_cert(ca_cert, "ca.crt")

        def issue(name: str, cn: str, orgs: tuple[str, ...], server: bool) -> tuple[Path, Path]:
            key = ec.generate_private_key(ec.SECP256R1())
            attrs = [x509.NameAttribute(NameOID.COMMON_NAME, cn)]
            attrs += [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in orgs]
            b = (
                x509.CertificateBuilder()
                .subject_name(x509.Name(attrs))
                .issuer_name(ca_name)
                .public_key(key.public_key())
                .serial_number(x509.random_serial_number())
                .not_valid_before(now)
                .not_valid_after(later)
                .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                .add_extension(
                    x509.ExtendedKeyUsage(
                        [ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH]
                    ),
                    critical=False,
                )
            )
            if server:
                b = b.add_extension(
                    x509.SubjectAlternativeName(
                        [
                            x509.DNSName("localhost"),
                            x509.DNSName("kubernetes"),
                            x509.DNSName("kubernetes.default"),
                            x509.DNSName("kubernetes.default.svc"),
                            x509.DNSName("kubernetes.default.svc.cluster.local"),
                            x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                            x509.IPAddress(ipaddress.ip_address("10.96.0.1")),
                        ]
                    ),
                    critical=False,
                )
            cert = b.sign(ca_key, hashes.SHA256())
            return save_cert(cert, f"{name}.crt"), save_key(key, f"{name}.key")

        self.apiserver = issue("apiserver", "kube-apiserver", (), server=True)
        self.admin = issue("admin", "headroom-test-admin", ("system:masters",), server=False)
        self.scheduler = issue("scheduler", "system:kube-scheduler", (), server=False)
        self.controller_manager = issue("controller-manager", "system:kube-controller-manager", (), server=False)
        self.kwok = issue("kwok", "kwok-controller", ("system:masters",), server=False)
        # the apiserver's identity towards kubelets (logs, exec): a real node accepts it
        self.kubelet_client = issue(
            "apiserver-kubelet-client",
            "kube-apiserver-kubelet-client",
            ("system:masters",),
            server=False,
        )

        sa_key = ec.generate_private_key(ec.SECP256R1())
        self.sa_key = save_key(sa_key, "sa.key")
        self.sa_pub = self.root / "sa.pub"
        self.sa_pub.write_bytes(
            sa_key.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )


def write_kubeconfig(path: Path, server: str, ca: Path, cert: Path, key: Path, user: str) -> Path:
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "headroom-test", "cluster": {"server": server, "certificate-authority": str(ca)}}],
        "users": [{"name": user, "user": {"client-certificate": str(cert), "client-key": str(key)}}],
        "contexts": [{"name": "headroom-test", "context": {"cluster": "headroom-test", "user": user}}],
        "current-context": "headroom-test",
    }
    write_yaml(path, [doc])
    return path


# ---------------------------------------------------------------------------------------
# processes


@dataclass
class Component:
    name: str
    argv: list[str]
    log: Path
    proc: subprocess.Popen[bytes] | None = None

    def start(self, env: Mapping[str, str] | None = None) -> None:
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # own process group: teardown kills the group
                preexec_fn=_die_with_parent,
                env=dict(env) if env is not None else None,
                cwd=self.log.parent,  # a daemon writes stray files (conmon's "oom") into its cwd: never the checkout
            )

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, grace: float = 10.0) -> None:
        p = self.proc
        if p is None:
            return
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                p.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                pass
        try:  # whatever is left of the group, including any grandchildren
            os.killpg(p.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass


def _http_ok(url: str, ctx: ssl.SSLContext | None = None, timeout: float = 2.0) -> bool:
    try:
        with urllib.request.urlopen(url, context=ctx, timeout=timeout) as r:
            return 200 <= r.status < 300
    except (urllib.error.URLError, OSError, ssl.SSLError):
        return False


@dataclass
class NodeSpec:
    """Capacity of one fake node."""

    name: str
    cpu: str = "4"
    memory: str = "16Gi"
    pods: str = "110"
    labels: dict[str, str] = field(default_factory=dict)
    ephemeral_storage: str = "200Gi"


def default_node_specs() -> list[NodeSpec]:
    """Fake nodes for a session: HEADROOM_TEST_NODES / _NODE_CPU / _NODE_MEMORY / _NODE_PODS."""
    n = int(os.environ.get("HEADROOM_TEST_NODES", "2"))
    cpu = os.environ.get("HEADROOM_TEST_NODE_CPU", "4")
    mem = os.environ.get("HEADROOM_TEST_NODE_MEMORY", "16Gi")
    pods = os.environ.get("HEADROOM_TEST_NODE_PODS", "110")
    return [NodeSpec(f"kwok-node-{i}", cpu, mem, pods) for i in range(n)]


class LocalPlane:
    """etcd + kube-apiserver + scheduler + controller-manager + kwok, loopback only."""

    def __init__(self, bin_dir: Path, workdir: Path | None = None) -> None:
        self.bin = bin_dir
        self.own_workdir = workdir is None
        self.dir = workdir or Path(tempfile.mkdtemp(prefix="headroom-k8s-"))
        self.logs = self.dir / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.components: list[Component] = []
        self.kubeconfig = self.dir / "admin.kubeconfig"
        self.pki: Pki | None = None
        self.server = ""
        self._stopped = False
        self.startup_seconds = 0.0

    # -- lifecycle -------------------------------------------------------------------
    def start(self, timeout: float = 90.0) -> None:
        t0 = time.monotonic()
        from .stale import claim

        claim(self.dir)  # a later session finds this dir stale if this process dies without stop()
        atexit.register(self.stop)
        try:
            self._start(deadline=t0 + timeout)
        except BaseException as exc:
            msg = f"{exc}\n\n{self.diagnostics()}"
            self.stop()
            raise PlaneError(f"test control plane failed to start: {msg}") from exc
        self.startup_seconds = time.monotonic() - t0

    def _start(self, deadline: float) -> None:
        d = self.dir
        pki = self.pki = Pki(d / "pki")
        b = self.bin

        etcd_port, etcd_peer = free_port(), free_port()
        etcd_url = f"http://127.0.0.1:{etcd_port}"
        etcd = self._component(
            "etcd",
            [
                str(b / "etcd"),
                "--name=headroom",
                f"--data-dir={d / 'etcd'}",
                f"--listen-client-urls={etcd_url}",
                f"--advertise-client-urls={etcd_url}",
                f"--listen-peer-urls=http://127.0.0.1:{etcd_peer}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{etcd_peer}",
                f"--initial-cluster=headroom=http://127.0.0.1:{etcd_peer}",
                "--unsafe-no-fsync=true",
                "--log-level=warn",
            ],
        )
        etcd.start()
        self._wait("etcd", lambda: _http_ok(f"{etcd_url}/health"), deadline, etcd)

        api_port = free_port()
        self.server = f"https://127.0.0.1:{api_port}"
        apiserver = self._component(
            "kube-apiserver",
            [
                str(b / "kube-apiserver"),
                f"--etcd-servers={etcd_url}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={api_port}",
                f"--cert-dir={d / 'apiserver'}",
                f"--tls-cert-file={pki.apiserver[0]}",
                f"--tls-private-key-file={pki.apiserver[1]}",
                f"--client-ca-file={pki.ca_crt}",
                f"--kubelet-client-certificate={pki.kubelet_client[0]}",
                f"--kubelet-client-key={pki.kubelet_client[1]}",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                f"--service-account-key-file={pki.sa_pub}",
                f"--service-account-signing-key-file={pki.sa_key}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                "--authorization-mode=Node,RBAC",
                "--enable-admission-plugins=NodeRestriction,PodSecurity",
                "--allow-privileged=true",
                "--endpoint-reconciler-type=none",
                "--profiling=false",
            ],
        )
        apiserver.start()
        write_kubeconfig(self.kubeconfig, self.server, pki.ca_crt, *pki.admin, user="admin")
        ctx = ssl.create_default_context(cafile=str(pki.ca_crt))
        ctx.load_cert_chain(str(pki.admin[0]), str(pki.admin[1]))
        self._wait("kube-apiserver /readyz", lambda: _http_ok(f"{self.server}/readyz", ctx), deadline, apiserver)

        insecure = ssl.create_default_context()
        insecure.check_hostname = False
        insecure.verify_mode = ssl.CERT_NONE

        # kube-scheduler
        skc = write_kubeconfig(
            d / "scheduler.kubeconfig", self.server, pki.ca_crt, *pki.scheduler, user="system:kube-scheduler"
        )
        sched_port = free_port()
        sched = self._component(
            "kube-scheduler",
            [
                str(b / "kube-scheduler"),
                f"--kubeconfig={skc}",
                f"--authentication-kubeconfig={skc}",
                f"--authorization-kubeconfig={skc}",
                "--bind-address=127.0.0.1",
                f"--secure-port={sched_port}",
                f"--cert-dir={d / 'scheduler'}",
                "--leader-elect=false",
                "--profiling=false",
            ],
        )
        # kube-controller-manager
        ckc = write_kubeconfig(
            d / "controller-manager.kubeconfig",
            self.server,
            pki.ca_crt,
            *pki.controller_manager,
            user="system:kube-controller-manager",
        )
        kcm_port = free_port()
        kcm = self._component(
            "kube-controller-manager",
            [
                str(b / "kube-controller-manager"),
                f"--kubeconfig={ckc}",
                f"--authentication-kubeconfig={ckc}",
                f"--authorization-kubeconfig={ckc}",
                "--bind-address=127.0.0.1",
                f"--secure-port={kcm_port}",
                f"--cert-dir={d / 'controller-manager'}",
                "--leader-elect=false",
                "--use-service-account-credentials=true",
                f"--service-account-private-key-file={pki.sa_key}",
                f"--root-ca-file={pki.ca_crt}",
                f"--cluster-signing-cert-file={pki.ca_crt}",
                f"--cluster-signing-key-file={pki.ca_key}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                "--allocate-node-cidrs=false",
                "--profiling=false",
            ],
        )
        # kwok: config = KwokConfiguration + every Stage in manifests/kwok
        kkc = write_kubeconfig(d / "kwok.kubeconfig", self.server, pki.ca_crt, *pki.kwok, user="kwok")
        kwok_port = free_port()
        kwok_conf = d / "kwok.yaml"
        write_yaml(kwok_conf, [self._kwok_configuration(kwok_port), *load_stages()])
        kwok = self._component(
            "kwok",
            [
                str(b / "kwok"),
                f"--kubeconfig={kkc}",
                f"--config={kwok_conf}",
                "--manage-all-nodes=false",
                f"--manage-nodes-with-annotation-selector={FAKE_NODE_ANNOTATION}={FAKE_NODE_VALUE}",
                f"--cidr={POD_CIDR}",
                "--node-ip=10.0.0.1",
                f"--server-address=127.0.0.1:{kwok_port}",
            ],
        )
        for c in (sched, kcm, kwok):
            c.start()
        self._wait(
            "kube-scheduler /healthz",
            lambda: _http_ok(f"https://127.0.0.1:{sched_port}/healthz", insecure),
            deadline,
            sched,
        )
        self._wait(
            "kube-controller-manager /healthz",
            lambda: _http_ok(f"https://127.0.0.1:{kcm_port}/healthz", insecure),
            deadline,
            kcm,
        )
        self._wait("kwok /healthz", lambda: _http_ok(f"http://127.0.0.1:{kwok_port}/healthz"), deadline, kwok)

    @staticmethod
    def _kwok_configuration(port: int) -> dict[str, Any]:
        return {
            "apiVersion": "config.kwok.x-k8s.io/v1alpha1",
            "kind": "KwokConfiguration",
            "options": {
                "manageAllNodes": False,
                "manageNodesWithAnnotationSelector": f"{FAKE_NODE_ANNOTATION}={FAKE_NODE_VALUE}",
                "cidr": POD_CIDR,
                "nodeIP": "10.0.0.1",
                "serverAddress": f"127.0.0.1:{port}",
                "nodeLeaseDurationSeconds": 40,
                # kwok does not default these when a config file is given
                "nodeLeaseParallelism": 4,
                "podPlayStageParallelism": 4,
                "nodePlayStageParallelism": 4,
                "podsOnNodeSyncParallelism": 1,
            },
        }

    def _component(self, name: str, argv: list[str]) -> Component:
        c = Component(name, argv, self.logs / f"{name}.log")
        self.components.append(c)
        return c

    def _wait(self, what: str, ok: Callable[[], bool], deadline: float, comp: Component) -> None:
        while time.monotonic() < deadline:
            if not comp.alive():
                code = comp.proc.returncode if comp.proc else None
                raise PlaneError(f"{comp.name} exited (code {code}) while waiting for {what}")
            if ok():
                return
            time.sleep(0.2)
        raise PlaneError(f"timed out waiting for {what}")

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        for c in reversed(self.components):
            c.stop()
        try:
            atexit.unregister(self.stop)
        except Exception:  # pragma: no cover - interpreter shutting down
            pass
        if self.own_workdir and os.environ.get("HEADROOM_KEEP_PLANE") != "1":
            shutil.rmtree(self.dir, ignore_errors=True)

    def diagnostics(self, lines: int = 40) -> str:
        parts = [f"plane dir: {self.dir}"]
        for c in self.components:
            state = "running" if c.alive() else f"exited {c.proc.returncode if c.proc else '-'}"
            parts.append(f"----- {c.name} ({state}), last {lines} lines of {c.log} -----")
            parts.append(tail(c.log, lines))
        return "\n".join(parts)


def load_stages() -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for f in sorted(STAGES_DIR.glob("*.yaml")):
        docs.extend(d for d in yaml.safe_load_all(f.read_text()) if d)
    if not docs:
        raise PlaneError(f"no kwok Stages found in {STAGES_DIR}")
    return docs


# ---------------------------------------------------------------------------------------
# what tests use


class Cluster:
    """A reachable cluster with fake nodes: the local plane or an existing cluster."""

    def __init__(self, kubeconfig: Path, plane: LocalPlane | None, helm_bin: Path | None) -> None:
        from kubernetes import client, config

        self.kubeconfig = kubeconfig
        self.plane = plane
        self.helm_bin = helm_bin
        self.api_client = config.new_client_from_config(config_file=str(kubeconfig))
        self.core = client.CoreV1Api(self.api_client)
        self.apps = client.AppsV1Api(self.api_client)
        self.nodes: list[str] = []
        self._namespaces: list[str] = []
        self._helm_home = Path(tempfile.mkdtemp(prefix="headroom-helm-"))

    @property
    def local(self) -> bool:
        return self.plane is not None

    # -- nodes ------------------------------------------------------------------------
    def add_node(self, spec: NodeSpec) -> None:
        """Create a kwok-managed Node with the given capacity (kwok marks it Ready)."""
        capacity = {
            "cpu": spec.cpu,
            "memory": spec.memory,
            "pods": spec.pods,
            "ephemeral-storage": spec.ephemeral_storage,
        }
        body = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": spec.name,
                "annotations": {FAKE_NODE_ANNOTATION: FAKE_NODE_VALUE},
                "labels": {
                    **FAKE_NODE_LABELS,
                    "kubernetes.io/hostname": spec.name,
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": "amd64",
                    **spec.labels,
                },
            },
            "spec": {"taints": [FAKE_NODE_TAINT]},
            "status": {"capacity": capacity, "allocatable": capacity},
        }
        self.core.create_node(body)  # type: ignore[arg-type]  # the client serialises a plain dict body
        self.nodes.append(spec.name)

    def wait_nodes_ready(self, names: Iterable[str] | None = None, timeout: float = 60) -> None:
        want = set(names if names is not None else self.nodes)

        def ready() -> bool:
            got = set()
            for n in self.core.list_node(label_selector="type=kwok").items:
                for c in n.status.conditions or []:  # type: ignore[union-attr]  # a listed node has a status
                    if c.type == "Ready" and c.status == "True":
                        got.add(n.metadata.name)  # type: ignore[union-attr]  # and metadata
            return want <= got

        wait_for(ready, timeout, f"fake nodes Ready: {sorted(want)}")

    # -- namespaces -------------------------------------------------------------------
    def create_namespace(self, prefix: str = "t", labels: Mapping[str, str] | None = None) -> str:
        """A fresh namespace, returned once its default ServiceAccount exists."""
        name = f"{prefix}-{uuid.uuid4().hex[:8]}"
        self.core.create_namespace(
            {
                "apiVersion": "v1",
                "kind": "Namespace",  # type: ignore[arg-type]  # the client serialises a plain dict body
                "metadata": {"name": name, "labels": dict(labels or {})},
            }
        )
        self._namespaces.append(name)

        def has_sa() -> bool:
            return any(
                sa.metadata.name == "default"  # type: ignore[union-attr]  # a listed object has metadata
                for sa in self.core.list_namespaced_service_account(name).items
            )

        wait_for(has_sa, 30, f"default ServiceAccount in {name}")
        return name

    # -- pods -------------------------------------------------------------------------
    @staticmethod
    def fake_pod(
        name: str,
        outcome: str | None = None,
        *,
        requests: Mapping[str, str] | None = None,
        limits: Mapping[str, str] | None = None,
        annotations: Mapping[str, str] | None = None,
        image: str = "registry.example/trial:latest",
        restart_policy: str = "Never",
    ) -> dict[str, Any]:
        """A single-container Pod that lands on a fake node and ends per ``outcome``."""
        ann = dict(annotations or {})
        if outcome is not None:
            ann[OUTCOME_ANNOTATION] = outcome
        resources: dict[str, Any] = {}
        if requests:
            resources["requests"] = dict(requests)
        if limits:
            resources["limits"] = dict(limits)
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "annotations": ann},
            "spec": {
                "restartPolicy": restart_policy,
                "nodeSelector": {"type": "kwok"},
                "tolerations": [FAKE_NODE_TOLERATION],
                "automountServiceAccountToken": False,
                "containers": [{"name": "trial", "image": image, "resources": resources}],
            },
        }

    def wait_pod(
        self,
        namespace: str,
        name: str,
        predicate: Callable[[Any], bool],
        timeout: float = 60,
        what: str = "condition",
    ) -> Any:
        last: list[Any] = [None]

        def check() -> bool:
            last[0] = self.core.read_namespaced_pod(name, namespace)
            return predicate(last[0])

        try:
            wait_for(check, timeout, f"pod {namespace}/{name}: {what}")
        except TimeoutError as exc:
            status = last[0].status.to_dict() if last[0] is not None else None
            raise TimeoutError(f"{exc}; last status: {status}") from exc
        return last[0]

    def events_for(self, namespace: str, name: str) -> list[Any]:
        return list(self.core.list_namespaced_event(namespace, field_selector=f"involvedObject.name={name}").items)

    # -- helm -------------------------------------------------------------------------
    def helm(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        helm = self.helm_bin or shutil.which("helm")
        if helm is None:
            raise MissingBinaries(f"helm not found; run {BUILD_SH}")
        env = {
            **os.environ,
            "KUBECONFIG": str(self.kubeconfig),
            "HELM_CACHE_HOME": str(self._helm_home / "cache"),
            "HELM_CONFIG_HOME": str(self._helm_home / "config"),
            "HELM_DATA_HOME": str(self._helm_home / "data"),
        }
        return subprocess.run([str(helm), *args], capture_output=True, text=True, env=env, timeout=timeout, check=False)

    # -- teardown ---------------------------------------------------------------------
    def cleanup(self) -> None:
        """Delete what this session created (matters on a shared existing cluster)."""
        from kubernetes.client.exceptions import ApiException

        for ns in self._namespaces:
            try:
                self.core.delete_namespace(ns)
            except ApiException:
                pass
        for n in self.nodes:
            try:
                self.core.delete_node(n)
            except ApiException:
                pass
        shutil.rmtree(self._helm_home, ignore_errors=True)
        self.api_client.close()

    def diagnostics(self) -> str:
        return self.plane.diagnostics() if self.plane else f"existing cluster: {self.kubeconfig}"


def wait_for(ok: Callable[[], bool], timeout: float, what: str, interval: float = 0.25) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if ok():
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)
