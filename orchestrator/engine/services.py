"""What the engine adds around each try: the model gateway's key and the artifact sink.

At launch, a try gets its gateway environment (a per-try key, the base URLs) and the
sink learns that key, to redact it. When the try's result is in, the key is ended
(refused from then on), the gateway's transcript of the try's calls becomes its
``gateway/calls.jsonl`` artifact, the measured usage goes into its facts
(``model_usage``: the store then records tokens and cost with ``usage_source =
gateway``), and a summary of its artifacts into its evidence (``extra.artifacts``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.agentio.environ import take
from orchestrator.agentio.redact import secret_values, transformed
from orchestrator.artifacts import names
from orchestrator.artifacts.sink import StoreSink, TryKey, register, unregister
from orchestrator.spec.experiment import Experiment
from orchestrator.spec.facts import TrialFacts
from orchestrator.spec.launch import Launch

if TYPE_CHECKING:  # the gateway (uvicorn, httpx) is imported only by a run that has one
    from orchestrator.agents.gateway import Gateway, TryEnd


def run_secret_names(experiment: Experiment) -> list[str]:
    """The host variables whose values are redacted from everything a run writes: --agent-env and the
    gateway's upstream keys."""
    return [*experiment.agent.env_passthrough, *(experiment.gateway.key_vars() if experiment.gateway else [])]


def run_secrets(experiment: Experiment) -> list[str]:
    """The values redacted from everything a run writes, longest first: those of :func:`run_secret_names` and
    of any variable that looks secret. Derived once per run, before the gateway takes its keys out of the
    environment (engine/entry.py), and passed down to the run's record, its tries and their services."""
    return secret_values(run_secret_names(experiment))


@dataclass
class TryServices:
    run_id: str
    artifacts: StoreSink
    gateway: Gateway | None = None

    @classmethod
    def open(
        cls, store_path: Path, experiment: Experiment, run_id: str, secrets: list[str] | None = None
    ) -> TryServices:
        """The run's sink (registered for its backends) and, if the experiment has one, its gateway, started.

        ``secrets``: the run's (:func:`run_secrets`); None, derived here (before the keys are taken).
        """
        run_values = run_secrets(experiment) if secrets is None else secrets
        # The upstream keys live in the gateway alone: taken out of this process's environment (and its start-up
        # block, which /proc/PID/environ shows), so no child, and no reader of /proc, finds them.
        keys = take(experiment.gateway.key_vars()) if experiment.gateway is not None else {}
        every = {*run_values, *(t for v in keys.values() for t in transformed(v))}
        sink = StoreSink(store_path, experiment.artifacts, sorted(every, key=len, reverse=True))
        gateway = None
        try:
            if experiment.gateway is not None:
                from orchestrator.agents.gateway import Gateway

                gateway = Gateway(
                    experiment.gateway,
                    store_path,
                    environ=keys,
                    secrets=run_values,
                ).start()
        except BaseException:
            sink.close()
            raise
        register(run_id, sink)
        return cls(run_id, sink, gateway)

    def upstream_secrets(self) -> list[str]:
        """The gateway's upstream keys (no longer in the environment) and their transformed forms, to redact."""
        if self.gateway is None:
            return []
        return [t for key in self.gateway.secrets() for t in transformed(key)]

    def close(self) -> None:
        unregister(self.run_id)
        try:
            if self.gateway is not None:
                self.gateway.stop()
        finally:
            self.artifacts.close()

    def launch(self, launch: Launch) -> Launch:
        if self.gateway is None:
            return launch
        key = TryKey.of(launch)
        env = self.gateway.env_for(key)
        self.artifacts.protect(key, [env["HEADROOM_MODEL_API_KEY"]])
        agent = launch.agent.model_copy(update={"env": {**launch.agent.env, **env}})
        return launch.model_copy(update={"agent": agent, "model_gateway": self.gateway.base_url})

    @property
    def tripped(self) -> str | None:
        """Why the gateway's circuit breaker says the sweep must pause, or None."""
        return self.gateway.tripped if self.gateway is not None else None

    def end(self, key: TryKey) -> TryEnd | None:
        """End the try's key (first: nothing the try does later is counted) and store its transcript."""
        if self.gateway is None:
            return None
        end = self.gateway.end_try(key)
        if end.transcript is not None:
            self.artifacts.add_file(key, names.MODEL_CALLS, end.transcript)
            end.transcript.unlink(missing_ok=True)
        return end

    @staticmethod
    def secrets(end: TryEnd | None) -> list[str]:
        return [end.token] if end is not None and end.token else []

    def complete(self, key: TryKey, facts: TrialFacts, end: TryEnd | None) -> TrialFacts:
        """The settled facts with what the engine measured: model usage and the artifacts' summary."""
        update: dict[str, object] = {}
        if end is not None and facts.model_usage is None:  # else the engine put it in before settling (redacted)
            update["model_usage"] = end.usage
        summary = self.artifacts.finish(key)
        if summary is not None:
            update["extra"] = extra = facts.extra.model_copy()
            extra.artifacts = summary
        return facts.model_copy(update=update) if update else facts

    def abandon(self, key: TryKey) -> None:
        self.end(key)
        self.artifacts.finish(key)
