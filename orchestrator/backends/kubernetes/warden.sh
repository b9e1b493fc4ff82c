# headroom warden (POSIX sh): the only container that holds the tests.
#
# It shares the pod's PID namespace with the task container but runs as another uid
# with no capabilities, so no agent process can read its files (/proc/PID/root needs
# ptrace rights). When the runner asks (a request file) it hands the tests over only
# after three scans 0.2 s apart found no process of the pod other than the pause
# process (PID 1), itself, its own children and exactly one other: the runner, which
# lives until the pod ends. An agent process still alive means two or more, and no
# tests. It exits once the task container has no process left: after it saw one, or on the
# runner's start marker ($RUN/runner.started). The kubelet starts this container after the task's,
# so a fast try (an agent OOM-killed at once) can be over before our first look; without the marker
# we would wait for the pod's deadline, holding its requests on the node. No process and no marker
# means the runner has not started yet (its image still being pulled, say): we wait for it.
# Its programs (sleep, cp, cksum...) are found on the contract's fixed PATH, as the runner's are: never on a
# folder of the image's PATH (its own copy here, but one rule for both programs). HR_RUNNER_PATH: tests only.
set -u
LC_ALL=C
export LC_ALL
PATH=${HR_RUNNER_PATH:-@FIXED_PATH@}
export PATH
R=${HR_ROOT:-}
RUN=$R/headroom/run
HANDOFF=$R/headroom/handoff
SRC=${HR_TESTS_SRC:-$R/headroom/tests-src}
ME=$$
nap() { sleep 0.2 2>/dev/null || sleep 1; }
count_others() {  # processes that are not pause, us, or our children -> N, LIST
  N=0 LIST=""
  for d in /proc/[0-9]*; do
    p=${d#/proc/}
    [ "$p" = 1 ] && continue
    [ "$p" = "$ME" ] && continue
    read -r st 2>/dev/null < "$d/stat" || continue
    rest=${st##*) }
    state=${rest%% *}
    [ "$state" = Z ] && continue
    rest=${rest#* }
    [ "${rest%% *}" = "$ME" ] && continue
    comm=${st#*(}
    N=$((N + 1)) LIST="$LIST $p(${comm%)*})"
  done
}
seen=0
asker=0
delivered=0
refusing=0
while :; do
  count_others
  if [ "$N" = 0 ]; then
    [ "$seen" = 1 ] && exit 0
    [ -e "$RUN/runner.started" ] && exit 0  # it ran and is gone: it ended before our first look
  else
    seen=1
  fi
  # Answered, and the runner that asked has ended: nothing is left for us to do.
  [ "$delivered" = 1 ] && [ ! -d "/proc/$asker" ] && exit 0
  if [ "$delivered" = 0 ] && [ -f "$RUN/request" ] && [ -p "$RUN/wake" ]; then
    read -r asker 2>/dev/null < "$RUN/request" || asker=0
    case $asker in ''|*[!0-9]*) asker=0 ;; esac
    clean=0
    while [ "$N" = 1 ] && [ "$clean" -lt 3 ]; do
      clean=$((clean + 1))
      [ "$clean" -lt 3 ] && { nap; count_others; }
    done
    if [ "$N" = 1 ] && [ "$clean" = 3 ]; then
      rm -rf "$HANDOFF/tests"
      mkdir -p "$HANDOFF/tests"
      ok=1
      for e in "$SRC"/* "$SRC"/.[!.]*; do  # not the ConfigMap mount's ..data links
        [ -e "$e" ] || continue
        cp -R -L "$e" "$HANDOFF/tests/" 2>/dev/null || ok=0
      done
      if [ "$ok" = 1 ]; then
        echo ok > "$RUN/wake"
      else
        echo "copy_failed" > "$RUN/wake"
      fi
      delivered=1
    else
      refusing=$((refusing + 1))
      # About 30 s of an agent process outliving the runner's sweep: give up, say who.
      if [ "$refusing" -ge "${HR_WARDEN_PATIENCE:-150}" ]; then
        echo "agent_processes_left$LIST" | dd bs=280 count=1 2>/dev/null > "$RUN/wake"
        delivered=1
      fi
    fi
  fi
  nap
done
