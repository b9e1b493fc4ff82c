# headroom in-pod runner (POSIX sh). Runs as the task container's command.
#
# The phases run in the order of orchestrator/contract/phases.py (the `for phase in` list at the
# end is filled in from it by scripts.py):
# 0. optional agent setup (HR_SETUP_*), own timeout;
# 1. agent step: cwd = the image's WORKDIR, logs in /logs/agent, own timeout (an external agent's:
#    the environment is held while the host's agent acts on it over pods/exec; see end_external);
# 2. kill every other process of this container (same cgroup), until none is left;
# 3. ask the warden container (which alone holds the tests) for them and block on a
#    FIFO: it hands them over only when it sees no process of this container but us;
# 4. copy them to /tests, check their manifest, run the contract's sanitiser (the same script
#    as every backend's) in this container, run the verifier (fresh /logs/verifier) in the
#    contract's verifier environment;
# 5. write the facts as key=value lines, at most 4 KiB, to the termination message. Nothing an
#    agent (or a verifier) wrote reaches it as text: file contents go base64-encoded
#    (agent_result_b64, reward_b64), other agent-influenced text loses its control characters,
#    so no such value can hold a line break, and the parser splits on "\n" only.
# The OOM-kill counter of the container's own memory cgroup, and its CPU counters, are read around each step.
# Every path can be moved under $HR_ROOT so tests run this script on a plain host.
# Every command the runner itself runs (find, readlink, dd, cksum, tr, base64, the sanitiser's sh...) is
# found on one fixed absolute PATH (orchestrator/contract/sanitiser.py's, filled in by scripts.py), never
# on the image's: a folder of that PATH the agent can write (a work dir's bin) could otherwise stand in
# for a program that writes the termination message. The steps get the image's PATH back (the
# verifier's filtered by the contract's verifier environment). HR_RUNNER_PATH (never set in a pod) lets
# a test stand in for an image that lacks a program.
set -u
LC_ALL=C
export LC_ALL
IMAGE_PATH=${PATH:-}
PATH=${HR_RUNNER_PATH:-@FIXED_PATH@}
export PATH
R=${HR_ROOT:-}
TESTS=$R/tests
LOGS=$R/logs
SOLUTION=$R/solution
TASK=$R/headroom/task
RUN=$R/headroom/run
HANDOFF=$R/headroom/handoff
TERMLOG=${HR_TERMINATION_LOG:-/dev/termination-log}
WORKDIR=${HR_WORKDIR:-$PWD}
ME=$$
MSG=""
HIDDEN="HR_RUNNER_PATH HR_AGENT_PROGRAM HR_AGENT_PROGRAM_SCRIPT HR_AGENT_CHECK HR_AGENT_ENV HR_VERIFIER_ENV HR_TESTS_MANIFEST HR_AGENT_SCRIPT HR_AGENT_SHELL HR_VERIFIER_SCRIPT HR_SETUP_ENV HR_SETUP_SCRIPT HR_SETUP_SHELL HR_SAN_SCRIPT"
RSH=$(command -v sh 2>/dev/null) || RSH=/bin/sh  # the contract's own scripts (sanitiser, agent check), as elsewhere
SH=$RSH  # the steps' shell: bash when the image has it
command -v bash >/dev/null 2>&1 && SH=$(command -v bash)

emit() { MSG="$MSG$1
"; }
flush() {  # the termination message so far (rewritten after each step: an OOM kill keeps the first)
  out=$MSG
  if [ "${#out}" -gt 4000 ]; then
    out="$(printf '%s' "$out" | grep -v -e '^agent_result=' -e '^agent_result_b64=' -e '^detail=')
truncated=1
"
  fi
  printf '%s' "$out" | dd bs=4096 count=1 2>/dev/null > "$TERMLOG" || :
}
copy_entries() {  # the visible entries of $1 (not a ConfigMap mount's ..data) into $2, links followed
  for e in "$1"/* "$1"/.[!.]*; do
    [ -e "$e" ] || continue
    cp -R -L "$e" "$2/" || return 1
  done
}
now_cs() {  # centiseconds since boot, without a fork
  read -r NOW _ < /proc/uptime
  NOW_CS=$(( ${NOW%.*} * 100 + 1${NOW#*.} - 100 ))
}
MEMCG=${HR_MEMCG:-}
if [ -z "$MEMCG" ]; then
  if [ -r /sys/fs/cgroup/memory.events ]; then MEMCG=/sys/fs/cgroup
  elif [ -r /sys/fs/cgroup/memory/memory.oom_control ]; then MEMCG=/sys/fs/cgroup/memory
  fi
fi
oom_kills() {  # OOM kills counted by the container's own memory cgroup (v2 memory.events, v1 memory.oom_control)
  OOM=0
  for f in "$MEMCG/memory.events" "$MEMCG/memory.oom_control"; do
    [ -r "$f" ] || continue
    while read -r k v; do [ "$k" = oom_kill ] && OOM=$v; done < "$f"
    return 0
  done
  OOM=-1
}
# The container's CPU counters (cgroup v2 cpu.stat: usage_usec and the quota's throttling; v1:
# cpuacct.usage in ns, cpu.stat's throttled_time in ns), read around each step like the OOM counter.
CPUCG=${HR_CPUCG:-} CPUACCT=${HR_CPUACCT:-}
if [ -z "$CPUCG" ]; then
  for d in /sys/fs/cgroup /sys/fs/cgroup/cpu,cpuacct /sys/fs/cgroup/cpu; do
    [ -r "$d/cpu.stat" ] && { CPUCG=$d; break; }
  done
fi
if [ -z "$CPUACCT" ]; then
  for d in /sys/fs/cgroup/cpu,cpuacct /sys/fs/cgroup/cpuacct; do
    [ -r "$d/cpuacct.usage" ] && { CPUACCT=$d; break; }
  done
fi
cpu_stat() {  # -> CPU_US PERIODS THROTTLED THR_US (-1 where the counter is not readable), without a fork
  CPU_US=-1 PERIODS=-1 THROTTLED=-1 THR_US=-1
  if [ -n "$CPUCG" ] && [ -r "$CPUCG/cpu.stat" ]; then
    while read -r k v; do
      case $k in
        usage_usec) CPU_US=$v ;;
        nr_periods) PERIODS=$v ;;
        nr_throttled) THROTTLED=$v ;;
        throttled_usec) THR_US=$v ;;
        throttled_time) THR_US=$((v / 1000)) ;;
      esac
    done < "$CPUCG/cpu.stat"
  fi
  if [ "$CPU_US" = -1 ] && [ -n "$CPUACCT" ] && [ -r "$CPUACCT/cpuacct.usage" ]; then
    read -r v < "$CPUACCT/cpuacct.usage" && CPU_US=$((v / 1000))
  fi
}
peak() {
  PEAK=-1
  for f in "$MEMCG/memory.peak" "$MEMCG/memory.max_usage_in_bytes"; do
    [ -r "$f" ] && { read -r PEAK < "$f"; return 0; }
  done
}
read_cgroup() {  # the cgroup lines of process $1 in one variable, without a fork
  CGV=""
  { while read -r l; do CGV="$CGV$l;"; done < "/proc/$1/cgroup"; } 2>/dev/null
}
read_cgroup $ME
MYCG=$CGV
sweep() {  # SIGKILL every process of this container (our cgroup) except the runner, until none is left
  rounds=0
  while :; do
    left=0
    for d in /proc/[0-9]*; do
      p=${d#/proc/}
      [ "$p" = "$ME" ] && continue
      [ "$p" = 1 ] && continue
      read -r st 2>/dev/null < "$d/stat" || continue
      rest=${st##*) }
      [ "${rest%% *}" = Z ] && continue
      read_cgroup "$p"
      [ "$CGV" = "$MYCG" ] || continue
      kill -KILL "$p" 2>/dev/null && left=$((left + 1))
    done
    [ "$left" = 0 ] && break
    rounds=$((rounds + 1))
    [ "$rounds" -ge 200 ] && { emit "${name}_sweep_left=$left"; break; }
  done
  wait 2>/dev/null
}
command_of() {  # a launch's script path (relative to the task) -> where the contract puts it
  case $1 in
    tests/*) echo "$TESTS/${1#tests/}" ;;
    solution/*) echo "$SOLUTION/${1#solution/}" ;;
    *) echo "$TASK/$1" ;;
  esac
}
# run_step NAME TIMEOUT_S ENV SCRIPT SHELLCMD LOGDIR TASKDIR -> STEP_EXIT STEP_CS STEP_TIMEOUT STEP_OOM
run_step() {
  name=$1 tmo=$2 envs=$3 script=$4 shellcmd=$5 logdir=$6 taskdir=$7 outdir=${8:-$6}
  oom_kills; oom0=$OOM
  cpu_stat; cpu0=$CPU_US periods0=$PERIODS throttled0=$THROTTLED thr0=$THR_US
  now_cs; t0=$NOW_CS
  if [ -n "$script" ]; then
    ( cd "$WORKDIR" 2>/dev/null; unset $HIDDEN; PATH=$IMAGE_PATH; step_env; eval "$envs"; step_env_last; exec "$SH" "$script" ) > "$outdir/stdout.txt" 2> "$outdir/stderr.txt" &
  else
    ( cd "$WORKDIR" 2>/dev/null; unset $HIDDEN; PATH=$IMAGE_PATH; step_env; eval "$envs"; step_env_last; exec "$SH" -c "$shellcmd" ) > "$outdir/stdout.txt" 2> "$outdir/stderr.txt" &
  fi
  spid=$!
  # The watcher exits 0 only when it fired (its kill of the step succeeded); ended by us first, it
  # dies of SIGKILL. A timeout is that status plus the runner's own clock, never the step's exit
  # code: an agent exiting 137 near its deadline once passed for a timeout.
  ( sleep "$tmo"; kill -KILL "$spid" 2>/dev/null ) > /dev/null 2>&1 &
  wpid=$!
  wait "$spid"; STEP_EXIT=$?
  kill -KILL "$wpid" 2>/dev/null
  wait "$wpid"; fired=$?
  [ "$name" = agent ] && [ -n "${HR_AGENT_EXTERNAL:-}" ] && end_external
  now_cs; STEP_CS=$((NOW_CS - t0))
  STEP_TIMEOUT=0
  [ "$fired" = 0 ] && [ "$STEP_CS" -ge $((tmo * 100 - 5)) ] && STEP_TIMEOUT=1
  sweep
  oom_kills; peak; cpu_stat
  emit "${name}_exit=$STEP_EXIT"
  emit "${name}_cs=$STEP_CS"
  emit "${name}_timeout=$STEP_TIMEOUT"
  emit "${name}_oom0=$oom0"
  emit "${name}_oom1=$OOM"
  emit "${name}_peak=$PEAK"
  if [ "$cpu0" -ge 0 ] && [ "$CPU_US" -ge 0 ]; then emit "${name}_cpu_us=$((CPU_US - cpu0))"; fi
  if [ "$periods0" -ge 0 ] && [ "$PERIODS" -ge 0 ]; then
    emit "${name}_cpu_thr=$((PERIODS - periods0)),$((THROTTLED - throttled0)),$((THR_US - thr0))"
  fi
  STEP_OOM=$((OOM - oom0))
}
step_env() {  # the contract's paths for this step (names in orchestrator/engine/launch.py, paths in container_contract.py)
  export HEADROOM_WORKDIR="$WORKDIR" HEADROOM_LOGS_DIR="$logdir" HEADROOM_TASK_DIR="$taskdir" \
    HEADROOM_INSTRUCTION_FILE="$TASK/instruction.md"
  if [ "$name" = agent ]; then export HEADROOM_AGENT_RESULT="$LOGS/agent/result.json"; fi
}
step_env_last() {  # after the task's own variables: the verifier's fixed ones win
  if [ "$name" = verifier ]; then verifier_env; fi
}
HAVE_B64=""
command -v base64 >/dev/null 2>&1 && HAVE_B64=1
no_ctl() {  # stdin -> stdout without control characters (a value stays on its line whatever the parser)
  tr -d '\000-\037\177'
}
emit_file() {  # KEY FILE MAX: the file's first MAX bytes as KEY_b64=BASE64 (KEY=TEXT without base64)
  if [ -n "$HAVE_B64" ]; then
    emit "${1}_b64=$(dd if="$2" bs="$3" count=1 2>/dev/null | base64 | tr -d '\n\r ')"
  else
    emit "$1=$(dd if="$2" bs="$3" count=1 2>/dev/null | no_ctl)"
  fi
}
size_of() { wc -c < "$1" | tr -d ' '; }
manifest() {  # "cksum size path" per file under $1, sorted: what the warden must have handed over
  ( cd "$1" && find . -type f | LC_ALL=C sort | while IFS= read -r f; do cksum "$f"; done ) | tr '\n' ';'
}

# The contract's sanitiser (orchestrator/contract/sanitise.sh), the same script every backend runs,
# and the verifier's environment (orchestrator/contract/verifier_env.py): filled in by scripts.py.
HR_SAN_SCRIPT=@SANITISER@
verifier_env() {  # the trees the agent could write here, then the contract's filters
HR_UNTRUSTED="$WORKDIR:$LOGS/agent"
@VERIFIER_ENV@
}

# Each secret named in HR_SECRET_NAMES (its value from the environment) -> [REDACTED], literally.
REDACT_AWK='BEGIN { n = split(ENVIRON["HR_SECRET_NAMES"], names, " ") }
{ line = $0
  for (i = 1; i <= n; i++) {
    v = ENVIRON[names[i]]; if (v == "") continue
    out = ""
    while ((j = index(line, v)) > 0) { out = out substr(line, 1, j - 1) "[REDACTED]"; line = substr(line, j + length(v)) }
    line = out line
  }
  print line }'

# ---- the record: the steps' complete output and the agent's logs dir, as one bounded tar printed
# base64-encoded at the end of the container log, after every agent and verifier process is gone.
# Its size and sha256 go into the termination message (the runner's channel), so the backend takes
# exactly those last bytes of the log and checks them: whatever an agent printed into the log before
# the sweep cannot stand in for them. The content is agent-written and is kept as artifacts only,
# never read for the verdict. With secrets, the agent's files are staged and redacted here (line by
# line) while the runner still holds the values, so no secret reaches the container log as written.
RECORDS_MAX=${HR_RECORDS_MAX:-4194304}
REC_SRC=$LOGS
stage_records() {
  [ -n "${HR_SECRET_NAMES:-}" ] || return 0
  REC_SRC=""
  command -v awk >/dev/null 2>&1 || { emit "records=withheld_no_awk"; return 0; }
  rm -rf "$RUN/rec" && mkdir -p "$RUN/rec" || return 0
  for d in agent_setup agent; do
    [ -d "$LOGS/$d" ] && [ ! -L "$LOGS/$d" ] && cp -R -P "$LOGS/$d" "$RUN/rec/" 2>/dev/null
  done
  find "$RUN/rec" -type f 2>/dev/null | while IFS= read -r f; do
    awk "$REDACT_AWK" < "$f" > "$f.hr-redacted" 2>/dev/null && mv "$f.hr-redacted" "$f" || rm -f "$f" "$f.hr-redacted"
  done
  REC_SRC=$RUN/rec
}
records() {  # -> $RUN/records.tar (at most RECORDS_MAX bytes) and its facts in the message
  REC=""
  [ -n "$REC_SRC" ] || return 0
  command -v tar >/dev/null 2>&1 || { emit "records=no_tar"; return 0; }
  [ -n "$HAVE_B64" ] || { emit "records=no_base64"; return 0; }
  if [ "$REC_SRC" != "$LOGS" ] && [ -d "$LOGS/verifier" ]; then
    rm -rf "$REC_SRC/verifier"; cp -R -P "$LOGS/verifier" "$REC_SRC/" 2>/dev/null
  fi
  set --
  for d in agent_setup agent verifier; do [ -e "$REC_SRC/$d" ] && set -- "$@" "$d"; done
  [ "$#" -gt 0 ] || return 0
  rm -f "$RUN/records.tar" "$RUN/records.cut"
  ( cd "$REC_SRC" && tar -cf - "$@" 2>/dev/null ) | head -c $((RECORDS_MAX + 1)) > "$RUN/records.tar"
  n=$(size_of "$RUN/records.tar")
  if [ "$n" -gt "$RECORDS_MAX" ]; then
    head -c "$RECORDS_MAX" "$RUN/records.tar" > "$RUN/records.cut" && mv "$RUN/records.cut" "$RUN/records.tar"
    n=$RECORDS_MAX
    emit "records_truncated=1"
  fi
  emit "records_bytes=$n"
  command -v sha256sum >/dev/null 2>&1 && emit "records_sha256=$(sha256sum < "$RUN/records.tar" | cut -d ' ' -f 1)"
  REC=1
}

emit "v=1"
emit "workdir=$(printf '%s' "$WORKDIR" | no_ctl | dd bs=200 count=1 2>/dev/null)"
if [ -n "$MEMCG" ]; then
  if [ -r "$MEMCG/memory.events" ]; then emit "memcg=v2"; else emit "memcg=v1"; fi
else emit "memcg=none"; fi
[ -r /proc/sys/kernel/yama/ptrace_scope ] && { read -r ps < /proc/sys/kernel/yama/ptrace_scope; emit "ptrace_scope=$ps"; }
mkdir -p "$LOGS/agent" "$RUN" 2>/dev/null
: > "$RUN/runner.started" 2>/dev/null  # the warden's sign that this container ran (see warden.sh)

# ---- phases: orchestrator/contract/phases.py's list, in its order (filled in by scripts.py) -----
skip="" agent_skip=""
phase_agent_setup() {  # optional; a failure is infra_error(agent_setup_failed), and nothing else runs
  [ -n "${HR_SETUP_SCRIPT:-}${HR_SETUP_SHELL:-}" ] || return 0
  setup_script=""
  [ -n "${HR_SETUP_SCRIPT:-}" ] && setup_script=$(command_of "$HR_SETUP_SCRIPT")
  mkdir -p "$LOGS/agent_setup"
  run_step agent_setup "${HR_SETUP_TIMEOUT:-600}" "${HR_SETUP_ENV:-}" "$setup_script" "${HR_SETUP_SHELL:-}" "$LOGS/agent" "$TASK" "$LOGS/agent_setup"
  if [ "$STEP_EXIT" != 0 ] || [ "$STEP_TIMEOUT" = 1 ] || [ "$STEP_OOM" -gt 0 ] 2>/dev/null; then
    skip=agent_setup_failed
  fi
  flush
}
# The contract's agent_check (orchestrator/contract/agent_check.py, filled in by scripts.py): before the
# agent gets control, headroom's own script resolves the agent command's program (HR_AGENT_PROGRAM) and,
# for an interpreter, its script (HR_AGENT_PROGRAM_SCRIPT, the check's third argument) in the agent's
# environment and working directory. Not found: the agent never starts (agent_not_found).
HR_AGENT_CHECK=@AGENT_CHECK@
phase_agent_check() {
  [ -z "${HR_AGENT_EXTERNAL:-}" ] && [ -n "${HR_AGENT_PROGRAM:-}" ] && [ -z "${HR_AGENT_SCRIPT:-}" ] || return 0
  rm -f "$RUN/agent_check.out"
  # The check and its words become positional parameters before the task's variables are eval'd: a task
  # variable of the same name as one of the runner's cannot replace them.
  ( cd "$WORKDIR" 2>/dev/null; name=agent logdir=$LOGS/agent taskdir=$TASK
    set -- "$HR_AGENT_CHECK" headroom-agent-check "$HR_AGENT_PROGRAM" "$SH" \
      ${HR_AGENT_PROGRAM_SCRIPT:+"$HR_AGENT_PROGRAM_SCRIPT"}
    envs=${HR_AGENT_ENV:-}; unset $HIDDEN; PATH=$IMAGE_PATH; step_env; eval "$envs"
    exec "$RSH" -c "$@" ) > "$RUN/agent_check.out" 2>/dev/null &
  cpid=$!
  ( sleep @AGENT_CHECK_TIMEOUT@; kill -KILL "$cpid" 2>/dev/null ) > /dev/null 2>&1 &
  wpid=$!
  wait "$cpid"
  kill -KILL "$wpid" 2>/dev/null
  name=agent_check
  sweep
  cst="" cdetail=""
  while IFS='=' read -r k v; do
    case $k in agent_check) [ -z "$cst" ] && cst=$v ;; agent_check_detail) [ -z "$cdetail" ] && cdetail=$v ;; esac
  done < "$RUN/agent_check.out"
  emit "agent_check=$(printf '%s' "${cst:-unchecked}" | no_ctl | dd bs=20 count=1 2>/dev/null)"
  if [ "$cst" = not_found ]; then
    emit "agent_not_found=$(printf '%s' "$cdetail" | no_ctl | dd bs=300 count=1 2>/dev/null)"
    skip=agent_not_found
    flush
  fi
}
# An external agent (HR_AGENT_EXTERNAL=1) runs on the host and acts on this container over pods/exec
# (orchestrator/backends/kubernetes/exec_target.py). Its phase here only holds the environment: it
# says it is ready ($RUN/agent.ready), waits for the host's word that the agent ended ($RUN/agent.done:
# "exit N", "timeout" or "spawn_error"), bounded by HR_AGENT_TIMEOUT (the agent's timeout plus the
# host's start-up slack). Then $RUN/agent.ended, made before the sweep, refuses every later exec.
end_external() {
  rm -rf "$RUN/agent.ended" 2>/dev/null
  mkdir "$RUN/agent.ended" 2>/dev/null
}
EXTERNAL_WAIT="rm -f '$RUN/agent.done'; : > '$RUN/agent.ready'; while [ ! -s '$RUN/agent.done' ]; do sleep 1; done"
phase_agent() {
  agent_script=""
  [ -n "${HR_AGENT_SCRIPT:-}" ] && agent_script=$(command_of "$HR_AGENT_SCRIPT")
  if [ -n "${HR_AGENT_EXTERNAL:-}" ]; then
    rm -rf "$RUN/agent.ended" "$RUN/agent.done" "$RUN/agent.ready"
    run_step agent "${HR_AGENT_TIMEOUT:-600}" "" "" "$EXTERNAL_WAIT" "$LOGS/agent" "$TASK" "$RUN"
    how=none
    [ -f "$RUN/agent.done" ] && read -r how _ < "$RUN/agent.done"
    emit "agent_external=$(printf '%s' "$how" | no_ctl | dd bs=20 count=1 2>/dev/null)"
    case $how in
      timeout) STEP_TIMEOUT=1 ;;
      spawn_error) agent_skip=agent_spawn_error ;;
    esac
  else
    run_step agent "${HR_AGENT_TIMEOUT:-600}" "${HR_AGENT_ENV:-}" "$agent_script" "${HR_AGENT_SHELL:-}" "$LOGS/agent" "$TASK"
  fi
  agent_oom=$STEP_OOM agent_timeout=$STEP_TIMEOUT
}
phase_stop() {  # run_step swept every process of this container; what the agent left is read now
  [ -n "${HR_AGENT_EXTERNAL:-}" ] && end_external  # again, now that no process of the agent can remove it
  # The agent's output tails for the container log, taken now: the secrets are still in our
  # environment, so they are redacted in 4 KiB of slack before the 2 KiB cut (a secret printed
  # across the cut leaves no piece; the backend redacts again and scrubs the cut edges).
  for stream in stdout stderr; do
    f="$LOGS/agent/$stream.txt"
    rm -f "$RUN/agent-$stream.tail"
    { [ -f "$f" ] && [ ! -L "$f" ] && [ -s "$f" ]; } || continue
    if [ -n "${HR_SECRET_NAMES:-}" ] && command -v awk >/dev/null 2>&1; then
      tail -c 6144 "$f" | awk "$REDACT_AWK" | tail -c 2048 > "$RUN/agent-$stream.tail"
    else
      tail -c 2048 "$f" > "$RUN/agent-$stream.tail"
    fi
  done
  if [ -f "$LOGS/agent/result.json" ] && [ ! -L "$LOGS/agent/result.json" ]; then
    n=$(size_of "$LOGS/agent/result.json")
    if [ "$n" -le 1500 ]; then emit_file agent_result "$LOGS/agent/result.json" 1500; else emit "agent_result_size=$n"; fi
  fi
  stage_records
  flush
  [ -n "${agent_skip:-}" ] && skip=$agent_skip
  [ "$agent_timeout" = 1 ] && skip=agent_timeout
  [ "$agent_oom" -gt 0 ] 2>/dev/null && skip=agent_oom
  for name in ${HR_SECRET_NAMES:-}; do unset "$name"; done
}
phase_handover() {
  # Nothing of the agent runs any more (sweep): what we create now it cannot touch.
  rm -rf "$RUN/wake" "$RUN/request"
  mkfifo -m 622 "$RUN/wake" || { skip=no_fifo; return; }
  echo "$ME" > "$RUN/request"
  read -r answer rest < "$RUN/wake"
  case $answer in
    ok) ;;
    *) skip=tests_withheld; emit "detail=$(printf '%s' "$answer $rest" | no_ctl | dd bs=300 count=1 2>/dev/null)"; return ;;
  esac
  # A mount point (non-root pods) keeps its folder and loses its contents; anything else the
  # agent left at /tests (a folder, a link) is removed whole and made afresh.
  rm -rf "$TESTS" "$TESTS"/* "$TESTS"/.[!.]* "$TESTS"/..?* 2>/dev/null
  mkdir -p "$TESTS" || { skip=tests_copy; return; }
  cp -R "$HANDOFF/tests/." "$TESTS/" 2>/dev/null || { skip=tests_copy; return; }
  if [ "$(manifest "$TESTS")" != "${HR_TESTS_MANIFEST:-}" ]; then skip=tests_mismatch; return; fi
  rm -rf "$LOGS/verifier" "$RUN/vtask"
  mkdir -p "$LOGS/verifier" "$RUN/vtask"
  copy_entries "$TASK" "$RUN/vtask" 2>/dev/null
  rm -rf "$RUN/vtask/tests"
  ln -s "$TESTS" "$RUN/vtask/tests"
}
phase_sanitise() {  # the contract's sanitiser, as the verifier's user (ours), in /, with a hard timeout
  hidden="$RUN/vtask"
  for v in ${HR_VERIFIER_ONLY:-/tests /logs/verifier /solution /headroom/handoff}; do hidden="$hidden $R$v"; done
  rm -f "$RUN/sanitise.out"  # the agent could have left a FIFO or a link there
  ( cd / || exit 1
    HR_SAN_SCRIPT=$HR_SAN_SCRIPT HR_SAN_HIDDEN=$hidden HR_SAN_PRUNE="$R/headroom" \
      HR_SAN_MAX_LINKS="${HR_SAN_MAX_LINKS:-@SAN_MAX_LINKS@}" HR_SAN_RESOLVE_S=@SAN_RESOLVE_S@ HR_SAN_BUDGET_S=@SAN_BUDGET_S@
    export HR_SAN_SCRIPT HR_SAN_HIDDEN HR_SAN_PRUNE HR_SAN_MAX_LINKS HR_SAN_RESOLVE_S HR_SAN_BUDGET_S
    exec "$RSH" -c "$HR_SAN_SCRIPT" headroom-sanitise "$WORKDIR" "$LOGS/agent" ) > "$RUN/sanitise.out" 2>/dev/null &
  spid=$!
  ( sleep "${HR_SAN_TIMEOUT:-@SAN_TIMEOUT@}"; kill -KILL "$spid" 2>/dev/null ) > /dev/null 2>&1 &
  wpid=$!
  wait "$spid"
  kill -KILL "$wpid" 2>/dev/null
  st=crashed lr=0 lu=0 rr=0
  while IFS='=' read -r k v; do
    case $k in
      status) st=$v ;; links_removed) lr=$v ;; links_unjudged) lu=$v ;; roots_replaced) rr=$v ;;
      special_removed|special_left|unlistable|links_unremovable) [ "$v" != 0 ] && emit "sanitise_$k=$v" ;;
    esac
  done < "$RUN/sanitise.out"
  emit "sanitise=$(printf '%s' "$st" | no_ctl | dd bs=20 count=1 2>/dev/null)"
  emit "verifier_only_links_removed=$((lr + lu + rr))"
  [ "$st" = ok ] || skip=unjudged_state
}
phase_verifier() {
  run_step verifier "${HR_VERIFIER_TIMEOUT:-600}" "${HR_VERIFIER_ENV:-}" "$(command_of "${HR_VERIFIER_SCRIPT:-tests/test.sh}")" "" "$LOGS/verifier" "$RUN/vtask"
}
phase_reward() {
  for f in reward.txt reward.json; do
    p="$LOGS/verifier/$f"
    [ -f "$p" ] && [ ! -L "$p" ] || continue
    n=$(size_of "$p")
    emit "reward_file=$f"
    emit "reward_size=$n"
    [ "$n" -le 512 ] && emit_file reward "$p" 512
    break
  done
}
for phase in @PHASES@; do
  "phase_$phase"
  [ -n "$skip" ] && break
done
[ -n "$skip" ] && emit "verifier_skipped=$skip"
[ "$skip" = agent_setup_failed ] && stage_records
records
flush
for stream in stdout stderr; do
  [ -s "$RUN/agent-$stream.tail" ] || continue
  echo "===== tail of $LOGS/agent/$stream.txt ====="
  cat "$RUN/agent-$stream.tail"
  echo
done
for f in "$LOGS/verifier/stdout.txt" "$LOGS/verifier/stderr.txt"; do
  [ -s "$f" ] || continue
  echo "===== tail of $f ====="
  tail -c 2048 "$f"
  echo
done
if [ -n "$REC" ]; then
  echo "===== headroom records $(size_of "$RUN/records.tar") ====="
  base64 < "$RUN/records.tar"
  echo "===== end of headroom records ====="
fi
exit 0
