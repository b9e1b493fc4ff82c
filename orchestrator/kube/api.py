"""The Kubernetes client's API types, its error and its quantity parser, for the modules above kube/.

Only orchestrator/kube imports the ``kubernetes`` package (a contract in .importlinter, run by
scripts/test.sh): the Pod backend, the controller and the cluster commands take the generated API
classes (``client.CoreV1Api``, ``client.V1Pod`` ...), ``ApiException`` and ``parse_quantity`` from
here, so the one client layer knows every use of the client. Importing this module imports the
client: the modules that must not load it on the local path import it inside the function that needs it.
"""

from __future__ import annotations

from kubernetes import client as client
from kubernetes.client.exceptions import ApiException as ApiException
from kubernetes.utils import parse_quantity as parse_quantity
