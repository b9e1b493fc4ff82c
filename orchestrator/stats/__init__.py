"""Statistics for headroom sweeps: intervals, paired and trend tests, pass@k /
pass^k, run-to-run spread, cluster-level scores, cost per solved task, power
and the calibration recommendation.

Entry points live in :mod:`orchestrator.stats.analyze`::

    from orchestrator.stats.analyze import analyze, compare_runs

Their results are typed (:mod:`orchestrator.spec.analysis`: ``Analysis``, ``RunComparison``), validated here,
where they are made, and read as they are by the report, the viewer and bundles.
(not re-exported here: the function ``analyze`` would shadow its own module,
and importing the package should not pull in statsmodels.)
"""
