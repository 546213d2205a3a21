#!/usr/bin/env bash
# Installs the Python packages p5's tests need, if missing, pinned:
# - perfetto (with its protobuf runtime): Perfetto's own generated protobuf classes, which the
#   export tests decode every packet of `p5 export perfetto` with (export/tests/perfetto_check.py).
#   Only the classes are used: its trace processor would download a binary, which cannot be
#   fetched here.
# Idempotent; uses the `python3` on PATH (its pip, as the user running the tests).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! python3 -c "from perfetto.protos.perfetto.trace import perfetto_trace_pb2" 2>/dev/null; then
    echo "installing perfetto==0.59.1 (Perfetto's protobuf classes) for python3"
    python3 -m pip install --quiet --disable-pip-version-check "perfetto==0.59.1" "protobuf==7.36.2"
fi
python3 -c "from perfetto.protos.perfetto.trace import perfetto_trace_pb2" \
    || { echo "install-py.sh: perfetto's protobuf classes still cannot be imported" >&2; exit 1; }
