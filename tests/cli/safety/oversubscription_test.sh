#!/usr/bin/env bash
# tests/cli/safety/oversubscription_test.sh MOE4D MPIEXEC... — two ranks confined to one core
# (taskset, so the test means the same on any machine) are reported as oversubscribed: one warning
# line, the metrics' first record, time.rank_descheduled_s every step, and a note on step_time.svg
# and comm_share.svg; one rank on its cores gets none of it (issue 30).
moe4d_bin=$1
shift
MPIEXEC=("$@")
source "$(dirname "$0")/common.sh" "$moe4d_bin"
command -v taskset > /dev/null || { echo "SKIP: no taskset"; exit 0; }

make_corpus corpus bytes
write_config over.yaml corpus bytes over 5 0 2
taskset -c 0 "${MPIEXEC[@]}" -np 2 "$MOE4D" train over.yaml --quiet > over.log 2>&1 || { cat over.log; die "training failed"; }
[ "$(grep -c "WARNING: oversubscribed: 2 ranks x 1 BLAS thread(s) on 1 cores of host" over.log)" -eq 1 ] ||
  { cat over.log; die "expected one oversubscription warning"; }
python3 - over/metrics.jsonl <<'PY' || die "the metrics do not record the oversubscription"
import json, sys
records = [json.loads(line) for line in open(sys.argv[1])]
hosts = records[0]["oversubscription"]["hosts"]
assert len(hosts) == 1 and hosts[0]["ranks"] == 2 and hosts[0]["cores"] == 1 and hosts[0]["threads"] == 2, hosts
assert all("oversubscription" not in r for r in records[1:])
for r in records:
    d = r["time"]["rank_descheduled_s"]
    assert len(d) == 2 and all(v is None or v >= 0 for v in d), d
PY
for picture in step_time.svg comm_share.svg; do
  grep -q "oversubscribed: 2 rank threads on 1 cores of host" over/$picture || die "no oversubscription note on $picture"
done

write_config alone.yaml corpus bytes alone 3 0 1
"$MOE4D" train alone.yaml --quiet > alone.log 2>&1 || { cat alone.log; die "training failed"; }
! grep -q "oversubscribed" alone.log alone/step_time.svg alone/metrics.jsonl || die "one rank reported as oversubscribed"
echo "ok: oversubscription_test"
