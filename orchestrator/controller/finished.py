"""A finished Trial as the controller's cache keeps it: read like the API's JSON, held in slots.

A long sweep leaves almost all of its Trials finished, and the loop only counts them. As three
dicts (the object, its metadata, its spec) one costs about 550 bytes of hash tables before its
strings; one read-only mapping holds the same keys and values in eight slots, 96 bytes (its
``metadata`` and ``spec`` are views made when read; three slotted objects took 176 bytes, 8 MB
more at 100,000 Trials). They support what the loop does with a cached Trial
(``t["spec"]["trialId"]``, ``t.get("status")``, comparison with a dict) and refuse what it must
never do: a write raises, and ``json.dumps`` of one raises instead of writing ``{}``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any


class _Fields(Mapping[str, Any]):
    """A read-only mapping over the keys its subclass lists as ``_KEYS`` (each an attribute of it, every one set)."""

    __slots__ = ()
    _KEYS: tuple[str, ...] = ()

    def __getitem__(self, key: str) -> Any:
        if key in self._KEYS:
            return getattr(self, key)
        raise KeyError(key)

    def get(self, key: str, default: Any = None) -> Any:  # Mapping's goes through a KeyError: the loop asks often
        return getattr(self, key) if key in self._KEYS else default

    def __contains__(self, key: object) -> bool:
        return key in self._KEYS

    def __iter__(self) -> Iterator[str]:
        return iter(self._KEYS)

    def __len__(self) -> int:
        return len(self._KEYS)

    def __repr__(self) -> str:
        return repr(dict(self))


class FinishedTrial(_Fields):
    """The held record: one object with eight slots (96 bytes) for what was three (176 bytes).

    ``metadata`` and ``spec`` are views built when read (a reconcile reads a few keys of each,
    then drops the view), so the cache holds one object per finished Trial, not three.
    """

    __slots__ = ("_name", "_rv", "_experiment", "_run_id", "_trial_id", "_try", "_configuration", "status")
    _KEYS = ("metadata", "spec", "status")

    def __init__(
        self,
        name: str,
        resource_version: str,
        experiment: Any,
        run_id: Any,
        trial_id: Any,
        try_: Any,
        configuration: Mapping[str, Any],
        status: Mapping[str, Any],
    ) -> None:
        self._name = name
        self._rv = resource_version
        self._experiment = experiment
        self._run_id = run_id
        self._trial_id = trial_id
        self._try = try_
        self._configuration = configuration
        self.status = status

    @property
    def metadata(self) -> FinishedMetadata:
        return FinishedMetadata(self)

    @property
    def spec(self) -> FinishedSpec:
        return FinishedSpec(self)


class FinishedMetadata(_Fields):
    """A finished Trial's metadata, read through the record (``name``, ``resourceVersion``)."""

    __slots__ = ("_t",)
    _KEYS = ("name", "resourceVersion")

    def __init__(self, trial: FinishedTrial) -> None:
        self._t = trial

    @property
    def name(self) -> str:
        return self._t._name

    @property
    def resourceVersion(self) -> str:  # noqa: N802 - the API's key
        return self._t._rv


class FinishedSpec(_Fields):
    """A finished Trial's spec, read through the record: what the loop counts by."""

    __slots__ = ("_t",)
    _KEYS = ("experiment", "runId", "trialId", "try", "configuration")
    _ATTR = {
        "experiment": "_experiment",
        "runId": "_run_id",
        "trialId": "_trial_id",
        "try": "_try",
        "configuration": "_configuration",
    }

    def __init__(self, trial: FinishedTrial) -> None:
        self._t = trial

    def __getitem__(self, key: str) -> Any:
        attr = self._ATTR.get(key)
        if attr is None:
            raise KeyError(key)
        return getattr(self._t, attr)

    def get(self, key: str, default: Any = None) -> Any:
        attr = self._ATTR.get(key)
        return default if attr is None else getattr(self._t, attr)
