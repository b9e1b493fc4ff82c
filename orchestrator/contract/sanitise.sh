# headroom sanitiser (POSIX sh). Every backend runs this same script inside the try's
# environment, in the verifier's own view of the filesystem and as the verifier's user, after
# every agent process is gone and before the verifier starts (orchestrator/contract/sanitiser.py
# builds the call; docs/container-contract.md has the why).
#
#   sh -c "$HR_SAN_SCRIPT" headroom-sanitise ROOT...
#
# ROOTs: what the agent could write that the verifier sees (its work dir, its logs).
# HR_SAN_HIDDEN: verifier-only paths, space-separated (the tests, the verifier's logs, the
#   solution); /proc is always one. HR_SAN_PRUNE: paths never searched (a work dir of / holds
#   /proc and the tests); /proc, /sys and /dev are never searched either. HR_SAN_MAX_LINKS: how
#   many links may be judged in all (2000). HR_SAN_RESOLVE_S: the bound on one resolution (2 s).
#   HR_SAN_BUDGET_S: the bound on all the judging (120 s). HR_SAN_VERDICT (optional): a file the
#   verdict is also written to, for a runtime that can lose a step's output (the Docker backend).
#
# Paths are resolved by the system, never by hand: `readlink -m` (the kernel's view of every
# existing component, symlinks and `..` included, in this very view; only components that do
# not exist yet are taken as written) and `find -P` (links are listed, never followed).
# In order, under every ROOT:
#   1. a ROOT that is itself a link into a verifier-only path is replaced by an empty folder;
#   2. folders the verifier could not list or enter get u+rwx; one that still cannot be listed
#      is removed, and if that fails the state is `incomplete`;
#   3. FIFOs, sockets and device nodes are removed (a verifier reading one would block or
#      reach a device), and so are links to them;
#   4. files get u+rw, so the verifier can read what the agent left;
#   5. every link is resolved; one is removed when it lands in, or above, a verifier-only path,
#      cannot be resolved, resolves to a path holding a control character (a newline among
#      them: no byte of a name is dropped or taken for a separator), or lands in a tree that is
#      never searched (/proc, /sys, /dev, HR_SAN_PRUNE) unless its target is provably read-only
#      (on a read-only mount with no writable mount beneath it: nothing the agent made can be
#      there). A link to a folder outside the ROOTs adds that folder to the next round (what the
#      verifier reaches through the link), up to 8 rounds; a folder left unsearched after them
#      makes the state `exhausted`.
#      Work is bounded three ways, and whatever a bound leaves unjudged is removed and makes the
#      state `exhausted`: a count (a folder whose links would take the number judged past
#      HR_SAN_MAX_LINKS has them all removed unjudged: the same tree gets the same verdict on an
#      idle machine and a loaded one), one resolution's time (`readlink` can expand links
#      exponentially; one that takes longer than HR_SAN_RESOLVE_S is killed, and every link not
#      judged yet is removed unjudged), and a budget for all of them (HR_SAN_BUDGET_S).
# Prints key=value lines; `status=ok` only if everything was judged and what had to go is gone.
set -u
set -f  # no pathname expansion anywhere: a name the agent chose is never a pattern
LC_ALL=C
export LC_ALL
cd / || exit 1  # nothing relative to the work dir: the agent chose its names
NL='
'

now_cs() {  # NOW: centiseconds since boot, without a fork (empty if /proc/uptime cannot be read)
  NOW=""
  { read -r up _ < /proc/uptime; } 2>/dev/null || return 0
  case $up in *.??) NOW=$(( ${up%.*} * 100 + 1${up#*.} - 100 )) ;; esac
}

past_deadline() {
  [ -n "${HR_SAN_DEADLINE_CS:-}" ] || return 1
  now_cs
  [ -n "$NOW" ] && [ "$NOW" -ge "$HR_SAN_DEADLINE_CS" ]
}

resolve() {  # $1 -> T: where the system resolves it; status 1 if it cannot say, 2 if it took too long
  T=""
  for how in -m -f; do
    # shellcheck disable=SC2086
    out=$(${HR_SAN_TO:-} readlink "$how" -- "$1" 2>/dev/null; echo "x$?")
    rc=${out##*x} out=${out%x*}
    case $rc in
      0) ;;
      124|137) return 2 ;;  # timeout's own status: killed at its bound
      *) continue ;;
    esac
    # Exactly the one newline readlink adds comes off: `$(...)` would strip every trailing one.
    case $out in *"$NL") out=${out%?} ;; *) continue ;; esac
    [ -n "$out" ] || continue
    case $out in *[[:cntrl:]]*) return 1 ;; esac  # a newline or other control character: not judged as text
    T=$out
    return 0
  done
  return 1
}

is_bad() {  # $1 (resolved): in, or an ancestor of, a verifier-only path
  [ "$1" = / ] && return 0
  for h in $HID; do
    case $1/ in "$h"/*) return 0 ;; esac
    case $h/ in "$1"/*) return 0 ;; esac
  done
  return 1
}

unsearched() {  # $1 (resolved): in a tree the sanitiser never searches
  for p in /proc /sys /dev ${HR_SAN_PRUNE:-}; do
    case $1/ in "$p"/*) return 0 ;; esac
  done
  return 1
}

read_only() {  # $1 (resolved): on a read-only mount, with no writable mount beneath it (its own view's mount table)
  case $1 in *[[:space:]\\]*) return 1 ;; esac  # the table escapes such names: never matched, never proven
  [ -r /proc/self/mountinfo ] || return 1
  best=-1 ro=0
  while read -r _ _ _ _ mp opts rest; do
    w=1
    case ,$opts, in *,ro,*) w=0 ;; esac
    case ,${rest##* }, in *,ro,*) w=0 ;; esac  # the superblock's options, last on the line
    m=${mp%/}/
    case $1/ in
      "$m"*) if [ "${#m}" -ge "$best" ]; then best=${#m} ro=$((1 - w)); fi ;;  # the last mount on a path wins
    esac
    case $mp/ in "$1"/?*) [ "$w" = 1 ] && return 1 ;; esac  # a writable mount beneath it
  done < /proc/self/mountinfo
  [ "$ro" = 1 ]
}

hidden_list() {  # HR_SAN_HIDDEN and /proc, each resolved in this view
  HID=""
  for h in ${HR_SAN_HIDDEN:-} /proc; do
    if resolve "$h"; then HID="$HID $T"; fi
    HID="$HID $h"
  done
}

drop() {  # $1 a link, $2 the letter to print when it is gone (L removed, U removed unjudged)
  if rm -f -- "$1" 2>/dev/null; then echo "$2"; else echo X; fi
}

if [ "${1:-}" = --judge ]; then  # called by find -exec on a batch of links
  shift
  hidden_list
  stop=""
  for l in "$@"; do
    [ -L "$l" ] || continue
    if [ -z "$stop" ] && past_deadline; then stop=1; fi
    if [ -n "$stop" ]; then drop "$l" U; continue; fi
    resolve "$l"
    case $? in
      0) ;;
      2) stop=1; drop "$l" U; continue ;;  # a resolution past its bound: this and every later link go unjudged
      *) drop "$l" L; continue ;;
    esac
    if is_bad "$T"; then drop "$l" L; continue; fi
    # A tree never searched (a pod's writable /headroom/run, a persisting /dev/shm) could hold links the
    # agent made: reached through a link, it is trusted only if nothing there can have been written.
    if unsearched "$T" && ! read_only "$T"; then drop "$l" L; continue; fi
    # Kept: a link to a regular file, or to nothing (yet). A FIFO, socket or device the verifier
    # would open through it (`answer -> /tmp/fifo`, `-> /dev/zero`) goes like one in the work dir.
    if [ ! -e "$T" ] || { [ -f "$T" ] && [ ! -p "$T" ]; }; then echo K; continue; fi
    if [ ! -d "$T" ]; then drop "$l" L; continue; fi
    # A folder the verifier reaches through the link is searched too (unless it is read-only, above);
    # one whose name holds white space cannot be listed back safely, so its link goes.
    case $T in *[[:space:]]*) drop "$l" L; continue ;; esac
    unsearched "$T" || echo "D$T"
    echo K
  done
  exit 0
fi

hidden_list
MAX_LINKS=${HR_SAN_MAX_LINKS:-2000}
case $MAX_LINKS in ''|*[!0-9]*) MAX_LINKS=2000 ;; esac
RESOLVE_S=${HR_SAN_RESOLVE_S:-2}
case $RESOLVE_S in ''|*[!0-9]*) RESOLVE_S=2 ;; esac
BUDGET_S=${HR_SAN_BUDGET_S:-120}
case $BUDGET_S in ''|*[!0-9]*) BUDGET_S=120 ;; esac
# One resolution's bound: coreutils' `timeout`, or busybox's (older ones spell the time `-t N`).
# Without either a resolution is bounded only by the budget (checked between links) and the
# runner's hard timeout around this script; the report says so (resolve_bound=none).
HR_SAN_TO="" bound=none
if timeout -s KILL 5 true 2>/dev/null; then HR_SAN_TO="timeout -s KILL $RESOLVE_S" bound=${RESOLVE_S}s
elif timeout -s KILL -t 5 true 2>/dev/null; then HR_SAN_TO="timeout -s KILL -t $RESOLVE_S" bound=${RESOLVE_S}s
fi
now_cs
HR_SAN_DEADLINE_CS=""
[ -n "$NOW" ] && HR_SAN_DEADLINE_CS=$((NOW + BUDGET_S * 100))
export HR_SAN_TO HR_SAN_DEADLINE_CS
PRUNE="-path /proc -o -path /sys -o -path /dev"
for p in ${HR_SAN_PRUNE:-} ${HR_SAN_HIDDEN:-}; do PRUNE="$PRUNE -o -path $p"; done
ME=$(id -u 2>/dev/null || echo 0)
OWNED=""
[ "$ME" != 0 ] && OWNED="-o ! -user $ME"
roots_replaced=0 special=0 special_left=0 removed=0 unjudged=0 unremovable=0 kept=0 unlistable=0 scanned=0 judged=0
stopped=0
SEEN="" NEXT=""

unjudge_all() {  # $1: one folder; every link under it goes unjudged
  # shellcheck disable=SC2086
  find -P "$1" \( $PRUNE \) -prune -o -type l -exec rm -f -- {} + 2>/dev/null
  # shellcheck disable=SC2086
  left=$(find -P "$1" \( $PRUNE \) -prune -o -type l -print 2>/dev/null | wc -l)
  unjudged=$((unjudged + $2 - left))
  unremovable=$((unremovable + left))
}

scan_root() {  # $1: one folder; counts into the totals, dir targets of its links into NEXT
  r=$1
  scanned=$((scanned + 1))
  # shellcheck disable=SC2086
  find -P "$r" \( $PRUNE \) -prune -o -type d \( ! -perm -700 $OWNED \) -exec sh -c \
    'chmod u+rwx -- "$1" 2>/dev/null; [ -r "$1" ] && [ -x "$1" ] || rm -rf -- "$1" 2>/dev/null' fix {} \; 2>/dev/null
  # shellcheck disable=SC2086
  n=$(find -P "$r" \( $PRUNE \) -prune -o \( -type p -o -type s -o -type b -o -type c \) -exec rm -f -- {} + -print 2>/dev/null | wc -l)
  special=$((special + n))
  # What is left can only be what was found: the same search over a tree no agent process can change any
  # more. A tree with none (nearly every one) skips the recount, three processes fewer per root (issue 32).
  if [ $((n)) -gt 0 ]; then
    # shellcheck disable=SC2086
    n=$(find -P "$r" \( $PRUNE \) -prune -o \( -type p -o -type s -o -type b -o -type c \) -print 2>/dev/null | wc -l)
    special_left=$((special_left + n))
  fi
  # shellcheck disable=SC2086
  find -P "$r" \( $PRUNE \) -prune -o ! -type l ! -type d ! -perm -600 -exec chmod u+rw -- {} + 2>/dev/null
  # Counted before judging (a name holding a newline counts twice: an over-count, never an under-count).
  # shellcheck disable=SC2086
  n=$(find -P "$r" \( $PRUNE \) -prune -o -type l -print 2>/dev/null | wc -l)
  if [ $((judged + n)) -gt "$MAX_LINKS" ] || [ "$stopped" != 0 ] || past_deadline; then
    unjudge_all "$r" "$n"
    return
  fi
  judged=$((judged + n))
  # The script is not an argument of find: GNU find would replace the `{}` in its text too.
  # shellcheck disable=SC2086
  out=$(find -P "$r" \( $PRUNE \) -prune -o -type l -exec sh -c 'eval "$HR_SAN_SCRIPT"' headroom-judge --judge {} + 2>/dev/null; echo "E$?")
  # One judge's word per line, read as lines: no line is split on anything else or taken as a pattern.
  # The last line is find's `E`: a here-document a shell could not make (bash writes a large one to a file, which
  # a full disk refuses; it then skips the loop and goes on) never reaches it, and what went unread is unlistable.
  ended=""
  while IFS= read -r line; do
    case $line in
      L) removed=$((removed + 1)) ;;
      U) unjudged=$((unjudged + 1)) stopped=1 ;;
      X) unremovable=$((unremovable + 1)) ;;
      K) kept=$((kept + 1)) ;;
      E0) ended=1 ;;
      E*) ended=1 unlistable=$((unlistable + 1)) ;;
      D/*)
        d=${line#D} known=""
        for k in $SEEN $NEXT /proc /sys /dev ${HR_SAN_PRUNE:-}; do
          case $d/ in "$k"/*) known=1 ;; esac
        done
        [ -n "$known" ] || NEXT="$NEXT $d"
        ;;
    esac
  done <<EOF
$out
EOF
  [ -n "$ended" ] || unlistable=$((unlistable + 1))
}

for r in "$@"; do
  [ -L "$r" ] || continue
  resolve "$r"
  if [ $? != 0 ] || is_bad "$T"; then
    if rm -f -- "$r" 2>/dev/null && mkdir -p -- "$r" 2>/dev/null; then
      roots_replaced=$((roots_replaced + 1))
    else
      unremovable=$((unremovable + 1))
    fi
  fi
done
for r in "$@"; do
  [ -d "$r" ] || continue
  case $r in *[[:space:]]*) ;; *) SEEN="$SEEN $r" ;; esac
  scan_root "$r"
done
rounds=1
while [ -n "$NEXT" ] && [ "$rounds" -lt 8 ]; do
  rounds=$((rounds + 1))
  todo=$NEXT NEXT=""
  SEEN="$SEEN $todo"
  for r in $todo; do scan_root "$r"; done
done

status=ok
{ [ "$unjudged" -gt 0 ] || [ -n "$NEXT" ]; } && status=exhausted
{ [ "$unremovable" -gt 0 ] || [ "$special_left" -gt 0 ] || [ "$unlistable" -gt 0 ]; } && status=incomplete
# The verdict's one write to the output, checked: `exit 0` means it left the script whole (a full disk under a file
# headroom reads its output from fails the write, not the verdict), so a clean exit that headroom got no verdict from
# was lost on the way, never brought about by the agent (sequence.py).
verdict() {
  printf 'links_removed=%s\nlinks_unjudged=%s\nlinks_unremovable=%s\nlinks_kept=%s\nroots_replaced=%s\nspecial_removed=%s\nspecial_left=%s\nunlistable=%s\nroots_scanned=%s\njudging_stopped=%s\nresolve_bound=%s\nstatus=%s\n' \
    "$removed" "$unjudged" "$unremovable" "$kept" "$roots_replaced" "$special" "$special_left" "$unlistable" \
    "$scanned" "$stopped" "$bound" "$status"
}
# A copy first, where the backend asked for one (HR_SAN_VERDICT: a file in the verifier's own view that nothing of the
# agent's can reach), read only if the output below is lost on its way; failing to write it is no verdict of ours.
# A file-size limit would kill the shell at that write (SIGXFSZ): ignored, the write fails instead.
if [ -n "${HR_SAN_VERDICT:-}" ]; then
  trap '' XFSZ
  { verdict > "$HR_SAN_VERDICT"; } 2>/dev/null || :
  trap - XFSZ
fi
verdict || exit 3
exit 0
