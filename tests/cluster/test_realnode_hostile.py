"""The hostile corpus (tests/hostile/corpus.py) as real Pods on the real node: the same verdicts as local and Docker.

The corpus image (the Docker tests' base image with WORKDIR /app) is built by the session's
private dockerd and imported into the real node's containerd; every case runs in one sweep.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.hostile import corpus
from tests.hostile.harness import assert_nothing_leaks, sweep
from tests.hostile.test_backends_agree import check, corpus_image

from .conftest import POD_TASK_CPUS

pytestmark = [pytest.mark.slow]


@pytest.mark.docker
@pytest.mark.cluster
@pytest.mark.realnode
def test_the_corpus_on_pods_on_the_real_node(docker_env, real_node, cluster, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    if real_node.node is None:
        pytest.skip("an existing cluster's real node: push the corpus image to its registry instead")
    image = corpus_image(docker_env)
    real_node.node.import_image(image, docker_host=docker_env.host)
    ns = cluster.create_namespace(prefix="hostile", labels={"pod-security.kubernetes.io/enforce": "baseline"})
    cases = corpus.selected()
    root = tmp_path / "tasks"
    corpus.write_corpus(root, cases, tests_at="/tests", cpus=POD_TASK_CPUS)
    exp = tmp_path / "k8s.yaml"
    # Terminal-Bench 2 images run as root (as on Docker): Pod Security baseline
    exp.write_text(
        yaml.safe_dump({"image": image, "kubernetes": real_node.kubernetes_options(cluster, ns, run_as_root=True)})
    )
    run = sweep(root, tmp_path, "--backend", "kubernetes", "--experiment", str(exp), "--concurrency", "4", timeout=1500)
    check(run.store, cases)
    assert_nothing_leaks(run, isolation="pod")
