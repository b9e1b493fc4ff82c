"""How far a task set and its grading can be trusted: provenance, duplicates, judges."""
