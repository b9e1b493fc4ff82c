"""The in-cluster controller: Experiment and Trial custom resources driven by a reconcile loop.

It is the engine's plan / launch / settle code under a level-triggered loop, not a second
engine: every piece of state lives in the API (Trial resources are the store), so a
restart loses nothing.
"""
