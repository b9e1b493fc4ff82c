"""headroom's one Kubernetes client layer: used by the Pod backend, the controller and the CLI.

* :mod:`.client` builds the API client (every ``KUBECONFIG`` entry, or in-cluster), counting
  each request it sends (:mod:`.requests`);
* :mod:`.watch` is the one LIST+WATCH loop (resourceVersion, bookmarks, relist on 410) and the
  cache the controller keeps of its own kinds;
* :mod:`.errors` says what an API failure means to a caller (retry, wait, refused, gone);
* :mod:`.finalizers` removes headroom's finalizer and nothing else;
* :mod:`.exec` runs a command in a pod's container.
"""
