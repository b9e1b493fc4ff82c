#!/usr/bin/env bash
# Materialise the task input (what a container image would ship) into the workdir.
set -euo pipefail
PY=$(command -v python3 || true)
case "$PY" in ""|*/shims/*) for c in /usr/local/bin/python3 /usr/bin/python3; do [ -x "$c" ] && { PY=$c; break; }; done;; esac
"$PY" "$HEADROOM_TASK_DIR/environment/sales.py" "$HEADROOM_WORKDIR/sales.csv" "$HEADROOM_SEED"
