#!/bin/sh
# A remote shell for tests (OpenMPI calls plm_rsh_agent as `AGENT HOST COMMAND...`): runs COMMAND on
# this machine in a UTS namespace whose hostname is HOST, so that every hostfile entry is its own
# node to MPI (its own orted, no shared-memory transport between them).
# FAKE_RSH_DOWN="h1 h2": these hosts do not answer (ssh's exit 255).
# FAKE_RSH_SWAP_HOST=h, FAKE_RSH_SWAP_FROM=/path, FAKE_RSH_SWAP_TO=/other: host h runs another binary.
host="$1"
shift
case " $FAKE_RSH_DOWN " in
  *" $host "*) echo "ssh: connect to host $host port 22: Connection refused" >&2; exit 255 ;;
esac
cmd="$*"
if [ -n "$FAKE_RSH_SWAP_HOST" ] && [ "$host" = "$FAKE_RSH_SWAP_HOST" ]; then
  cmd=$(printf '%s' "$cmd" | sed "s|$FAKE_RSH_SWAP_FROM|$FAKE_RSH_SWAP_TO|g")
fi
exec unshare --uts sh -c 'hostname "$0" && exec sh -c "$1"' "$host" "$cmd"
