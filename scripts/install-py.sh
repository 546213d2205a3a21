#!/usr/bin/env bash
# Installs the Python packages p5's tests need from PyPI, pinned (scripts/py-requirements.txt),
# when any of them cannot be imported:
# - perfetto (with its protobuf runtime): Perfetto's own generated protobuf classes, which the
#   export tests decode every packet of `p5 export perfetto` with (export/tests/perfetto_check.py).
#   Only the classes are used: its trace processor would download a binary, which cannot be
#   fetched here.
# - requests (urllib3 underneath): the Python client's tests record a program using it.
# - redis, psycopg and PyMySQL: the services test's Python backends call redis, PostgreSQL
#   and MariaDB.
# Idempotent; uses the `python3` on PATH (its pip, as the user running the tests).
set -euo pipefail
cd "$(dirname "$0")/.."
check='from perfetto.protos.perfetto.trace import perfetto_trace_pb2
import requests, urllib3, redis, psycopg, pymysql'
if ! python3 -c "$check" 2>/dev/null; then
    echo "installing the tests' Python packages (scripts/py-requirements.txt)"
    python3 -m pip install --quiet --disable-pip-version-check -r scripts/py-requirements.txt
fi
python3 -c "$check" ||
    { echo "install-py.sh: the tests' Python packages still cannot be imported" >&2; exit 1; }
