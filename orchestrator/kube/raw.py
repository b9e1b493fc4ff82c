"""Core v1 requests as the API server's JSON, without the client's generated ``CoreV1Api``.

Importing ``kubernetes.client.CoreV1Api`` costs a process about 20 MB for good: its module
(every endpoint of the core group, each wrapped in a pydantic ``validate_call``) and the 250
pydantic models it imports. The controller makes a handful of core requests itself (a task
set's ConfigMaps, the nodes' architectures, its Experiments' pods, its Events); sent through
here, they never load it, so a controller that only counts finished Trials stays without it
(docs/development.md, "Controller memory with 100,000 Trials"). Its Pod backend still uses
the typed API once it starts pods, but creates each pod through here: the generated
``create_namespaced_pod`` validated the body into a ``V1Pod`` and dumped it back on every call,
about 1.5 ms of CPU a pod for the same JSON (``tests/kubernetes/test_pod_spec.py`` compares them).

A request goes through the given ``ApiClient`` (its connection pool, TLS and credentials,
and the request counting of :class:`orchestrator.kube.client.KubeClient`), and fails as a
generated method does: :class:`ApiException` for any status outside 2xx.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

from kubernetes import client
from kubernetes.client.exceptions import ApiException


def request(
    api_client: Any,
    method: str,
    path: str,
    *,
    query: dict[str, Any] | None = None,
    body: Any = None,
    timeout: float | tuple[float, float] | None = 30.0,
) -> Any:
    """Send one request and read its response (the client's ``RESTResponse``: ``status``, ``data``). ``timeout``: in
    seconds, or (connect, read) as the generated methods' ``_request_timeout``."""
    headers = {"Accept": "application/json"}
    if body is not None:
        headers["Content-Type"] = "application/json"
    params = [(k, v) for k, v in (query or {}).items() if v is not None]
    method, url, headers, body, post = api_client.param_serialize(
        method, path, query_params=params or None, header_params=headers, body=body, auth_settings=["BearerToken"]
    )
    resp = api_client.call_api(
        method, url, header_params=headers, body=body, post_params=post, _request_timeout=timeout
    )
    resp.read()
    if not 200 <= resp.status <= 299:
        raise ApiException.from_response(http_resp=resp, body=None, data=None)
    return resp


def get_json(api_client: Any, path: str, **query: Any) -> Any:
    """GET ``path`` and decode its JSON."""
    return json.loads(request(api_client, "GET", path, query=query).data)


class CoreJson:
    """The few core calls the controller makes itself, by the generated methods' names, returning JSON.

    ``api_client`` is also a ``CoreV1Api``'s attribute: code handed either reads the client off it.
    """

    def __init__(self, api_client: Any) -> None:
        self.api_client = api_client

    def list_node(self, label_selector: str | None = None, **kw: Any) -> Any:
        """As ``CoreV1Api.list_node(..., _preload_content=False)``: a read response whose ``data`` is the JSON list."""
        return request(
            self.api_client,
            "GET",
            "/api/v1/nodes",
            query={"labelSelector": label_selector},
            timeout=kw.get("_request_timeout", 30.0),
        )

    def read_config_map(self, namespace: str, name: str) -> dict[str, Any]:
        return dict(
            get_json(
                self.api_client, f"/api/v1/namespaces/{quote(namespace, safe='')}/configmaps/{quote(name, safe='')}"
            )
        )

    def list_pods(self, namespace: str, label_selector: str) -> list[dict[str, Any]]:
        got = get_json(
            self.api_client, f"/api/v1/namespaces/{quote(namespace, safe='')}/pods", labelSelector=label_selector
        )
        return list(got.get("items") or [])

    def create_event(self, namespace: str, body: dict[str, Any]) -> None:
        request(self.api_client, "POST", f"/api/v1/namespaces/{quote(namespace, safe='')}/events", body=body)


class LazyCoreV1Api:
    """A ``CoreV1Api`` made on its first use: a process that never needs the typed API never imports it."""

    def __init__(self, api_client: Any) -> None:
        self.api_client = api_client
        self._api: Any = None

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        if self._api is None:
            self._api = client.CoreV1Api(self.api_client)
        return getattr(self._api, name)
