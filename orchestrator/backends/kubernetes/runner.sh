# headroom in-pod runner (POSIX sh). Runs in two containers of one pod, from the same image:
#
# The phases are not written here: phase_sh.py renders them from orchestrator/contract/phases.py's DEFINITION
# (below, at the end of the step runner's operations); this file is the Pod's step runner and its two halves.
# HR_ROLE=agent: the agent's container, an init container. The definition's phases up
#   to `stop`: optional agent setup (HR_SETUP_*); the agent check; the agent step
#   (cwd = the image's WORKDIR, logs in /logs/agent, own timeout; an external agent's: the environment is
#   held while the host's agent acts on it over pods/exec, see end_external); every other process of this
#   container killed (same cgroup) until none is left. Then the work dir is copied out into the agent's run
#   dir (an emptyDir), and the facts go to $RUN/agent.msg. Whatever the agent installed dies with this
#   container's root filesystem.
# HR_ROLE=verifier: the task container, started by the kubelet only once the agent's container has exited,
#   on a fresh root filesystem of the image: the verifier never runs a program, module or shell the agent
#   could have replaced. It takes the agent's facts, copies the agent's work dir in, asks the warden (which
#   alone holds the tests) for them over its own run dir (which the agent never mounted), copies them to
#   /tests and checks their manifest, runs the contract's sanitiser (the same script as every backend's) and
#   the verifier (fresh /logs/verifier) in the contract's verifier environment, and keeps the record.
# Each half writes its facts as key=value lines, at most 4 KiB, to its termination message; the verifier's
# carries both (the backend reads that one). Nothing an agent (or a verifier) wrote reaches it as text: file
# contents go base64-encoded (agent_result_b64, reward_b64), other agent-influenced text loses its control
# characters, so no such value can hold a line break, and the parser splits on "\n" only.
# The OOM-kill counter of the container's own memory cgroup, and its CPU counters, are read around each step.
# Every path can be moved under $HR_ROOT (and HR_RUN, HR_AGENT_RUN) so tests run this script on a plain host.
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
RUN=${HR_RUN:-$R/headroom/run}
ARUN=${HR_AGENT_RUN:-$R/headroom/agent-run}  # the agent's run dir, read-only, in the verifier's container
HANDOFF=$R/headroom/handoff
ROLE=${HR_ROLE:-}
TERMLOG=${HR_TERMINATION_LOG:-/dev/termination-log}
WORKDIR=${HR_WORKDIR:-$PWD}
ME=$$
MSG=""
HIDDEN="HR_RECORDS_REDACTED HR_ROLE HR_RUN HR_AGENT_RUN HR_WORK_COPY_S HR_RUNNER_PATH HR_AGENT_PROGRAM HR_AGENT_PROGRAM_SCRIPT HR_AGENT_CHECK HR_AGENT_ENV HR_VERIFIER_ENV HR_TESTS_MANIFEST HR_AGENT_SCRIPT HR_AGENT_SHELL HR_VERIFIER_SCRIPT HR_SETUP_ENV HR_SETUP_SCRIPT HR_SETUP_SHELL HR_SAN_SCRIPT"
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
  now_cs; STEP_CS=$((NOW_CS - t0))
  # A step SIGKILLed at its deadline may have been killed by the watcher, which then still has to exit: a
  # SIGKILL from us in that moment (a busy node) turned its 0 into 137 and a timeout into the agent's own
  # death. There the watcher is waited for (its sleep is over or ends within the 5 cs below); else ended.
  if [ "$STEP_EXIT" != 137 ] || [ "$STEP_CS" -lt $((tmo * 100 - 5)) ]; then
    kill -KILL "$wpid" 2>/dev/null
  fi
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
# base64-encoded at the end of the verifier container's log, after every agent and verifier process is gone.
# Its size and sha256 go into the termination message (the runner's channel), so the backend takes
# exactly those last bytes of the log and checks them. The content is agent-written and is kept as
# artifacts only, never read for the verdict.
# What is kept is staged first, bounded in time, bytes and entries whatever the agent left (a 10 GB sparse
# file, a FIFO, a link to a host file, a million names): directories and regular files, each file cut to
# what is left of RECORDS_MAX (its size goes to the manifest: "cut"; a file after the budget is spent:
# "dropped"), links copied as links (never followed), and every other entry (FIFO, socket, device) only
# named in the manifest with its kind, never opened; a name holding a line break is counted, not kept
# ("unnamed"); past RECORDS_FILES entries the rest is counted ("over"); all of a half's staging runs within
# RECORDS_S ("timeout": what it got to is kept). The backend keeps each entry with
# the reason the local backend gives it (orchestrator/backends/kubernetes/records.py). With --agent-env
# secrets, the agent's container stages the agent's files and replaces each secret's value by [REDACTED]
# (awk, line by line, on the cut content only: a binary file may be altered) while it still holds the
# values, before anything reaches a log; without awk it withholds the record. A secret the agent left
# for the verifier to print, or transformed, is not recognised there (the sink redacts the stored
# artifacts again with the run's secrets).
RECORDS_MAX=${HR_RECORDS_MAX:-4194304}
RECORDS_FILES=${HR_RECORDS_FILES:-10000}
RECORDS_S=${HR_RECORDS_S:-60}
NL='
'
# stage_tree SRC DST REDACT NAMES...: the entries NAMES (top-level names under SRC) staged at DST, within the
# budget left in DST/../rec.left; the manifest is DST/headroom.manifest. Runs under stage_bounded's watchdog.
STEP_PATHS="! -path agent/stdout.txt ! -path agent/stderr.txt ! -path agent_setup/stdout.txt ! -path agent_setup/stderr.txt"
stage_tree() {
  src=$1 dst=$2 redact=$3 pred=$4
  shift 4
  set -f
  man=$dst/headroom.manifest
  tops=$*
  for top in $tops; do
    left=$RECORDS_MAX n=0  # each top's loop is a subshell of its own: what it spent is read back from files
    [ -f "$dst.left" ] && read -r left < "$dst.left"
    [ -f "$dst.count" ] && read -r n < "$dst.count"
    case $top in
      */*) { [ -f "$src/$top" ] && [ ! -L "$src/$top" ] && [ ! -L "$src/${top%%/*}" ]; } || continue ;;
      *) { [ -d "$src/$top" ] && [ ! -L "$src/$top" ]; } || continue ;;
    esac
    if [ "$pred" != files ]; then
      unnamed=$(cd "$src" && find "$top" -name "*$NL*" -prune -print 2>/dev/null | grep -c "^$top" )
      [ "${unnamed:-0}" -gt 0 ] 2>/dev/null && echo "unnamed $unnamed $top" >> "$man"
    fi
    # Each entry is taken by one pass only: the steps' output by the first, small files and every other entry by
    # "small", the rest of the files by "files" (a file dropped twice would be recorded twice).
    case $pred in
      small) set -- \( ! -type f -o -size -65537c \) $STEP_PATHS ;;
      files) set -- -type f -size +65536c $STEP_PATHS ;;
      *) set -- ! -name "*$NL*" ;;
    esac
    ( cd "$src" && find "$top" \( -name "*$NL*" -prune \) -o \( "$@" \) -print 2>/dev/null ) | {
      while IFS= read -r f; do
        [ -e "$dst/$f" ] && [ ! -d "$dst/$f" ] && continue  # staged first (a step's output)
        [ -L "$dst/$f" ] && continue
        n=$((n + 1))
        if [ "$n" -gt "$RECORDS_FILES" ]; then echo "over 0 $f" >> "$man"; break; fi
        case $f in */*) [ -d "$dst/${f%/*}" ] || mkdir -p "$dst/${f%/*}" 2>/dev/null ;; esac
        if [ -L "$src/$f" ]; then
          cp -P "$src/$f" "$dst/$f" 2>/dev/null
        elif [ -d "$src/$f" ]; then
          mkdir -p "$dst/$f" 2>/dev/null
        elif [ -f "$src/$f" ]; then
          set -- $(ls -lnd "$src/$f" 2>/dev/null)
          size=${5:-0}
          case $size in ''|*[!0-9]*) size=0 ;; esac
          if [ "$left" -le 0 ] && [ "$size" -gt 0 ]; then echo "dropped $size $f" >> "$man"; continue; fi
          take=$size
          [ "$take" -gt "$left" ] && take=$left
          if [ "$redact" = 1 ]; then
            head -c "$take" "$src/$f" 2>/dev/null | awk "$REDACT_AWK" > "$dst/$f" 2>/dev/null || { rm -f "$dst/$f"; echo "unreadable $size $f" >> "$man"; continue; }
          else
            head -c "$take" "$src/$f" > "$dst/$f" 2>/dev/null || { rm -f "$dst/$f"; echo "unreadable $size $f" >> "$man"; continue; }
          fi
          [ "$size" -gt "$take" ] && echo "cut $size $f" >> "$man"
          left=$((left - take))
        elif [ -p "$src/$f" ]; then echo "fifo 0 $f" >> "$man"
        elif [ -S "$src/$f" ]; then echo "socket 0 $f" >> "$man"
        elif [ -c "$src/$f" ]; then echo "chardev 0 $f" >> "$man"
        elif [ -b "$src/$f" ]; then echo "blockdev 0 $f" >> "$man"
        else echo "unreadable 0 $f" >> "$man"
        fi
      done
      echo "$left" > "$dst.left"
      echo "$n" > "$dst.count"
    }
  done
  set +f
}
REC_UNTIL=""
stage_bounded() {  # stage_tree under a watchdog: all of a half's staging within RECORDS_S, cut where it got to
  now_cs
  [ -n "$REC_UNTIL" ] || REC_UNTIL=$((NOW_CS + RECORDS_S * 100))
  wait_s=$(( (REC_UNTIL - NOW_CS) / 100 ))
  [ "$wait_s" -ge 1 ] || wait_s=1
  ( stage_tree "$@" ) > /dev/null 2>&1 &
  gpid=$!
  ( sleep "$wait_s"; kill -KILL "$gpid" 2>/dev/null ) > /dev/null 2>&1 &
  gw=$!
  wait "$gpid"; grc=$?
  kill -KILL "$gw" 2>/dev/null
  wait "$gw"
  # SIGKILL is the watchdog's alone (the staging never exits 137 itself): its own status could be lost to a race
  [ "$grc" = 137 ] && echo "timeout 0 ." >> "$2/headroom.manifest"
  name=records; sweep  # the watchdog's sleep (and, after a timeout, whatever staging left)
  return 0
}
#: The verifier's own output is staged last, with this much of the budget kept for it (256 KiB of 4 MiB).
VERIFIER_RESERVE=$((RECORDS_MAX / 16))
stage_agent() {  # SRC DST REDACT: the agent's trees: its step output first, then every entry but large files, then those
  echo $((RECORDS_MAX - VERIFIER_RESERVE)) > "$2.left"
  stage_bounded "$1" "$2" "$3" all agent/stdout.txt agent/stderr.txt agent_setup/stdout.txt agent_setup/stderr.txt
  stage_bounded "$1" "$2" "$3" small agent_setup agent
  stage_bounded "$1" "$2" "$3" files agent_setup agent
}
REC_STAGED=""
stage_records() {  # the agent's container, with secrets: its files redacted while the values are held
  [ -n "${HR_SECRET_NAMES:-}" ] || return 0
  [ -z "$REC_STAGED" ] || return 0
  REC_STAGED=1
  command -v awk >/dev/null 2>&1 || { : > "$RUN/rec.withheld"; return 0; }
  rm -rf "$RUN/rec" "$RUN/rec.left" "$RUN/rec.count" "$RUN/rec.withheld" && mkdir -p "$RUN/rec" || return 0
  stage_agent "$LOGS" "$RUN/rec" 1
}
# The verifier's container stages the agent's part before the sanitiser changes the agent's logs dir (it
# removes FIFOs, sockets and links out of it): the record holds what the agent left, as on local.
REC_WHY=""
stage_agent_records() {
  rm -rf "$RUN/rec" "$RUN/rec.left" "$RUN/rec.count" && mkdir -p "$RUN/rec" || { REC_WHY=unstageable; return 0; }
  [ -e "$ARUN/rec.withheld" ] && { REC_WHY=withheld_no_awk; return 0; }
  if [ -n "${HR_RECORDS_REDACTED:-}" ]; then  # staged and redacted by the agent's container, or not at all
    { [ -d "$ARUN/rec" ] && [ ! -L "$ARUN/rec" ]; } || { REC_WHY=withheld_unstaged; return 0; }
    stage_agent "$ARUN/rec" "$RUN/rec" 0
    if [ -f "$ARUN/rec/headroom.manifest" ] && [ ! -L "$ARUN/rec/headroom.manifest" ]; then
      head -c 65536 "$ARUN/rec/headroom.manifest" >> "$RUN/rec/headroom.manifest"
    fi
  else
    stage_agent "$LOGS" "$RUN/rec" 0
  fi
}
records() {  # the verifier's container -> $RUN/records.tar and its facts in the message
  REC=""
  [ -n "$REC_WHY" ] && { emit "records=$REC_WHY"; return 0; }
  command -v tar >/dev/null 2>&1 || { emit "records=no_tar"; return 0; }
  [ -n "$HAVE_B64" ] || { emit "records=no_base64"; return 0; }
  left=0
  [ -f "$RUN/rec.left" ] && read -r left < "$RUN/rec.left"
  echo $((left + VERIFIER_RESERVE)) > "$RUN/rec.left"
  stage_bounded "$LOGS" "$RUN/rec" 0 all verifier/stdout.txt verifier/stderr.txt verifier
  set --
  for d in agent_setup agent verifier headroom.manifest; do [ -e "$RUN/rec/$d" ] && set -- "$@" "$d"; done
  [ "$#" -gt 0 ] || return 0
  rm -f "$RUN/records.tar" "$RUN/records.cut"
  ( cd "$RUN/rec" && tar -cf - "$@" 2>/dev/null ) | head -c $((RECORDS_MAX * 2 + 1)) > "$RUN/records.tar"
  n=$(size_of "$RUN/records.tar")
  if [ "$n" -gt $((RECORDS_MAX * 2)) ]; then  # the headers of many small entries: still within the pod log
    head -c $((RECORDS_MAX * 2)) "$RUN/records.tar" > "$RUN/records.cut" && mv "$RUN/records.cut" "$RUN/records.tar"
    n=$((RECORDS_MAX * 2))
    emit "records_truncated=1"
  fi
  emit "records_bytes=$n"
  command -v sha256sum >/dev/null 2>&1 && emit "records_sha256=$(sha256sum < "$RUN/records.tar" | cut -d ' ' -f 1)"
  REC=1
}

# ---- the work dir, carried from the agent's container to the verifier's -------------------------
# Out (agent's container, after the sweep): the work dir, made readable to its owner first (as the sanitiser
# restores permissions), copied with links as links, special files as special files and sparse files sparse
# (cp -R -P -p) into the agent's run dir. In (verifier's container, before the hand-over): the image's
# pristine work dir emptied and replaced by that copy, with this container's own cp; the sanitiser then
# judges it in the verifier's view. Each copy runs under a watchdog (HR_WORK_COPY_S): a work dir that
# cannot be copied in time is unjudged_state, the agent's failure, never the pod's deadline. A work dir
# of / is not carried (it would be the whole root filesystem): the verifier sees the image's.
copy_bounded() {  # SRC DST -> COPY=ok|partial|timeout
  ( cp -R -P -p "$1/." "$2/" ) > /dev/null 2>&1 &
  cpid=$!
  ( sleep "${HR_WORK_COPY_S:-120}"; kill -KILL "$cpid" 2>/dev/null ) > /dev/null 2>&1 &
  cw=$!
  wait "$cpid"; crc=$?
  kill -KILL "$cw" 2>/dev/null
  wait "$cw"
  COPY=ok
  [ "$crc" = 0 ] || COPY=partial
  [ "$crc" = 137 ] && COPY=timeout  # SIGKILL: the watchdog's alone (cp ends 0 or 1)
  name=work_copy; sweep  # the watchdog's sleep, which the warden would count as a process left
  return 0
}
carry_out() {
  rm -rf "$RUN/work" "$RUN/work.none"
  if [ "$WORKDIR" = / ] || [ ! -d "$WORKDIR" ]; then : > "$RUN/work.none"; emit "work_out=not_carried"; return 0; fi
  mkdir -p "$RUN/work" || { emit "work_out=failed"; return 0; }
  chmod -R u+rwX "$WORKDIR" 2>/dev/null
  copy_bounded "$WORKDIR" "$RUN/work"
  emit "work_out=$COPY"
}
carry_in() {
  [ -e "$ARUN/work.none" ] && { emit "work_in=not_carried"; return 0; }
  if [ ! -d "$ARUN/work" ] || [ -L "$ARUN/work" ]; then emit "work_in=missing"; skip=unjudged_state; return 0; fi
  ( cd "$WORKDIR" 2>/dev/null && rm -rf ./* ./.[!.]* ./..?* ) 2>/dev/null
  copy_bounded "$ARUN/work" "$WORKDIR"
  emit "work_in=$COPY"
  [ "$COPY" = timeout ] && skip=unjudged_state
  return 0
}

# ---- the Pod's step runner: the operations the phases ask for -------------------------------------
# No phase is written here. The phase_* functions are generated from orchestrator/contract/phases.py's
# DEFINITION (orchestrator/backends/kubernetes/phase_sh.py, filled in below by scripts.py): each calls one of
# these operations with the definition's arguments, then ends the try (skip=WORD) where the definition says.
skip=""
# A step's failures, as this runner saw them (its watchdog, the cgroup's OOM counter, the exit status): the words
# of orchestrator/contract/phases.py's Failure, kept in F_<step>; `failed STEP KIND...` asks for any of them.
note_failures() {  # STEP, after run_step
  hr_f=""
  [ "$STEP_EXIT" != 0 ] && hr_f="$hr_f exit"
  [ "$STEP_TIMEOUT" = 1 ] && hr_f="$hr_f timeout"
  [ "$STEP_OOM" -gt 0 ] 2>/dev/null && hr_f="$hr_f oom"
  eval "F_$1=\$hr_f"
}
add_failure() { eval "F_$1=\"\${F_$1:-} \$2\""; }
failed() {
  eval "hr_f=\" \${F_$1:-} \""
  shift
  for hr_k in "$@"; do case $hr_f in *" $hr_k "*) return 0 ;; esac; done
  return 1
}
# command_step NAME TIMEOUT ENVS SCRIPT SHELLCMD LOGS OUTPUT TASKDIR: one of the launch's commands (a script by its
# path in the task, or a shell command line), seeing $LOGS/LOGS as its logs dir, its output in $LOGS/OUTPUT.
command_step() {
  cs_script=""
  [ -n "$4" ] && cs_script=$(command_of "$4")
  mkdir -p "$LOGS/$7"
  run_step "$1" "$2" "$3" "$cs_script" "$5" "$LOGS/$6" "$8" "$LOGS/$7"
  note_failures "$1"
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
external_step() {  # NAME TIMEOUT LOGS TASKDIR: the host's word is the step's facts
  rm -rf "$RUN/agent.ended" "$RUN/agent.done" "$RUN/agent.ready"
  run_step "$1" "$2" "" "" "$EXTERNAL_WAIT" "$LOGS/$3" "$4" "$RUN"
  note_failures "$1"
  how=none
  [ -f "$RUN/agent.done" ] && read -r how _ < "$RUN/agent.done"
  emit "agent_external=$(printf '%s' "$how" | no_ctl | dd bs=20 count=1 2>/dev/null)"
  case $how in
    timeout) add_failure "$1" timeout ;;
    spawn_error) add_failure "$1" spawn_error ;;
  esac
}
# The contract's agent_check (orchestrator/contract/agent_check.py, filled in by scripts.py): before the
# agent gets control, headroom's own script resolves the agent command's program (HR_AGENT_PROGRAM) and,
# for an interpreter, its script (HR_AGENT_PROGRAM_SCRIPT, the check's third argument) in the agent's
# environment and working directory. Returns 1 when there is nothing to check (an external agent, a task
# script, a program the check cannot tell); STATUS is its answer.
HR_AGENT_CHECK=@AGENT_CHECK@
script_agent_check() {  # TIMEOUT
  [ -z "${HR_AGENT_EXTERNAL:-}" ] && [ -n "${HR_AGENT_PROGRAM:-}" ] && [ -z "${HR_AGENT_SCRIPT:-}" ] || return 1
  rm -f "$RUN/agent_check.out"
  # The check and its words become positional parameters before the task's variables are eval'd: a task
  # variable of the same name as one of the runner's cannot replace them.
  ( cd "$WORKDIR" 2>/dev/null; name=agent logdir=$LOGS/agent taskdir=$TASK
    set -- "$HR_AGENT_CHECK" headroom-agent-check "$HR_AGENT_PROGRAM" "$SH" \
      ${HR_AGENT_PROGRAM_SCRIPT:+"$HR_AGENT_PROGRAM_SCRIPT"}
    envs=${HR_AGENT_ENV:-}; unset $HIDDEN; PATH=$IMAGE_PATH; step_env; eval "$envs"
    exec "$RSH" -c "$@" ) > "$RUN/agent_check.out" 2>/dev/null &
  cpid=$!
  ( sleep "$1"; kill -KILL "$cpid" 2>/dev/null ) > /dev/null 2>&1 &
  wpid=$!
  wait "$cpid"
  kill -KILL "$wpid" 2>/dev/null
  name=agent_check
  sweep
  cst="" cdetail=""
  while IFS='=' read -r k v; do
    case $k in agent_check) [ -z "$cst" ] && cst=$v ;; agent_check_detail) [ -z "$cdetail" ] && cdetail=$v ;; esac
  done < "$RUN/agent_check.out"
  STATUS=${cst:-unchecked}
  emit "agent_check=$(printf '%s' "$STATUS" | no_ctl | dd bs=20 count=1 2>/dev/null)"
  [ "$cst" = not_found ] && emit "agent_not_found=$(printf '%s' "$cdetail" | no_ctl | dd bs=300 count=1 2>/dev/null)"
  return 0
}
stop_agent() {  # run_step swept every process of this container; what the agent left is read now
  [ -n "${HR_AGENT_EXTERNAL:-}" ] && end_external  # again, now that no process of the agent can remove it
  # The agent's output tails for the container log, taken now: the secrets are still in our
  # environment, so they are redacted in 4 KiB of slack before the 2 KiB cut (a secret printed
  # across the cut leaves no piece; the backend redacts again and scrubs the cut edges).
  for stream in stdout stderr; do
    f="$LOGS/agent/$stream.txt"
    rm -rf "$RUN/agent-$stream.tail"
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
  for name in ${HR_SECRET_NAMES:-}; do unset "$name"; done
}
take_tests() {  # the hand-over: the warden's tests at /tests (checked against their manifest), fresh verifier logs
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
script_sanitise() {  # TIMEOUT: the contract's sanitiser, as the verifier's user (ours), in /; STATUS is its verdict
  hidden="$RUN/vtask"
  for v in ${HR_VERIFIER_ONLY:-/tests /logs/verifier /solution /headroom/handoff}; do hidden="$hidden $R$v"; done
  rm -f "$RUN/sanitise.out"  # the agent could have left a FIFO or a link there
  ( cd / || exit 1
    HR_SAN_SCRIPT=$HR_SAN_SCRIPT HR_SAN_HIDDEN=$hidden HR_SAN_PRUNE="$R/headroom" \
      HR_SAN_MAX_LINKS="${HR_SAN_MAX_LINKS:-@SAN_MAX_LINKS@}" HR_SAN_RESOLVE_S=@SAN_RESOLVE_S@ HR_SAN_BUDGET_S=@SAN_BUDGET_S@
    export HR_SAN_SCRIPT HR_SAN_HIDDEN HR_SAN_PRUNE HR_SAN_MAX_LINKS HR_SAN_RESOLVE_S HR_SAN_BUDGET_S
    unset HR_SAN_VERDICT  # no copy here (its output is a file); an image's ENV names none
    exec "$RSH" -c "$HR_SAN_SCRIPT" headroom-sanitise "$WORKDIR" "$LOGS/agent" ) > "$RUN/sanitise.out" 2>/dev/null &
  spid=$!
  ( sleep "$1"; kill -KILL "$spid" 2>/dev/null ) > /dev/null 2>&1 &
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
  STATUS=$st
  emit "sanitise=$(printf '%s' "$st" | no_ctl | dd bs=20 count=1 2>/dev/null)"
  emit "verifier_only_links_removed=$((lr + lu + rr))"
}
read_reward() {  # FILE...: the first regular file of these in the verifier's logs, as reward_file/size/b64
  for f in "$@"; do
    p="$LOGS/verifier/$f"
    [ -f "$p" ] && [ ! -L "$p" ] || continue
    n=$(size_of "$p")
    emit "reward_file=$f"
    emit "reward_size=$n"
    [ "$n" -le 512 ] && emit_file reward "$p" 512
    break
  done
}

# ---- the phases: generated from orchestrator/contract/phases.py ----------------------------------
@PHASES@
# ---- the two halves ----------------------------------------------------------------------------
# The agent's facts reach the verifier's container through the agent's run dir, written after the sweep (no
# agent process is left to change them) and read bounded; the word that skips the verifier is one of a
# known few. A missing report (the agent's container ended without writing it) is the agent's failure.
AGENT_SKIPS="@AGENT_SKIPS@"
agent_half() {
  emit "v=1"
  emit "workdir=$(printf '%s' "$WORKDIR" | no_ctl | dd bs=200 count=1 2>/dev/null)"
  if [ -n "$MEMCG" ]; then
    if [ -r "$MEMCG/memory.events" ]; then emit "memcg=v2"; else emit "memcg=v1"; fi
  else emit "memcg=none"; fi
  [ -r /proc/sys/kernel/yama/ptrace_scope ] && { read -r ps < /proc/sys/kernel/yama/ptrace_scope; emit "ptrace_scope=$ps"; }
  mkdir -p "$LOGS/agent" "$RUN" 2>/dev/null
  for phase in @AGENT_PHASES@; do
    "phase_$phase"
    [ -n "$skip" ] && break
  done
  # No agent process is left: whatever it made under the names the verifier's half reads (a FIFO that would
  # block a write, a folder a file would be moved into, a forged report) goes before anything is written there.
  rm -rf "$RUN/agent.msg" "$RUN/agent.msg.new" "$RUN/agent.skip" "$RUN/work" "$RUN/work.none" 2>/dev/null
  [ -n "$REC_STAGED" ] || rm -rf "$RUN/rec" "$RUN/rec.left" "$RUN/rec.count" "$RUN/rec.withheld" 2>/dev/null
  stage_records  # after setup failed: the stop phase never ran
  case $skip in @BEFORE_AGENT_SKIPS@) ;; *) carry_out ;; esac  # the agent never ran: nothing to carry
  for name in ${HR_SECRET_NAMES:-}; do unset "$name"; done
  flush
  printf '%s' "$MSG" > "$RUN/agent.msg.new" && mv "$RUN/agent.msg.new" "$RUN/agent.msg"
  printf '%s\n' "$skip" > "$RUN/agent.skip"
}
take_agent_report() {
  if [ -f "$ARUN/agent.msg" ] && [ ! -L "$ARUN/agent.msg" ] && [ -f "$ARUN/agent.skip" ] && [ ! -L "$ARUN/agent.skip" ]; then
    MSG=$(dd if="$ARUN/agent.msg" bs=4000 count=1 2>/dev/null)
    MSG="$MSG
"
    word=""
    read -r word < "$ARUN/agent.skip" 2>/dev/null
    if [ -n "$word" ]; then
      case " $AGENT_SKIPS " in *" $word "*) skip=$word ;; *) skip=agent_report_missing ;; esac
    fi
  else
    MSG=""
    emit "v=1"
    skip=agent_report_missing
  fi
}
verifier_half() {
  mkdir -p "$LOGS" "$RUN" 2>/dev/null
  : > "$RUN/runner.started" 2>/dev/null  # the warden's sign that this container ran (see warden.sh)
  take_agent_report
  stage_agent_records
  [ -z "$skip" ] && carry_in
  if [ -z "$skip" ]; then
    for phase in @VERIFIER_PHASES@; do
      "phase_$phase"
      [ -n "$skip" ] && break
    done
  fi
  [ -n "$skip" ] && emit "verifier_skipped=$skip"
  records
  flush
  for stream in stdout stderr; do
    t="$ARUN/agent-$stream.tail"
    { [ -f "$t" ] && [ ! -L "$t" ] && [ -s "$t" ]; } || continue
    echo "===== tail of $LOGS/agent/$stream.txt ====="
    head -c 2048 "$t"
    echo
  done
  for f in "$LOGS/verifier/stdout.txt" "$LOGS/verifier/stderr.txt"; do
    { [ -f "$f" ] && [ ! -L "$f" ] && [ -s "$f" ]; } || continue
    echo "===== tail of $f ====="
    tail -c 2048 "$f"
    echo
  done
  if [ -n "$REC" ]; then
    echo "===== headroom records $(size_of "$RUN/records.tar") ====="
    base64 < "$RUN/records.tar"
    echo "===== end of headroom records ====="
  fi
}
case $ROLE in
  agent) agent_half ;;
  verifier) verifier_half ;;
  *) echo "headroom runner: HR_ROLE must be agent or verifier" >&2; exit 2 ;;
esac
exit 0
