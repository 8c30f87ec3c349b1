#!/usr/bin/env bash
# scripts/check_fresh_machine.sh — run the README's two commands on a bare Debian 12.
#
# Makes a minimal Debian 12 root (`debootstrap --variant=minbase bookworm`) in a temporary folder,
# clones this checkout's HEAD into it, and runs `scripts/demo.sh` and `scripts/test.sh` inside it
# with chroot, printing each command's wall time. Nothing is installed into the root by hand:
# whatever the two commands need, they must install themselves.
#
# The root gets its own /proc, a private tmpfs /dev holding only the device nodes a build needs,
# a private devpts instance and a tmpfs /dev/shm for MPI's shared memory. The host's /dev and /sys are never bind-mounted.
# On exit everything under the root is unmounted, /proc/mounts is checked to hold nothing below
# it, and only then is it removed (with --one-file-system, so even a mount that survived could not
# be descended into).
#
# Usage (as root): scripts/check_fresh_machine.sh [--keep] [--only demo|test]
#   --keep        leave the root in place (its path is printed) instead of removing it
#   --only NAME   run only one of the two README commands
# The Debian mirror is the first bookworm source of this machine's own apt configuration.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"

keep=0
only=""
while [ $# -gt 0 ]; do
  case "$1" in
    --keep) keep=1 ;;
    --only) only="${2:?--only needs demo or test}"; shift ;;
    *) echo "check_fresh_machine: unknown argument '$1' (expected --keep or --only demo|test)" >&2; exit 2 ;;
  esac
  shift
done
[ "$(id -u)" -eq 0 ] || { echo "check_fresh_machine: needs root (debootstrap, mount, chroot)" >&2; exit 2; }

# The mirror: the first deb URI of a bookworm suite in the deb822 sources or the one-line list.
mirror=""
for f in /etc/apt/sources.list.d/*.sources; do
  [ -f "$f" ] || continue
  mirror=$(awk '/^URIs:/ {u=$2} /^Suites:/ && / bookworm( |$)/ && u {print u; exit}' "$f")
  [ -n "$mirror" ] && break
done
if [ -z "$mirror" ] && [ -f /etc/apt/sources.list ]; then
  mirror=$(awk '$1 == "deb" && $3 == "bookworm" {print $2; exit}' /etc/apt/sources.list)
fi
[ -n "$mirror" ] || { echo "check_fresh_machine: no bookworm mirror in /etc/apt/sources.list{,.d}" >&2; exit 2; }

if ! command -v debootstrap > /dev/null; then
  echo "== installing debootstrap on this machine"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap > /dev/null
fi

root="$(mktemp -d /var/tmp/moe4d-fresh.XXXXXX)"
chmod 755 "$root"  # it is the root's "/": mktemp's 0700 would lock every other user out of it

mounts_below_root() { awk -v r="$root" '$2 == r || index($2, r "/") == 1 {print $2}' /proc/mounts; }

processes_in_root() {
  for p in /proc/[0-9]*; do
    [ "$(readlink "$p/root" 2> /dev/null)" = "$root" ] && echo "${p#/proc/}"
  done
  return 0
}

cleanup() {
  local rc=$?
  # Nothing may still run in the root (an interrupted apt or build) while it is taken apart.
  for signal in TERM KILL; do
    pids=$(processes_in_root)
    [ -z "$pids" ] && break
    kill -s $signal $pids 2> /dev/null || true
    sleep 2
  done
  # Innermost first: sort by path length, longest first.
  for m in $(mounts_below_root | awk '{print length, $0}' | sort -rn | cut -d' ' -f2-); do
    umount "$m" 2> /dev/null || umount -l "$m" || true
  done
  if [ -n "$(mounts_below_root)" ]; then
    echo "check_fresh_machine: still mounted below $root, NOT removing it:" >&2
    mounts_below_root >&2
  elif [ "$keep" -eq 1 ]; then
    echo "== root kept at $root"
  else
    rm -rf --one-file-system "$root"
  fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

t0=$(date +%s)
echo "== debootstrap --variant=minbase bookworm $root ($mirror)"
debootstrap --variant=minbase bookworm "$root" "$mirror" > "$root.debootstrap.log" 2>&1 ||
  { tail -20 "$root.debootstrap.log" >&2; exit 1; }
rm -f "$root.debootstrap.log"
t_boot=$(( $(date +%s) - t0 ))
echo "   $t_boot s"

# The root's apt uses the same mirror; DNS as on this machine.
echo "deb $mirror bookworm main" > "$root/etc/apt/sources.list"
cp /etc/resolv.conf "$root/etc/resolv.conf"

mount -t proc proc "$root/proc"
mount -t tmpfs -o mode=755,nosuid dev "$root/dev"
for node in "null c 1 3" "zero c 1 5" "full c 1 7" "random c 1 8" "urandom c 1 9" "tty c 5 0"; do
  set -- $node
  mknod -m 666 "$root/dev/$1" "$2" "$3" "$4"
done
mkdir -p "$root/dev/shm" "$root/dev/pts"
mount -t tmpfs -o mode=1777,nosuid,nodev shm "$root/dev/shm"
# A private devpts instance (not the host's ptys), for the programs that want a terminal (apt's log).
mount -t devpts -o newinstance,ptmxmode=0666,mode=0620 devpts "$root/dev/pts"
ln -s pts/ptmx "$root/dev/ptmx"
ln -s /proc/self/fd "$root/dev/fd"
ln -s /proc/self/fd/0 "$root/dev/stdin"
ln -s /proc/self/fd/1 "$root/dev/stdout"
ln -s /proc/self/fd/2 "$root/dev/stderr"

# The checkout, as committed (git is not in the bare root yet, so the host clones it).
git clone -q "$here" "$root/root/moe4d"
echo "== cloned $(git -C "$here" rev-parse --short HEAD) into $root/root/moe4d"

run_in_root() {  # NAME COMMAND: run a README command in the root, report its wall time
  local name=$1 cmd=$2 start rc
  start=$(date +%s)
  echo "== [$name] $cmd (in the bare root)"
  set +e
  chroot "$root" /usr/bin/env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    TERM=dumb LANG=C.UTF-8 /bin/bash -c "cd /root/moe4d && $cmd"
  rc=$?
  set -e
  echo "== [$name] exit $rc after $(( $(date +%s) - start )) s"
  return $rc
}

status=0
if [ -z "$only" ] || [ "$only" = demo ]; then run_in_root demo scripts/demo.sh || status=1; fi
if [ -z "$only" ] || [ "$only" = test ]; then run_in_root test scripts/test.sh || status=1; fi
echo "== total $(( $(date +%s) - t0 )) s (debootstrap $t_boot s)"
[ $status -eq 0 ] && echo "check_fresh_machine: PASS" || echo "check_fresh_machine: FAIL"
exit $status
