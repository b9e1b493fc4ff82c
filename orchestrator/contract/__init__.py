"""The trial contract, once: the phases of a try, the step runner they are written against, the
sequence that runs them, the sanitiser script and the verifier's environment.

* :mod:`.phases`: the phase list (the Pod runner's is generated from it);
* :mod:`.runner`: :class:`~.runner.StepRunner`, the public interface a backend's environment
  implements (and a host-side agent acts through);
* :mod:`.sequence`: :func:`~.sequence.run_try`, the one implementation of the phases;
* :mod:`.sanitiser` and ``sanitise.sh``: what neutralises the agent's leftovers, run inside the
  environment by every backend;
* :mod:`.verifier_env`: the verifier's environment.

The paths themselves (``/tests``, ``/logs/verifier``...) are in :mod:`orchestrator.contract.paths`.
"""
