"""The engine: from an experiment to recorded tries, the same for every backend.

* :mod:`.entry` is the one entry point of a sweep on this host (:func:`~.entry.run_sweep`): it builds the
  backend, runs the canary, derives the run's secrets once and runs the sweep, reporting
  :mod:`.events` for a front end to render; the CLI only parses, calls it and renders;
* :mod:`.sweep` holds a sweep's steps (load tasks, plan, record, execute);
* :mod:`.plan` expands an experiment into trials in a seeded block-randomized order;
* :mod:`.launch` builds the :class:`~orchestrator.spec.launch.Launch` of one try (all a backend sees);
* :mod:`.execute` runs the plan through a backend: bounded concurrency, resume, retries;
* :mod:`.settle` and :mod:`.classify` are the engine's decisions as pure functions (what is left to
  run; how a try's facts become exactly one outcome), shared with the in-cluster controller;
* :mod:`.services` adds what the engine gives each try (the model gateway's key, the artifact sink);
* :mod:`.canary` proves the limits bite before a sweep; :mod:`.overcommit` records what each try
  ran beside; :mod:`.provenance` what a rerun needs;
* :mod:`.regrade` re-grades stored answers into a new run without running an agent.

Below it: the trial contract (:mod:`orchestrator.contract`), the backends, the store and the
specs; above it: the CLI (:mod:`orchestrator.commands`), the controller and the reports.
"""
