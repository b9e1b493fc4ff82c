"""What crosses the line between an agent (or a verifier) and headroom's records.

Everything an agent writes is untrusted bytes, and everything headroom writes must hold no secret:

* :mod:`.text` makes every string that came from an agent valid UTF-8 at one choke point;
* :mod:`.safejson` is the one JSON loader for agent-, verifier- or pod-made text, bounded in size and depth;
* :mod:`.redact` keeps secrets out of the store, provenance, logs and reports.
"""
