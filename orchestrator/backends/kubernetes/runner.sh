# headroom in-pod runner (POSIX sh). Runs as the task container's command.
#
# 1. agent step: cwd = the image's WORKDIR, logs in /logs/agent, own timeout;
# 2. kill every other process of this container (same cgroup), until none is left;
# 3. ask the warden container (which alone holds the tests) for them and block on a
#    FIFO: it hands them over only when it sees no process of this container but us;
# 4. copy them to /tests, check their manifest, run the verifier (fresh /logs/verifier);
# 5. write the facts as key=value lines, at most 4 KiB, to the termination message.
# The OOM-kill counter of the container's own memory cgroup is read around each step.
# Every path can be moved under $HR_ROOT so tests run this script on a plain host.
set -u
LC_ALL=C
export LC_ALL
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
HIDDEN="HR_AGENT_ENV HR_VERIFIER_ENV HR_TESTS_MANIFEST HR_AGENT_SCRIPT HR_AGENT_SHELL HR_VERIFIER_SCRIPT"
SH=sh
command -v bash >/dev/null 2>&1 && SH=bash

emit() { MSG="$MSG$1
"; }
flush() {  # the termination message so far (rewritten after each step: an OOM kill keeps the first)
  out=$MSG
  if [ "${#out}" -gt 4000 ]; then
    out="$(printf '%s' "$out" | grep -v -e '^agent_result=' -e '^detail=')
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
    [ "$rounds" -ge 200 ] && { emit "sweep_left=$left"; break; }
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
  name=$1 tmo=$2 envs=$3 script=$4 shellcmd=$5 logdir=$6 taskdir=$7
  oom_kills; oom0=$OOM
  now_cs; t0=$NOW_CS
  if [ -n "$script" ]; then
    ( cd "$WORKDIR" 2>/dev/null; unset $HIDDEN; step_env; eval "$envs"; exec "$SH" "$script" ) > "$logdir/stdout.txt" 2> "$logdir/stderr.txt" &
  else
    ( cd "$WORKDIR" 2>/dev/null; unset $HIDDEN; step_env; eval "$envs"; exec "$SH" -c "$shellcmd" ) > "$logdir/stdout.txt" 2> "$logdir/stderr.txt" &
  fi
  spid=$!
  ( sleep "$tmo"; kill -KILL "$spid" 2>/dev/null ) > /dev/null 2>&1 &
  wpid=$!
  wait "$spid"; STEP_EXIT=$?
  kill -KILL "$wpid" 2>/dev/null
  now_cs; STEP_CS=$((NOW_CS - t0))
  STEP_TIMEOUT=0
  [ "$STEP_EXIT" -gt 128 ] && [ "$STEP_CS" -ge $((tmo * 100 - 5)) ] && STEP_TIMEOUT=1
  sweep
  oom_kills; peak
  emit "${name}_exit=$STEP_EXIT"
  emit "${name}_cs=$STEP_CS"
  emit "${name}_timeout=$STEP_TIMEOUT"
  emit "${name}_oom0=$oom0"
  emit "${name}_oom1=$OOM"
  emit "${name}_peak=$PEAK"
  STEP_OOM=$((OOM - oom0))
}
step_env() {  # the contract's paths for this step (names in orchestrator/launch.py, paths in container_contract.py)
  export HEADROOM_WORKDIR="$WORKDIR" HEADROOM_LOGS_DIR="$logdir" HEADROOM_TASK_DIR="$taskdir" \
    HEADROOM_INSTRUCTION_FILE="$TASK/instruction.md"
  if [ "$name" = agent ]; then export HEADROOM_AGENT_RESULT="$LOGS/agent/result.json"; fi
}
one_line() {  # file -> at most $2 bytes on one line
  tr '\n\r\t' '   ' < "$1" | dd bs="$2" count=1 2>/dev/null
}
size_of() { wc -c < "$1" | tr -d ' '; }
manifest() {  # "cksum size path" per file under $1, sorted: what the warden must have handed over
  ( cd "$1" && find . -type f | LC_ALL=C sort | while IFS= read -r f; do cksum "$f"; done ) | tr '\n' ';'
}

emit "v=1"
emit "workdir=$(printf '%s' "$WORKDIR" | dd bs=200 count=1 2>/dev/null)"
if [ -n "$MEMCG" ]; then
  if [ -r "$MEMCG/memory.events" ]; then emit "memcg=v2"; else emit "memcg=v1"; fi
else emit "memcg=none"; fi
[ -r /proc/sys/kernel/yama/ptrace_scope ] && { read -r ps < /proc/sys/kernel/yama/ptrace_scope; emit "ptrace_scope=$ps"; }
mkdir -p "$LOGS/agent" "$RUN" 2>/dev/null

# ---- agent ------------------------------------------------------------------------------
agent_script=""
[ -n "${HR_AGENT_SCRIPT:-}" ] && agent_script=$(command_of "$HR_AGENT_SCRIPT")
run_step agent "${HR_AGENT_TIMEOUT:-600}" "${HR_AGENT_ENV:-}" "$agent_script" "${HR_AGENT_SHELL:-}" "$LOGS/agent" "$TASK"
agent_oom=$STEP_OOM agent_timeout=$STEP_TIMEOUT
if [ -f "$LOGS/agent/result.json" ] && [ ! -L "$LOGS/agent/result.json" ]; then
  n=$(size_of "$LOGS/agent/result.json")
  if [ "$n" -le 1500 ]; then emit "agent_result=$(one_line "$LOGS/agent/result.json" 1500)"; else emit "agent_result_size=$n"; fi
fi
flush

# ---- verifier ---------------------------------------------------------------------------
skip=""
[ "$agent_timeout" = 1 ] && skip=agent_timeout
[ "$agent_oom" -gt 0 ] 2>/dev/null && skip=agent_oom
if [ -z "$skip" ]; then
  # Nothing of the agent runs any more (sweep): what we create now it cannot touch.
  rm -rf "$RUN/wake" "$RUN/request"
  mkfifo -m 622 "$RUN/wake" || skip=no_fifo
fi
if [ -z "$skip" ]; then
  echo "$ME" > "$RUN/request"
  read -r answer rest < "$RUN/wake"
  case $answer in
    ok) ;;
    *) skip=tests_withheld; emit "detail=$(printf '%s' "$answer $rest" | dd bs=300 count=1 2>/dev/null)" ;;
  esac
fi
if [ -z "$skip" ]; then
  # A mount point (non-root pods) keeps its folder and loses its contents; anything else the
  # agent left at /tests (a folder, a link) is removed whole and made afresh.
  rm -rf "$TESTS" "$TESTS"/* "$TESTS"/.[!.]* "$TESTS"/..?* 2>/dev/null
  mkdir -p "$TESTS" || skip=tests_copy
  cp -R "$HANDOFF/tests/." "$TESTS/" 2>/dev/null || skip=tests_copy
  if [ -z "$skip" ] && [ "$(manifest "$TESTS")" != "${HR_TESTS_MANIFEST:-}" ]; then skip=tests_mismatch; fi
fi
if [ -z "$skip" ]; then
  rm -rf "$LOGS/verifier" "$RUN/vtask"
  mkdir -p "$LOGS/verifier" "$RUN/vtask"
  copy_entries "$TASK" "$RUN/vtask" 2>/dev/null
  rm -rf "$RUN/vtask/tests"
  ln -s "$TESTS" "$RUN/vtask/tests"
  for name in ${HR_SECRET_NAMES:-}; do unset "$name"; done
  run_step verifier "${HR_VERIFIER_TIMEOUT:-600}" "${HR_VERIFIER_ENV:-}" "$(command_of "${HR_VERIFIER_SCRIPT:-tests/test.sh}")" "" "$LOGS/verifier" "$RUN/vtask"
  for f in reward.txt reward.json; do
    p="$LOGS/verifier/$f"
    [ -f "$p" ] || continue
    n=$(size_of "$p")
    emit "reward_file=$f"
    emit "reward_size=$n"
    [ "$n" -le 512 ] && emit "reward=$(one_line "$p" 512)"
    break
  done
else
  emit "verifier_skipped=$skip"
fi
flush
for f in "$LOGS/agent/stdout.txt" "$LOGS/agent/stderr.txt" "$LOGS/verifier/stdout.txt" "$LOGS/verifier/stderr.txt"; do
  [ -s "$f" ] || continue
  echo "===== tail of $f ====="
  tail -c 2048 "$f"
  echo
done
exit 0
