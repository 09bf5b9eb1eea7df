#!/usr/bin/env bash
# make bench: build oxsupervise (make build) and the harness, then run every benchmark
# suite once, unattended. Results: bench/results/*.md, *.png, *.json and
# bench/results/results.md (the index the README links).
# Needs root (sessions, cgroups, BPF); bubblewrap and firejail are used as
# peers when installed (apt-get install bubblewrap firejail) and reported as
# missing otherwise. OXBENCH_ARGS passes extra flags (e.g. --quick) and
# suite names (session fs macro net audit memory vm).
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
mkdir -p bin
make --no-print-directory GO="$GO" build # oxsupervise and the programs it executes, in bin/
$GO build -o bin/oxbench ./bench/cmd/oxbench
if [ "$(id -u)" -ne 0 ]; then
	exec sudo -E bin/oxbench --oxsupervise bin/oxsupervise --out bench/results ${OXBENCH_ARGS:-}
fi
exec bin/oxbench --oxsupervise bin/oxsupervise --out bench/results ${OXBENCH_ARGS:-}
