"""A private rootful Podman API service for the test session: its own storage, run root, config and unix socket.

``podman system service`` serves the Docker Engine API (Podman's compat API) on a
unix socket under a temp folder; no TCP listener and no network set-up (tries run
with ``network_mode=none``). Everything Podman keeps is under that folder:
``storage.conf`` (graph root, run root), ``containers.conf`` (cgroupfs, file
events, tmp/volume/network-config dirs) and an empty ``registries.conf``, handed
to it through CONTAINERS_CONF, CONTAINERS_STORAGE_CONF and CONTAINERS_REGISTRIES_CONF.

Two quirks of this machine's sandboxed kernel, which the config works around:

* root here may not raise a resource limit (no CAP_SYS_RESOURCE) and Podman asks
  the runtime for RLIMIT_NOFILE/RLIMIT_NPROC of 1048576 in every container (and
  build step): ``default_ulimits`` pins them to what the service process itself has;
* crun refuses this hybrid cgroup v1 + v2 layout ("cgroups in hybrid mode not
  supported"), so the runtime is runc (Debian's, installed with docker.io).

:meth:`stop` removes every container, stops the service and the conmon monitors it
left (found by this service's root folder in their command line), unmounts what
is mounted under the folder, deletes it, and removes the fixed paths and cgroups
Podman made outside it when this service created them.
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import tempfile
from pathlib import Path

from .daemon import PrivateEngine, _remove_cgroup_trees

#: What Podman 4.3 makes outside its roots, at fixed paths: the image library's blob cache, crun's
#: state folder (made at start even with runc), and the cgroupfs parent of containers and conmon.
FIXED_PATHS = (
    Path("/var/lib/containers/cache/blob-info-cache-v1.boltdb"),
    Path("/var/lib/containers/cache"),
    Path("/var/lib/containers"),
    Path("/run/crun"),
)
CGROUP_PARENT = "libpod_parent"
#: Podman lowers its own RLIMIT_NPROC to this at start (the ulimit asked for may not exceed it).
PODMAN_NPROC = 32768


def _hard(kind: int, cap: int) -> int:
    hard = resource.getrlimit(kind)[1]
    return cap if hard == resource.RLIM_INFINITY else min(hard, cap)


class PrivatePodman(PrivateEngine):
    name = "podman system service"
    fixed_paths = FIXED_PATHS

    def __init__(self, podman: str) -> None:
        self.podman = podman
        self.root = Path(tempfile.mkdtemp(prefix="hd-podman-", dir="/tmp"))
        self.socket = self.root / "podman.sock"
        self.host = f"unix://{self.socket}"
        self.log_path = self.root / "podman.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.preexisting: set[Path] = set(FIXED_PATHS)
        self.cgroups_preexisting = True

    def _write_config(self) -> dict[str, str]:
        r = self.root
        (r / "storage.conf").write_text(f'[storage]\ndriver = "overlay"\ngraphroot = "{r}/root"\nrunroot = "{r}/run"\n')
        nofile = _hard(resource.RLIMIT_NOFILE, 1048576)
        nproc = _hard(resource.RLIMIT_NPROC, PODMAN_NPROC)
        (r / "containers.conf").write_text(
            "[containers]\n"
            f'default_ulimits = ["nofile={nofile}:{nofile}", "nproc={nproc}:{nproc}"]\n'
            "[engine]\n"
            'runtime = "runc"\n'
            'cgroup_manager = "cgroupfs"\n'
            # Each exec's conmon stays this long after the exec ends (300 s by default): many processes in a sweep.
            "exit_command_delay = 10\n"
            'events_logger = "file"\n'
            f'events_logfile_path = "{r}/events.log"\n'
            f'tmp_dir = "{r}/tmp"\n'
            f'static_dir = "{r}/root/libpod"\n'
            f'volume_path = "{r}/root/volumes"\n'
            "[network]\n"
            f'network_config_dir = "{r}/net"\n'
        )
        # No registry is reachable, and none is searched: an unknown short name fails at once.
        (r / "registries.conf").write_text("unqualified-search-registries = []\n")
        return {
            "CONTAINERS_CONF": str(r / "containers.conf"),
            "CONTAINERS_STORAGE_CONF": str(r / "storage.conf"),
            "CONTAINERS_REGISTRIES_CONF": str(r / "registries.conf"),
        }

    def start(self, timeout_s: float = 60) -> None:
        self.preexisting = {p for p in FIXED_PATHS if p.exists()}
        self.cgroups_preexisting = any(Path("/sys/fs/cgroup").glob(f"*/{CGROUP_PARENT}"))
        env = {**os.environ, **self._write_config()}
        argv = [self.podman, "--log-level", "warn", "system", "service", "--time=0", self.host]
        with self.log_path.open("wb") as log:
            # cwd: for an exec'd process it OOM-kills, Podman 4.3's conmon writes an empty file "oom" into its cwd
            self.proc = subprocess.Popen(
                argv, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True, cwd=self.root
            )
        try:
            self._wait_ready(timeout_s)
        except BaseException:
            self.stop()
            raise

    def _leftover_pids(self) -> list[int]:
        """conmon (and its exit commands) of this service: detached from it, named by its root in their argv."""
        mine = str(self.root).encode()
        pids = []
        for d in Path("/proc").iterdir():
            if not d.name.isdigit() or int(d.name) == os.getpid():
                continue
            try:
                if mine in (d / "cmdline").read_bytes():
                    pids.append(int(d.name))
            except OSError:
                pass
        return pids

    def stop(self) -> None:
        self._stop_process(api_timeout=60)
        # Exec sessions' conmons linger (--exit-delay) after their container is gone.
        for pid in self._leftover_pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self._remove_root_and_fixed_paths()
        if not self.cgroups_preexisting:
            _remove_cgroup_trees(list(Path("/sys/fs/cgroup").glob(f"*/{CGROUP_PARENT}")))
