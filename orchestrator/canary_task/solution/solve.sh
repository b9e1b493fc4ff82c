#!/usr/bin/env bash
# Spin one CPU for a moment and report the CPU time it got (a quota shows as CPU time well
# below wall time), then touch HEADROOM_CANARY_MB MiB page by page so the memory is charged.
# The report goes into the agent's self-report ($HEADROOM_AGENT_RESULT), which every backend
# brings back for every try; it is printed too, for the log.
set -eu
exec python3 -S -c '
import json, os, time
mb = int(os.environ["HEADROOM_CANARY_MB"])
spin = float(os.environ.get("HEADROOM_CANARY_SPIN_S", "0"))
wall0, cpu0 = time.monotonic(), time.process_time()
while time.monotonic() - wall0 < spin:
    pass
account = json.dumps({"spin_wall_s": time.monotonic() - wall0, "spin_cpu_s": time.process_time() - cpu0})
print(account, flush=True)
try:
    with open(os.environ["HEADROOM_AGENT_RESULT"], "w") as f:
        f.write(account)
except (KeyError, OSError):
    pass  # the memory check does not need it: the CPU check is then recorded as not measured
block = bytearray(mb * 1024 * 1024)
for i in range(0, len(block), 4096):
    block[i] = 1
open(os.path.join(os.environ["HEADROOM_WORKDIR"], "out"), "w").write(str(mb))
'
