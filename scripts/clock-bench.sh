#!/usr/bin/env bash
# The clock-synchronization figures of ARCHITECTURE.md (Time): the multi-host test's plain run
# N times, its 5 s run through jitter relays 2N times and the 60 s one (ignored by default:
# about 1.5 min) N times — N = $1, 3 if not given —, each printing per host the error of the
# estimated clock at the hop's start and end, the stated bound and their ratio. Needs root
# (network namespaces) and libfaketime (install-deps.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-3}
bash scripts/install-deps.sh
cargo test -p p5-cli --test multihost --no-run
one() {
    uptime
    nice cargo test -p p5-cli --test multihost "$1" -- --exact --include-ignored --nocapture \
        --test-threads=1 2>&1 |
        grep -E '^(host|[abc] ) |^links:|^relay |^test |clocks per host|^ {19}'
}
for _ in $(seq "$n"); do
    one three_hosts_with_skewed_drifting_clocks_merge_causally_within_bounds
    one clocks_hold_their_bounds_through_a_jitter_relay_for_5_s
    one clocks_hold_their_bounds_through_a_jitter_relay_for_5_s
    one clocks_hold_their_bounds_through_a_jitter_relay_for_60_s
done
