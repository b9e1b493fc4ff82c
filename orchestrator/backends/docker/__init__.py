"""The Docker backend: each try one container, speaking the Docker Engine API (which Podman also serves)."""
