#!/usr/bin/env bash
# The clock-synchronization figures of ARCHITECTURE.md (Time): the multi-host test's plain run,
# its 5 s run through jitter relays and the 60 s one (ignored by default: about 1.5 min), each
# printing per host the error of the estimated clock at the hop's start and end, the stated
# bound and their ratio. Needs root (network namespaces) and libfaketime (install-deps.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
nice cargo test -p p5-cli --test multihost -- --include-ignored --nocapture --test-threads=1 2>&1 |
    grep -E '^(host|[abc] ) |^links:|^relay |^test |clocks per host|^ {19}'
