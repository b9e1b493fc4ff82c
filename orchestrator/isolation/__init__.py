"""What confines a process on this host: trial cgroups, the bubblewrap sandbox and its seccomp filter, process
trees, and removing what they leave.

The local backend runs each try with them, and an external agent's host sandbox (orchestrator/agents) runs
the agent with them on every backend, so they sit below both (docs/isolation.md).
"""
