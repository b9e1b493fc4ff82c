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
#   /proc and the tests). HR_SAN_MAX_LINKS: how many links may be judged in all (2000).
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
#   5. every link is resolved; one that lands in, or above, a verifier-only path, or that
#      cannot be resolved, is removed. A link to a folder outside the ROOTs adds that folder
#      to the next round (what the verifier reaches through the link), up to 8 rounds; a
#      folder left unsearched after them makes the state `exhausted`.
#      A folder whose links would take the count judged past HR_SAN_MAX_LINKS has them all
#      removed unjudged, and the state is `exhausted`. The bound is a count, not a time: the same
#      tree gets the same verdict on an idle machine and a loaded one.
# Prints key=value lines; `status=ok` only if everything was judged and what had to go is gone.
set -u
LC_ALL=C
export LC_ALL

resolve() {  # $1 -> T: where the system resolves it; status 1 if it cannot say
  T=$(readlink -m -- "$1" 2>/dev/null) && [ -n "$T" ] && return 0
  T=$(readlink -f -- "$1" 2>/dev/null) && [ -n "$T" ] && return 0
  T=""
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

hidden_list() {  # HR_SAN_HIDDEN and /proc, each resolved in this view
  HID=""
  for h in ${HR_SAN_HIDDEN:-} /proc; do
    if resolve "$h"; then HID="$HID $T"; fi
    HID="$HID $h"
  done
}

if [ "${1:-}" = --judge ]; then  # called by find -exec on a batch of links
  shift
  hidden_list
  for l in "$@"; do
    [ -L "$l" ] || continue
    if resolve "$l" && ! is_bad "$T"; then
      # Kept: a link to a regular file, or to nothing (yet). A FIFO, socket or device the verifier
      # would open through it (`answer -> /tmp/fifo`, `-> /dev/zero`) goes like one in the work dir.
      if [ ! -e "$T" ] || { [ -f "$T" ] && [ ! -p "$T" ]; }; then echo K; continue; fi
      if [ ! -d "$T" ]; then
        if rm -f -- "$l" 2>/dev/null; then echo L; else echo X; fi
        continue
      fi
      # A folder the verifier reaches through the link is searched too; one whose name holds
      # white space cannot be listed back safely, so its link goes.
      case $T in *[[:space:]]*) ;; *) echo "D$T"; echo K; continue ;; esac
    fi
    if rm -f -- "$l" 2>/dev/null; then echo L; else echo X; fi
  done
  exit 0
fi

hidden_list
MAX_LINKS=${HR_SAN_MAX_LINKS:-2000}
case $MAX_LINKS in ''|*[!0-9]*) MAX_LINKS=2000 ;; esac
PRUNE="-path /proc -o -path /sys -o -path /dev"
for p in ${HR_SAN_PRUNE:-} ${HR_SAN_HIDDEN:-}; do PRUNE="$PRUNE -o -path $p"; done
ME=$(id -u 2>/dev/null || echo 0)
OWNED=""
[ "$ME" != 0 ] && OWNED="-o ! -user $ME"
roots_replaced=0 special=0 special_left=0 removed=0 unjudged=0 unremovable=0 kept=0 unlistable=0 scanned=0 judged=0
SEEN="" NEXT=""

scan_root() {  # $1: one folder; counts into the totals, dir targets of its links into NEXT
  r=$1
  scanned=$((scanned + 1))
  # shellcheck disable=SC2086
  find -P "$r" \( $PRUNE \) -prune -o -type d \( ! -perm -700 $OWNED \) -exec sh -c \
    'chmod u+rwx -- "$1" 2>/dev/null; [ -r "$1" ] && [ -x "$1" ] || rm -rf -- "$1" 2>/dev/null' fix {} \; 2>/dev/null
  # shellcheck disable=SC2086
  n=$(find -P "$r" \( $PRUNE \) -prune -o \( -type p -o -type s -o -type b -o -type c \) -exec rm -f -- {} + -print 2>/dev/null | wc -l)
  special=$((special + n))
  # shellcheck disable=SC2086
  n=$(find -P "$r" \( $PRUNE \) -prune -o \( -type p -o -type s -o -type b -o -type c \) -print 2>/dev/null | wc -l)
  special_left=$((special_left + n))
  # shellcheck disable=SC2086
  find -P "$r" \( $PRUNE \) -prune -o ! -type l ! -type d ! -perm -600 -exec chmod u+rw -- {} + 2>/dev/null
  # Counted before judging (a name holding a newline counts twice: an over-count, never an under-count).
  # shellcheck disable=SC2086
  n=$(find -P "$r" \( $PRUNE \) -prune -o -type l -print 2>/dev/null | wc -l)
  if [ $((judged + n)) -gt "$MAX_LINKS" ]; then
    # shellcheck disable=SC2086
    find -P "$r" \( $PRUNE \) -prune -o -type l -exec rm -f -- {} + 2>/dev/null
    # shellcheck disable=SC2086
    left=$(find -P "$r" \( $PRUNE \) -prune -o -type l -print 2>/dev/null | wc -l)
    unjudged=$((unjudged + n - left))
    unremovable=$((unremovable + left))
    return
  fi
  judged=$((judged + n))
  # The script is not an argument of find: GNU find would replace the `{}` in its text too.
  # shellcheck disable=SC2086
  out=$(find -P "$r" \( $PRUNE \) -prune -o -type l -exec sh -c 'eval "$HR_SAN_SCRIPT"' headroom-judge --judge {} + 2>/dev/null; echo "E$?")
  for line in $out; do  # no line holds white space (the judge removes links to such folders)
    case $line in
      L) removed=$((removed + 1)) ;;
      U) unjudged=$((unjudged + 1)) ;;
      X) unremovable=$((unremovable + 1)) ;;
      K) kept=$((kept + 1)) ;;
      E0) ;;
      E*) unlistable=$((unlistable + 1)) ;;
      D*)
        d=${line#D} known=""
        for k in $SEEN $NEXT /proc /sys /dev ${HR_SAN_PRUNE:-}; do
          case $d/ in "$k"/*) known=1 ;; esac
        done
        [ -n "$known" ] || NEXT="$NEXT $d"
        ;;
    esac
  done
}

for r in "$@"; do
  [ -L "$r" ] || continue
  if ! resolve "$r" || is_bad "$T"; then
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
echo "links_removed=$removed"
echo "links_unjudged=$unjudged"
echo "links_unremovable=$unremovable"
echo "links_kept=$kept"
echo "roots_replaced=$roots_replaced"
echo "special_removed=$special"
echo "special_left=$special_left"
echo "unlistable=$unlistable"
echo "roots_scanned=$scanned"
echo "status=$status"
exit 0
