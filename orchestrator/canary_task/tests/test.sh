#!/usr/bin/env bash
if [ -f "$HEADROOM_WORKDIR/out" ]; then echo 1; else echo 0; fi > "$HEADROOM_LOGS_DIR/reward.txt"
