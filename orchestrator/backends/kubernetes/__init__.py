"""The Kubernetes backend: one Pod per try, watched (never polled), classified from Pod signals.

Modules, one job each: :mod:`.backend` (the Backend protocol), :mod:`.pod` (the
Pod of a try), :mod:`.scripts` (the in-pod runner and warden; a task's files as one ConfigMap per
content digest are :mod:`orchestrator.tasks.files`), :mod:`.informer` (one LIST+WATCH per run),
:mod:`.signals` (pod status + events -> facts, pure), :mod:`.message` (the
termination message), :mod:`.cluster_facts` (provenance), :mod:`.requests`
(counting every API request). See docs/kubernetes-backend.md.
"""
