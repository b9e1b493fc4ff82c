"""A finished Trial as the controller's cache keeps it: read like the API's JSON, held in slots.

A long sweep leaves almost all of its Trials finished, and the loop only counts them. As three
dicts (the object, its metadata, its spec) one costs about 550 bytes of hash tables before its
strings; these read-only mappings hold the same keys and values in slots, about 180 bytes, so
100,000 finished Trials take some 45 MB instead of 80. They support what the loop does with a
cached Trial (``t["spec"]["trialId"]``, ``t.get("status")``, comparison with a dict) and refuse
what it must never do: a write raises, and ``json.dumps`` of one raises instead of writing ``{}``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any


class _Fields(Mapping[str, Any]):
    """A read-only mapping over the keys its subclass lists as ``__slots__`` (every one set)."""

    __slots__ = ()

    def __getitem__(self, key: str) -> Any:
        if key in self.__slots__:
            return getattr(self, key)
        raise KeyError(key)

    def get(self, key: str, default: Any = None) -> Any:  # Mapping's goes through a KeyError: the loop asks often
        return getattr(self, key) if key in self.__slots__ else default

    def __contains__(self, key: object) -> bool:
        return key in self.__slots__

    def __iter__(self) -> Iterator[str]:
        return iter(self.__slots__)

    def __len__(self) -> int:
        return len(self.__slots__)

    def __repr__(self) -> str:
        return repr(dict(self))


class FinishedMetadata(_Fields):
    __slots__ = ("name", "resourceVersion")

    def __init__(self, name: str, resource_version: str) -> None:
        self.name = name
        self.resourceVersion = resource_version


class FinishedSpec(_Fields):
    __slots__ = ("experiment", "runId", "trialId", "try", "configuration")

    def __init__(
        self, experiment: Any, run_id: Any, trial_id: Any, try_: Any, configuration: Mapping[str, Any]
    ) -> None:
        self.experiment = experiment
        self.runId = run_id
        self.trialId = trial_id
        setattr(self, "try", try_)  # noqa: B010 - the API's key is a Python keyword
        self.configuration = configuration


class FinishedTrial(_Fields):
    __slots__ = ("metadata", "spec", "status")

    def __init__(self, metadata: FinishedMetadata, spec: FinishedSpec, status: Mapping[str, Any]) -> None:
        self.metadata = metadata
        self.spec = spec
        self.status = status
