#!/usr/bin/env bash
set -euo pipefail
bash "$HEADROOM_TASK_DIR/environment/setup.sh"
PY=$(command -v python3 || true)
case "$PY" in ""|*/shims/*) for c in /usr/local/bin/python3 /usr/bin/python3; do [ -x "$c" ] && { PY=$c; break; }; done;; esac
exec "$PY" "$HEADROOM_TASK_DIR/solution/triage.py"
