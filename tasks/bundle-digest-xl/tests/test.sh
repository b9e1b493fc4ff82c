#!/usr/bin/env bash
set -uo pipefail
PY=$(command -v python3 || true)
case "$PY" in ""|*/shims/*) for c in /usr/local/bin/python3 /usr/bin/python3; do [ -x "$c" ] && { PY=$c; break; }; done;; esac
"$PY" "$HEADROOM_TASK_DIR/tests/check.py" 160 || echo 0 > "$HEADROOM_LOGS_DIR/reward.txt"
