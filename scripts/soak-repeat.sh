#!/usr/bin/env bash
# Runs the short soak (500 rows, concurrent and scheduled) N times in a
# row, each with a fresh seed, and fails if any run fails. The log of each
# failed run is kept in bin/soak-logs; it ends with the command that runs
# its seed again (the scheduled run's replays it exactly).
set -euo pipefail
cd "$(dirname "$0")/.."

runs=${1:-20}
bin=$PWD/bin
mkdir -p "$bin/soak-logs"
go test -c -race -o "$bin/soak.test" ./internal/outbox

pass=0 fail=0
for i in $(seq "$runs"); do
	log=$bin/soak-logs/run-$i.log
	start=$SECONDS
	# A fresh random seed per run; the test logs it too.
	seed=$(( (RANDOM << 15 | RANDOM) % 1000000007 + 1 ))
	if (cd internal/outbox && OUTFLOW_SOAK_SEED=$seed "$bin/soak.test" -test.run '^TestSoak_' -test.count=1 -test.v >"$log" 2>&1); then
		pass=$((pass + 1))
		echo "run $i: ok, seed $seed, $((SECONDS - start))s"
		grep -E 'sends accepted|SQS redeliveries' "$log" | sed 's/^ */    /' || true
		rm -f "$log"
	else
		fail=$((fail + 1))
		echo "run $i: FAIL, seed $seed, $((SECONDS - start))s, log $log"
		grep -E 'Error:|Messages:' -A2 "$log" | head -20 || true
	fi
done
echo "soak: $pass passed, $fail failed"
((fail == 0))
