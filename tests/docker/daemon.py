"""A private dockerd for the test session: its own data root, exec root, containerd and unix socket.

No TCP listener, no iptables rules, no bridge (``--bridge=none``): containers get
``network_mode=none`` or the host's loopback-free nothing. Its cgroups live under
their own parent (``/headroom-test-<pid>``), so nothing it makes mixes with
another daemon on the machine. :meth:`stop` removes every container, stops the
daemon (which stops its containerd) and deletes the temp folder, unmounting
anything the daemon left mounted there.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import docker
import docker.errors


class DaemonError(RuntimeError):
    pass


def _mounts_under(root: Path) -> list[str]:
    out = []
    for line in Path("/proc/self/mounts").read_text().splitlines():
        target = line.split()[1].replace("\\040", " ")
        if target == str(root) or target.startswith(f"{root}/"):
            out.append(target)
    return sorted(out, key=len, reverse=True)


#: What dockerd 20.10 and its containerd make outside their roots, at fixed paths: the daemon's
#: trust key, the plugin socket folder, the shim socket folder. Removed at stop() when this
#: daemon created them (and, for folders, when they are empty: another daemon may use them).
FIXED_PATHS = (
    Path("/etc/docker/key.json"),
    Path("/etc/docker"),
    Path("/run/docker/plugins"),
    Path("/run/docker"),
    Path("/run/containerd/s"),
    Path("/run/containerd"),
)


class PrivateEngine:
    """What a private dockerd and a private Podman service share: readiness, logs, and teardown."""

    name = "engine"
    root: Path
    socket: Path
    host: str
    log_path: Path
    proc: subprocess.Popen[bytes] | None
    preexisting: set[Path]
    fixed_paths: tuple[Path, ...] = ()

    def _wait_ready(self, timeout_s: float) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise DaemonError(f"{self.name} exited with {self.proc.returncode}:\n{self.log_tail()}")
            if self.socket.exists():
                c = docker.DockerClient(base_url=self.host, timeout=5)
                try:
                    c.ping()
                    return
                except docker.errors.DockerException:
                    pass
                finally:
                    c.close()
            time.sleep(0.2)
        raise DaemonError(f"{self.name} did not answer within {timeout_s:.0f}s:\n{self.log_tail()}")

    def log_tail(self, n: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    def _stop_process(self, api_timeout: float) -> None:
        """Remove every container (with its volumes), then stop the process group."""
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            c = docker.DockerClient(base_url=self.host, timeout=api_timeout)
            try:
                for ctr in c.api.containers(all=True):
                    c.api.remove_container(ctr["Id"], force=True, v=True)
            finally:
                c.close()
        except docker.errors.DockerException:
            pass
        # The whole group: the daemon and what it started (dockerd would otherwise wait 15 s for its containerd).
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def _remove_root_and_fixed_paths(self) -> None:
        for target in _mounts_under(self.root):
            subprocess.run(["umount", "-l", target], check=False, capture_output=True)
        shutil.rmtree(self.root, ignore_errors=True)
        for p in self.fixed_paths:  # files before their folders
            if p in self.preexisting:
                continue
            try:
                p.rmdir() if p.is_dir() else p.unlink()
            except OSError:
                pass  # not empty (in use by another daemon) or already gone


def _remove_cgroup_trees(dirs: list[Path]) -> None:
    """Remove each cgroup folder and its children, deepest first; a busy one stays."""
    for d in dirs:
        if not d.is_dir():
            continue
        for sub in sorted((p for p in d.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True):
            try:
                sub.rmdir()
            except OSError:
                pass
        try:
            d.rmdir()
        except OSError:
            pass


class PrivateDockerd(PrivateEngine):
    name = "dockerd"
    fixed_paths = FIXED_PATHS

    def __init__(self, dockerd: str) -> None:
        self.dockerd = dockerd
        # A short path: containerd's sockets live under the exec root and unix paths max out at 108 bytes.
        self.root = Path(tempfile.mkdtemp(prefix="hd-dockerd-", dir="/tmp"))
        self.socket = self.root / "docker.sock"
        self.host = f"unix://{self.socket}"
        self.log_path = self.root / "dockerd.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.cgroup_parent = f"/headroom-test-{os.getpid()}"
        self.preexisting: set[Path] = set(FIXED_PATHS)

    def start(self, timeout_s: float = 60) -> None:
        self.preexisting = {p for p in FIXED_PATHS if p.exists()}
        ns = f"headroom-test-{os.getpid()}"
        argv = [
            self.dockerd,
            "--host",
            self.host,
            "--data-root",
            str(self.root / "data"),
            "--exec-root",
            str(self.root / "exec"),
            "--pidfile",
            str(self.root / "dockerd.pid"),
            "--iptables=false",
            "--ip-forward=false",
            "--ip-masq=false",
            "--bridge=none",
            "--userland-proxy=false",
            "--containerd-namespace",
            ns,
            "--containerd-plugins-namespace",
            f"{ns}-plugins",
            "--cgroup-parent",
            self.cgroup_parent,
            "--log-level",
            "warn",
        ]
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(
                argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, cwd=self.root
            )  # its own dir, never the checkout (see podman.py)
        try:
            self._wait_ready(timeout_s)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        self._stop_process(api_timeout=30)
        self._remove_root_and_fixed_paths()
        name = self.cgroup_parent.lstrip("/")
        base = Path("/sys/fs/cgroup")
        _remove_cgroup_trees([*base.glob(f"*/{name}"), base / name])
