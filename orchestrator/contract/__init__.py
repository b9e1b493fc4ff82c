"""The trial contract, once: the phases of a try, the step runner they are written against, the
sequence that runs them, the sanitiser script and the verifier's environment.

* :mod:`.phases`: the phases, defined once as data (the Pod runner's are generated from it);
* :mod:`.runner`: :class:`~.runner.StepRunner`, the public interface a backend's environment
  implements (and a host-side agent acts through);
* :mod:`.sequence`: :func:`~.sequence.run_try`, which walks that definition through a step runner;
* :mod:`.sanitiser` and ``sanitise.sh``: what neutralises the agent's leftovers, run inside the
  environment by every backend;
* :mod:`.verifier_env`: the verifier's environment.

The paths themselves (``/tests``, ``/logs/verifier``...) are in :mod:`orchestrator.contract.paths`.
"""
