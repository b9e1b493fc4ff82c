"""An opt-in real node for the test plane: containerd + runc + the kubelet, real Pods.

``RealNode`` registers one real kubelet with the local plane's apiserver, beside the kwok
nodes. Its containers are real processes under real cgroup limits, so a pod over its
memory limit is OOM-killed by the kernel and the kubelet reports it.

How it is isolated from the (shared) host, so that teardown leaves nothing behind:

* **Mount namespace.** A holder process (``unshare --mount --propagation private``)
  owns a private mount namespace; containerd and the kubelet are started inside it with
  ``nsenter``. Over ``/run/containerd``, ``/var/lib/cni`` and ``/var/log`` it bind-mounts
  folders of the session's temp dir, and every mount the node makes (overlay rootfs,
  volumes, netns files) lives only there: when the node's processes are gone the
  namespace and its mounts are gone.
* **Kernel sysctls.** The kubelet sets ``vm.overcommit_memory=1``, ``kernel.panic=10``
  and ``kernel.panic_on_oops=1`` on start-up when they differ. Those are host-wide, and
  this machine is shared, so inside the node's mount namespace the ``/proc/sys`` files
  that differ are covered by files holding the kubelet's values: it reads what it wants
  and changes nothing. The faked names are recorded on the Node (annotation
  ``headroom.test/sysctls-not-applied``).
* **Network namespace.** containerd runs in its own network namespace (``unshare --net``);
  the CNI plugins it runs (Debian's ``ptp`` + ``host-local``, pod range ``10.250.0.0/24``)
  put their veths and routes there, never in the host's. The kubelet stays in the host
  namespace (it reaches the apiserver on 127.0.0.1). containerd's CRI streaming server
  (``exec``, ``attach``, ``port-forward``) is pinned to ``127.0.0.1:<a free port>`` inside
  its namespace, and a relay (``tests/cluster/netns_bridge.py --into``, component
  ``stream-bridge``) listens on the host's ``127.0.0.1`` at the same port and connects there:
  the kubelet dials the URL containerd returns (``http://127.0.0.1:PORT/exec/...``) from the
  host's namespace, and reaches it. So ``kubectl exec`` (the API's ``pods/exec``) and
  ``kubectl logs`` work on this node.
* **cgroups.** The kubelet's ``cgroupRoot`` is ``/headroom-<node name>`` (cgroupfs
  driver), so every pod cgroup sits under a folder of this session, removed at the end.
* **oom_score_adj.** This host lacks CAP_SYS_RESOURCE, so runc cannot lower a process's
  oom_score_adj (the kubelet asks -998 for pod sandboxes and Guaranteed pods, and runc
  fails "can't get final child's PID from pipe"). containerd's
  ``restrict_oom_score_adj`` raises negative scores to containerd's own (0). This changes
  which process the kernel picks under *node-wide* memory pressure (not under a pod's own
  limit), so it is recorded on the Node: annotation ``headroom.test/oom-score-adj``.

Scheduling contract (docs/kubernetes-test-plane.md): the node has label
``headroom.test/real-node=true`` and taint ``headroom.test/real-node=true:NoSchedule``; a
pod for it selects the label and tolerates the taint (``real_pod`` does both). kwok pods
select ``type: kwok``, which this node does not have.
"""

from __future__ import annotations

import atexit
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .plane import REPO, Component, PlaneError, free_port, tail, wait_for, write_yaml

INSTALL_SH = "scripts/node/install.sh"
IMAGES_SH = REPO / "scripts" / "images" / "build.sh"
CONTAINERD_TEMPLATE = REPO / "scripts" / "node" / "containerd.toml.in"
CNI_BIN_DIR = Path("/usr/lib/cni")

REAL_NODE_LABEL = "headroom.test/real-node"
REAL_NODE_TAINT = {"key": REAL_NODE_LABEL, "value": "true", "effect": "NoSchedule"}
REAL_NODE_TOLERATION = {"key": REAL_NODE_LABEL, "operator": "Exists", "effect": "NoSchedule"}
OOM_SCORE_ANNOTATION = "headroom.test/oom-score-adj"
SYSCTL_ANNOTATION = "headroom.test/sysctls-not-applied"
POD_RANGE = "10.250.0.0/24"

# What the kubelet writes at start-up unless the value is already there
# (k8s.io/kubernetes pkg/kubelet/cm: setupKernelTunables).
KUBELET_SYSCTLS = {
    "vm/overcommit_memory": "1",
    "vm/panic_on_oom": "0",
    "kernel/panic": "10",
    "kernel/panic_on_oops": "1",
    "kernel/keys/root_maxkeys": "1000000",
    "kernel/keys/root_maxbytes": "25000000",
}
# Host folders covered inside the node's mount namespace (created if missing, removed
# again at the end if this session created them and they are still empty).
PRIVATE_DIRS = ("/run/containerd", "/var/lib/cni", "/var/log")


class MissingNodeAssets(PlaneError):
    """containerd/runc/CNI plugins, the kubelet or the local images are not there."""


@dataclass(frozen=True)
class NodeAssets:
    kubelet: Path
    containerd: Path
    runc: Path
    ctr: Path
    base_image: str
    base_archive: Path
    pause_image: str
    pause_archive: Path


def find_node_assets(bin_dir: Path) -> NodeAssets:
    """Everything the real node needs, or MissingNodeAssets saying how to get it."""
    missing: list[str] = []
    kubelet = bin_dir / "kubelet"
    if not os.access(kubelet, os.X_OK):
        missing.append(f"kubelet in {bin_dir} (scripts/k8s/build.sh)")
    tools = {t: shutil.which(t) for t in ("containerd", "runc", "ctr", "unshare", "nsenter", "ip")}
    missing += [f"{t} on PATH" for t, p in tools.items() if p is None]
    missing += [f"CNI plugin {p}" for p in ("ptp", "host-local", "loopback") if not os.access(CNI_BIN_DIR / p, os.X_OK)]
    proc = subprocess.run(
        ["bash", str(IMAGES_SH), "--exports"], capture_output=True, text=True, check=False, timeout=60
    )
    env = dict(re.findall(r"^export (\w+)=(\S+)$", proc.stdout, re.M))
    if proc.returncode != 0:
        missing.append("local images (scripts/images/build.sh)")
    if missing:
        raise MissingNodeAssets(
            "the real test node needs: " + "; ".join(missing) + "\n"
            f"Install and build them (apt packages, images; idempotent) with:  {INSTALL_SH}\n"
            "or deselect the real-node tests with -m 'not realnode' (HEADROOM_SKIP_REALNODE=1)."
        )
    return NodeAssets(
        kubelet=kubelet,
        containerd=Path(tools["containerd"] or ""),
        runc=Path(tools["runc"] or ""),
        ctr=Path(tools["ctr"] or ""),
        base_image=env["HEADROOM_IMAGE_BASE"],
        base_archive=Path(env["HEADROOM_IMAGE_BASE_ARCHIVE"]),
        pause_image=env["HEADROOM_IMAGE_PAUSE"],
        pause_archive=Path(env["HEADROOM_IMAGE_PAUSE_ARCHIVE"]),
    )


# ---------------------------------------------------------------------------------------
# cgroups


def cgroup_mounts() -> dict[str, Path]:
    """Mounted cgroup hierarchies: v1 controller set (e.g. 'cpu,cpuacct') or 'unified'."""
    found: dict[str, Path] = {}
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        pre, _, post = line.partition(" - ")
        fstype, _src, opts = (post.split() + ["", "", ""])[:3]
        mountpoint = Path(pre.split()[4])
        if fstype == "cgroup2":
            found["unified"] = mountpoint
        elif fstype == "cgroup":
            names = [o for o in opts.split(",") if o not in ("rw", "ro")]
            found[",".join(sorted(names))] = mountpoint
    return found


def create_cgroup_root(name: str) -> list[Path]:
    """``/<name>`` in every hierarchy (the kubelet checks that its cgroupRoot exists)."""
    made: list[Path] = []
    for key, mp in cgroup_mounts().items():
        d = mp / name
        d.mkdir(exist_ok=True)
        made.append(d)
        if "cpuset" in key.split(","):  # a v1 cpuset cgroup starts empty: inherit
            for f in ("cpuset.cpus", "cpuset.mems"):
                (d / f).write_text((mp / f).read_text())
        if key == "unified":  # let the kubelet's children use the controllers
            wanted = (mp / "cgroup.subtree_control").read_text().split()
            (d / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in wanted))
    return made


def pids_in_cgroups(roots: list[Path]) -> set[int]:
    pids: set[int] = set()
    for root in roots:
        if not root.exists():
            continue
        for procs in root.rglob("cgroup.procs"):
            try:
                pids.update(int(p) for p in procs.read_text().split())
            except OSError:
                pass
    return pids


def remove_cgroup_tree(root: Path) -> bool:
    """rmdir bottom-up; True when gone."""
    if not root.exists():
        return True
    for d in sorted((p for p in root.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
        try:
            d.rmdir()
        except OSError:
            pass
    try:
        root.rmdir()
    except OSError:
        return False
    return True


# ---------------------------------------------------------------------------------------
# processes, mounts


def ns_inode(pid: int, kind: str) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/{kind}")
    except OSError:
        return None


def pids_in_namespace(kind: str, ident: str) -> set[int]:
    found: set[int] = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit() and ns_inode(int(entry), kind) == ident:
            found.add(int(entry))
    return found


def pids_mentioning(text: str) -> set[int]:
    found: set[int] = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if text.encode() in cmd:
            found.add(int(entry))
    return found


def mounts_under(prefix: str) -> list[str]:
    out = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        target = line.split()[4]
        if target == prefix or target.startswith(prefix.rstrip("/") + "/"):
            out.append(target)
    return out


def kill_all(pids: set[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


# ---------------------------------------------------------------------------------------
# the node


class RealNode:
    """containerd + kubelet registered with ``kubeconfig``'s cluster as ``self.name``."""

    def __init__(self, assets: NodeAssets, kubeconfig: Path, client_ca: Path, workdir: Path | None = None) -> None:
        self.assets = assets
        self.kubeconfig = kubeconfig
        self.client_ca = client_ca
        self.own_workdir = workdir is None
        self.dir = workdir or Path(tempfile.mkdtemp(prefix="headroom-node-"))
        self.name = f"realnode-{uuid.uuid4().hex[:8]}"
        self.cgroup_name = f"headroom-{self.name}"
        self.logs = self.dir / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.socket = self.dir / "containerd.sock"
        self.components: list[Component] = []
        self.cgroups: list[Path] = []
        self.created_dirs: list[Path] = []
        self.faked_sysctls: dict[str, str] = {}
        self.mnt_ns: str | None = None
        self.net_ns: str | None = None
        self.oom_score_adj = ""
        self.startup_seconds = 0.0
        #: containerd's CRI streaming port: 127.0.0.1 inside its namespace, relayed from the host's 127.0.0.1
        self.stream_port = free_port()
        self._stopped = False

    # -- paths other code reads --------------------------------------------------------
    @property
    def pod_logs_dir(self) -> Path:
        """The kubelet's /var/log/pods as seen from the host."""
        return self.dir / "var-log" / "pods"

    def container_cgroup(self, pod_uid: str, container_id: str, controller: str = "memory") -> Path:
        """Host path of a container's cgroup (v1 ``controller`` hierarchy)."""
        cid = container_id.split("://", 1)[-1]
        for key, mp in cgroup_mounts().items():
            if controller in key.split(",") or key == "unified":
                root = mp / self.cgroup_name
                hits = [p for p in root.rglob(cid) if p.is_dir()]
                if hits:
                    return hits[0]
        uid = pod_uid.replace("-", "_")
        raise FileNotFoundError(f"no cgroup for container {cid} (pod {uid}) under {self.cgroup_name}")

    # -- lifecycle -------------------------------------------------------------------
    def start(self, timeout: float = 180.0) -> None:
        t0 = time.monotonic()
        from .stale import claim

        claim(self.dir)  # a later session cleans this node's processes and mounts if this one dies
        atexit.register(self.stop)
        try:
            self._start(deadline=t0 + timeout)
        except BaseException as exc:
            msg = f"{exc}\n\n{self.diagnostics()}"
            self.stop()
            raise PlaneError(f"real test node failed to start: {msg}") from exc
        self.startup_seconds = time.monotonic() - t0

    def _start(self, deadline: float) -> None:
        d = self.dir
        for sub in (
            "containerd/root",
            "containerd/state",
            "run-containerd",
            "var-lib-cni",
            "var-log",
            "cni/net.d",
            "cni/ipam",
            "kubelet",
            "sysctl",
            "volume-plugins",
        ):
            (d / sub).mkdir(parents=True, exist_ok=True)
        for host_dir in map(Path, PRIVATE_DIRS):
            if not host_dir.exists():
                host_dir.mkdir(parents=True)
                self.created_dirs.append(host_dir)
        self.cgroups = create_cgroup_root(self.cgroup_name)

        # 1. the private mount namespace, held open by `sleep`
        binds = [
            (d / "run-containerd", "/run/containerd"),
            (d / "var-lib-cni", "/var/lib/cni"),
            (d / "var-log", "/var/log"),
        ]
        for key, want in KUBELET_SYSCTLS.items():
            host = Path("/proc/sys") / key
            try:
                have = host.read_text().strip()
            except OSError:
                continue
            if have != want:
                fake = d / "sysctl" / key.replace("/", ".")
                fake.write_text(want + "\n")
                binds.append((fake, str(host)))
                self.faked_sysctls[key.replace("/", ".")] = have
        ready = d / "holder.ready"
        script = "set -e\n" + "".join(f"mount --bind '{src}' '{dst}'\n" for src, dst in binds)
        script += f"touch '{ready}'\nexec sleep infinity\n"
        holder = self._component(
            "mount-namespace", ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", script]
        )
        holder.start()
        self._wait("mount namespace", ready.exists, deadline, holder)
        assert holder.proc is not None
        self.mnt_ns = ns_inode(holder.proc.pid, "mnt")
        enter = ["nsenter", f"--mount=/proc/{holder.proc.pid}/ns/mnt", "--"]

        # 2. containerd in its own network namespace
        conflist = {
            "cniVersion": "0.4.0",
            "name": "headroom-node",
            "plugins": [
                {
                    "type": "ptp",
                    "ipMasq": False,
                    "ipam": {
                        "type": "host-local",
                        "ranges": [[{"subnet": POD_RANGE}]],
                        "routes": [{"dst": "0.0.0.0/0"}],
                        "dataDir": str(d / "cni" / "ipam"),
                    },
                }
            ],
        }
        (d / "cni" / "net.d" / "10-headroom.conflist").write_text(json.dumps(conflist, indent=2))
        config = d / "containerd.toml"
        values = {
            "ROOT": d / "containerd" / "root",
            "STATE": d / "containerd" / "state",
            "SOCKET": self.socket,
            "PAUSE_IMAGE": self.assets.pause_image,
            "RESTRICT_OOM": "true",
            "RUNC": self.assets.runc,
            "CNI_CONF_DIR": d / "cni" / "net.d",
            "STREAM_PORT": self.stream_port,
        }
        text = CONTAINERD_TEMPLATE.read_text()
        for k, v in values.items():
            text = text.replace(f"@{k}@", str(v))
        config.write_text(text)
        containerd = self._component(
            "containerd",
            [
                *enter,
                "unshare",
                "--net",
                "--",
                "sh",
                "-c",
                f"ip link set lo up && exec '{self.assets.containerd}' --config '{config}'",
            ],
        )
        containerd.start()
        self._wait("containerd socket", lambda: self._ctr("version").returncode == 0, deadline, containerd)
        assert containerd.proc is not None
        self.net_ns = ns_inode(containerd.proc.pid, "net")
        self._bridge_streams(containerd, deadline)
        self.oom_score_adj = Path(f"/proc/{containerd.proc.pid}/oom_score_adj").read_text().strip()

        # 3. the images (no registry): the pause image first, the sandbox needs it
        self.import_image(self.assets.pause_archive, self.assets.base_archive)

        # 4. the kubelet
        port, healthz = free_port(), free_port()
        kcfg = d / "kubelet.yaml"
        write_yaml(kcfg, [self._kubelet_configuration(port, healthz)])
        kubelet = self._component(
            "kubelet",
            [
                *enter,
                str(self.assets.kubelet),
                f"--config={kcfg}",
                f"--kubeconfig={self.kubeconfig}",
                f"--root-dir={d / 'kubelet'}",
                f"--cert-dir={d / 'kubelet' / 'pki'}",
                f"--hostname-override={self.name}",
                # The kubelet refuses a loopback node IP ("nodeIP can't be loopback") and then
                # publishes no address, so the apiserver cannot reach it for logs. With an
                # external cloud provider it leaves the addresses to someone else: register()
                # sets 127.0.0.1, where the kubelet listens. Everything stays on loopback.
                "--cloud-provider=external",
                f"--node-labels={REAL_NODE_LABEL}=true,headroom.test/node-kind=real",
                "--v=2",
            ],
        )
        kubelet.start()
        from .plane import _http_ok

        self._wait("kubelet /healthz", lambda: _http_ok(f"http://127.0.0.1:{healthz}/healthz"), deadline, kubelet)
        self.healthz_port = healthz

    def _kubelet_configuration(self, port: int, healthz: int) -> dict[str, Any]:
        return {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            "address": "127.0.0.1",
            "port": port,
            "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1",
            "healthzPort": healthz,
            "authentication": {
                "anonymous": {"enabled": False},
                "webhook": {"enabled": False},
                "x509": {"clientCAFile": str(self.client_ca)},
            },
            "authorization": {"mode": "AlwaysAllow"},  # only the apiserver's client cert gets in
            "containerRuntimeEndpoint": f"unix://{self.socket}",
            "cgroupDriver": "cgroupfs",
            "cgroupRoot": f"/{self.cgroup_name}",
            "failCgroupV1": False,  # this host is cgroup v1
            "failSwapOn": False,
            "makeIPTablesUtilChains": False,  # keep the host's iptables untouched
            "oomScoreAdj": 0,  # the kubelet cannot lower its own score here either
            "registerWithTaints": [REAL_NODE_TAINT],
            "volumePluginDir": str(self.dir / "volume-plugins"),
            "podLogsDirectory": "/var/log/pods",  # inside the private namespace: var-log/pods
            "resolvConf": "",
            # a shared disk: neither image GC nor disk-pressure eviction should fire here
            "imageGCHighThresholdPercent": 100,
            "imageGCLowThresholdPercent": 99,
            "evictionHard": {
                "memory.available": "100Mi",
                "nodefs.available": "1%",
                "imagefs.available": "1%",
                "nodefs.inodesFree": "1%",
            },
            "nodeStatusUpdateFrequency": "5s",
            "serializeImagePulls": False,
            "localStorageCapacityIsolation": True,
        }

    def register(self, core: Any, timeout: float = 120) -> None:
        """Finish what a cloud controller would do, record the node's quirks, wait Ready.

        Sets the node's address (127.0.0.1) and drops the ``uninitialized`` taint that
        ``--cloud-provider=external`` adds; annotates what differs from a normal node
        (provenance reads these).
        """
        from kubernetes.client.exceptions import ApiException

        def registered() -> bool:
            try:
                core.read_node(self.name)
            except ApiException:
                return False
            return True

        wait_for(registered, timeout, f"node {self.name} registered")
        # InternalIP only: the apiserver prefers a Hostname address, which nothing resolves
        # (the kubelet registered a Hostname address: replace the list, do not merge)
        core.patch_node_status(
            self.name,
            {
                "status": {
                    "addresses": [
                        {"$patch": "replace"},
                        {"type": "InternalIP", "address": "127.0.0.1"},
                    ]
                }
            },
        )
        addresses = [(a.type, a.address) for a in core.read_node(self.name).status.addresses]
        if addresses != [("InternalIP", "127.0.0.1")]:
            raise PlaneError(f"node {self.name}: addresses not replaced: {addresses}")
        node = core.read_node(self.name)
        taints = [
            t.to_dict() for t in node.spec.taints or [] if t.key != "node.cloudprovider.kubernetes.io/uninitialized"
        ]
        sysctls = ",".join(f"{k}(host={v})" for k, v in sorted(self.faked_sysctls.items()))
        core.patch_node(
            self.name,
            {
                "metadata": {
                    "annotations": {
                        OOM_SCORE_ANNOTATION: f"negative-clamped-to-{self.oom_score_adj or '0'}",
                        SYSCTL_ANNOTATION: sysctls or "none",
                    }
                },
                "spec": {"taints": [{k: v for k, v in t.items() if v is not None} for t in taints]},
            },
        )

        def ready() -> bool:
            n = core.read_node(self.name)
            return any(c.type == "Ready" and c.status == "True" for c in n.status.conditions or [])

        wait_for(ready, timeout, f"node {self.name} Ready")

    def import_image(self, *sources: Path | str, docker_host: str | None = None) -> list[str]:
        """Put images into the node's containerd (namespace ``k8s.io``), where the kubelet finds
        them with ``imagePullPolicy: Never``: what a registry pull would do, without a registry.

        A ``Path`` is an image archive (OCI layout or ``docker save``); a ``str`` is an image
        reference on the Docker daemon at ``docker_host``, exported through the Engine API's
        ``docker save`` into this node's folder first. Returns the image names containerd lists.
        """
        imported: list[str] = []
        for source in sources:
            archive, names = (source, []) if isinstance(source, Path) else self._docker_save(source, docker_host)
            try:
                r = self._ctr("image", "import", str(archive), timeout=600)
                if r.returncode != 0:
                    raise PlaneError(f"ctr image import {source} failed: {r.stderr.strip()}")
            finally:
                if names:
                    archive.unlink(missing_ok=True)
            imported += names or re.findall(r"^unpacking (\S+) ", r.stdout, re.M)
        listed = set(self._ctr("image", "ls", "-q").stdout.split())
        missing = [n for n in imported if n not in listed]
        if missing:
            raise PlaneError(f"containerd does not list the imported images {missing}")
        return imported

    def expose_api_service(
        self, server: str, cluster_ip: str = "10.96.0.1", port: int = 443, timeout: float = 30
    ) -> None:
        """Make the ``kubernetes`` Service's ClusterIP reach the API server from this node's pods
        (tests/cluster/netns_bridge.py: kube-proxy for that one Service), so a pod using the
        in-cluster config, such as the chart's controller, talks to the test plane."""
        if any(c.name == "api-service-bridge" for c in self.components):
            return
        containerd = next(c for c in self.components if c.name == "containerd")
        assert containerd.proc is not None
        upstream = server.removeprefix("https://").rstrip("/")
        bridge = self._component(
            "api-service-bridge",
            [
                sys.executable,
                "-m",
                "tests.cluster.netns_bridge",
                f"/proc/{containerd.proc.pid}/ns/net",
                f"{cluster_ip}:{port}",
                upstream,
            ],
        )
        bridge.start(env={**os.environ, "PYTHONPATH": str(REPO)})
        self._wait(
            "the API service bridge",
            lambda: "relaying" in bridge.log.read_text(errors="replace"),
            time.monotonic() + timeout,
            bridge,
        )

    def _bridge_streams(self, containerd: Component, deadline: float) -> None:
        """The kubelet (host namespace) dials containerd's streaming URL on 127.0.0.1: relay that port
        of the host's loopback to the same port of the node's loopback (netns_bridge ``--into``)."""
        assert containerd.proc is not None
        addr = f"127.0.0.1:{self.stream_port}"
        bridge = self._component(
            "stream-bridge",
            [
                sys.executable,
                "-m",
                "tests.cluster.netns_bridge",
                "--into",
                "--owner",
                str(self.dir),
                f"/proc/{containerd.proc.pid}/ns/net",
                addr,
                addr,
            ],
        )
        bridge.start(env={**os.environ, "PYTHONPATH": str(REPO)})
        self._wait(
            "the CRI streaming bridge", lambda: "relaying" in bridge.log.read_text(errors="replace"), deadline, bridge
        )

    def http_get(self, url: str, timeout: float = 10) -> str | None:
        """GET ``url`` from inside the node's network namespace, where pod IPs are routed (the
        host has no route to them); None when it cannot be fetched."""
        containerd = next(c for c in self.components if c.name == "containerd")
        assert containerd.proc is not None
        code = (
            "import sys, urllib.request\n"
            "print(urllib.request.urlopen(sys.argv[1], timeout=float(sys.argv[2])).read().decode(), end='')"
        )
        r = subprocess.run(
            [
                "nsenter",
                f"--net=/proc/{containerd.proc.pid}/ns/net",
                "--",
                sys.executable,
                "-c",
                code,
                url,
                str(timeout),
            ],
            capture_output=True,
            text=True,
            timeout=timeout + 10,
            check=False,
        )
        return r.stdout if r.returncode == 0 else None

    def _docker_save(self, ref: str, docker_host: str | None) -> tuple[Path, list[str]]:
        import docker

        if not docker_host:
            raise PlaneError(f"import_image({ref!r}): a Docker reference needs docker_host")
        client = docker.DockerClient(base_url=docker_host, timeout=600)
        try:
            image = client.images.get(ref)
            (self.dir / "images").mkdir(exist_ok=True)
            archive = self.dir / "images" / f"{uuid.uuid4().hex[:12]}.tar"
            with archive.open("wb") as f:
                for chunk in image.save(named=ref):
                    f.write(chunk)
        finally:
            client.close()
        # containerd names a docker-archive image by its normalised reference
        name = (
            ref
            if "/" in ref and "." in ref.split("/", 1)[0]
            else f"docker.io/{ref if '/' in ref else 'library/' + ref}"
        )
        return archive, [name if ":" in name.rsplit("/", 1)[-1] else f"{name}:latest"]

    def _ctr(self, *args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.assets.ctr), "--address", str(self.socket), "--namespace", "k8s.io", *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def _component(self, name: str, argv: list[str]) -> Component:
        c = Component(name, argv, self.logs / f"{name}.log")
        self.components.append(c)
        return c

    def _wait(self, what: str, ok: Any, deadline: float, comp: Component) -> None:
        while time.monotonic() < deadline:
            if not comp.alive():
                code = comp.proc.returncode if comp.proc else None
                raise PlaneError(f"{comp.name} exited (code {code}) while waiting for {what}")
            if ok():
                return
            time.sleep(0.2)
        raise PlaneError(f"timed out waiting for {what}")

    # -- teardown ---------------------------------------------------------------------
    def stop(self) -> None:
        """Stop everything; afterwards ``leftovers()`` is empty (tests check it)."""
        if self._stopped:
            return
        self._stopped = True
        by_name = {c.name: c for c in self.components}
        for name in ("kubelet", "stream-bridge", "containerd", "api-service-bridge"):
            if name in by_name:
                by_name[name].stop(grace=10)
        # shims and containers outlive containerd by design; they are in this node's
        # mount namespace or cgroups, nothing else is
        for _ in range(3):
            pids = pids_in_cgroups(self.cgroups)
            if self.mnt_ns:
                pids |= pids_in_namespace("mnt", self.mnt_ns) - {os.getpid()}
            if self.net_ns:
                pids |= pids_in_namespace("net", self.net_ns)
            holder = by_name.get("mount-namespace")
            if holder is not None and holder.proc is not None:
                pids.discard(holder.proc.pid)
            if not pids:
                break
            kill_all(pids)
            time.sleep(0.3)
        if "mount-namespace" in by_name:
            by_name["mount-namespace"].stop(grace=2)
        deadline = time.monotonic() + 15
        while not all(remove_cgroup_tree(c) for c in self.cgroups) and time.monotonic() < deadline:
            time.sleep(0.2)
        for host_dir in reversed(self.created_dirs):
            try:
                host_dir.rmdir()  # only if still empty: another user may have started using it
            except OSError:
                pass
        try:
            atexit.unregister(self.stop)
        except Exception:  # pragma: no cover - interpreter shutting down
            pass
        if self.own_workdir and os.environ.get("HEADROOM_KEEP_PLANE") != "1":
            shutil.rmtree(self.dir, ignore_errors=True)

    def leftovers(self) -> list[str]:
        """What the node left behind after ``stop()``: processes, mounts, namespaces, cgroups."""
        found: list[str] = []
        for pid in sorted(pids_mentioning(str(self.dir)) - {os.getpid()}):
            found.append(f"process {pid} mentions {self.dir}")
        if self.mnt_ns and (pids := pids_in_namespace("mnt", self.mnt_ns)):
            found.append(f"processes in the node's mount namespace {self.mnt_ns}: {sorted(pids)}")
        if self.net_ns and (pids := pids_in_namespace("net", self.net_ns)):
            found.append(f"processes in the node's network namespace {self.net_ns}: {sorted(pids)}")
        found += [f"mount {m}" for m in mounts_under(str(self.dir))]
        found += [f"cgroup {c}" for c in self.cgroups if c.exists()]
        # A folder someone else has put things in since (a private dockerd's /run/containerd/s on
        # another xdist worker) is theirs now: stop() leaves it, and it is not this node's leftover.
        found += [f"host folder {h}" for h in self.created_dirs if h.is_dir() and not any(h.iterdir())]
        if self.own_workdir and os.environ.get("HEADROOM_KEEP_PLANE") != "1" and self.dir.exists():
            found.append(f"work folder {self.dir}")
        return found

    def diagnostics(self, lines: int = 40) -> str:
        parts = [f"real node {self.name}, dir {self.dir}"]
        for c in self.components:
            state = "running" if c.alive() else f"exited {c.proc.returncode if c.proc else '-'}"
            parts.append(f"----- {c.name} ({state}), last {lines} lines of {c.log} -----")
            parts.append(tail(c.log, lines))
        return "\n".join(parts)


# ---------------------------------------------------------------------------------------
# pods for the real node


def real_pod(
    name: str,
    image: str,
    command: list[str],
    *,
    requests: Mapping[str, str] | None = None,
    limits: Mapping[str, str] | None = None,
    restricted: bool = True,
    annotations: Mapping[str, str] | None = None,
    pull_policy: str = "Never",
) -> dict[str, Any]:
    """A one-container Pod for the real node; ``restricted`` = PodSecurity restricted-ready."""
    resources: dict[str, Any] = {}
    if requests:
        resources["requests"] = dict(requests)
    if limits:
        resources["limits"] = dict(limits)
    container: dict[str, Any] = {
        "name": "trial",
        "image": image,
        "imagePullPolicy": pull_policy,  # Never: imported into containerd, no registry
        "command": command,
        "resources": resources,
    }
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "nodeSelector": {REAL_NODE_LABEL: "true"},
        "tolerations": [REAL_NODE_TOLERATION],
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "terminationGracePeriodSeconds": 2,
        "containers": [container],
    }
    if restricted:
        spec["securityContext"] = {
            "runAsNonRoot": True,
            "runAsUser": 65534,
            "runAsGroup": 65534,
            "seccompProfile": {"type": "RuntimeDefault"},
        }
        container["securityContext"] = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "annotations": dict(annotations or {})},
        "spec": spec,
    }


#: Owners that put a deleted pod back: a test that made one removes it itself (a helm release).
_RECREATING = {"ReplicaSet", "StatefulSet", "DaemonSet", "Job"}


def clear_real_node(core: Any, node: str, timeout: float = 30) -> list[str]:
    """Delete the pods left on ``node`` or waiting for it (finalizers and all) and wait until they are gone;
    their names. The real node has 2 CPUs: a pod one test leaves there keeps the next test's pods Pending."""
    from kubernetes.client.exceptions import ApiException

    def left() -> list[Any]:
        bound = core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={node}").items
        waiting = [
            p
            for p in core.list_pod_for_all_namespaces(field_selector="spec.nodeName=").items
            if (p.spec.node_selector or {}).get(REAL_NODE_LABEL) == "true"
        ]
        return [p for p in bound + waiting if not any(o.kind in _RECREATING for o in p.metadata.owner_references or [])]

    pods = left()
    for p in pods:
        name, ns = p.metadata.name, p.metadata.namespace
        try:
            if p.metadata.finalizers:  # a backend's harvest finalizer, its process gone: nobody else removes it
                core.patch_namespaced_pod(name, ns, {"metadata": {"finalizers": None}})
            core.delete_namespaced_pod(name, ns, grace_period_seconds=0)
        except ApiException as exc:
            if exc.status != 404:
                raise
    uids = {p.metadata.uid for p in pods}
    wait_for(lambda: not uids & {p.metadata.uid for p in left()}, timeout, f"leftover pods on {node} deleted")
    return sorted(f"{p.metadata.namespace}/{p.metadata.name}" for p in pods)


def delete_pods_on_node(core: Any, node: str, timeout: float = 30) -> None:
    """Delete every pod bound to ``node`` and wait until the API no longer lists them."""
    from kubernetes.client.exceptions import ApiException

    selector = f"spec.nodeName={node}"
    for pod in core.list_pod_for_all_namespaces(field_selector=selector).items:
        try:
            core.delete_namespaced_pod(pod.metadata.name, pod.metadata.namespace, grace_period_seconds=0)
        except ApiException:
            pass
    try:
        wait_for(
            lambda: not core.list_pod_for_all_namespaces(field_selector=selector).items,
            timeout,
            f"pods on {node} deleted",
        )
    except TimeoutError:
        pass  # the node's stop() kills what is left
