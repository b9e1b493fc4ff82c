"""The fixtures are other tools' task and result files (some hold their own pytest files): not ours to collect."""

collect_ignore = ["fixtures"]
