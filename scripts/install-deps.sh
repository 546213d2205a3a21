#!/usr/bin/env bash
# Installs the system packages p5's build, demo and tests use, if they are missing.
# Idempotent; needs root (or sudo) only when something is missing.
set -euo pipefail
missing=()
command -v gcc >/dev/null 2>&1 || missing+=(gcc libc6-dev)
# The instrumenter's C++, Python and Java end-to-end tests build and run real programs.
command -v g++ >/dev/null 2>&1 || missing+=(g++)
command -v python3 >/dev/null 2>&1 || missing+=(python3)
command -v javac >/dev/null 2>&1 || missing+=(default-jdk-headless)
command -v make >/dev/null 2>&1 || missing+=(make)
# Host-agent tests build network namespaces (they skip without `ip`).
command -v ip >/dev/null 2>&1 || missing+=(iproute2)
command -v tc >/dev/null 2>&1 || missing+=(iproute2)
command -v unshare >/dev/null 2>&1 || missing+=(util-linux)
# The multi-host test injects clock offsets and drift with libfaketime (its library, not only
# the command), in network namespaces (iproute2 above).
{ command -v faketime && ls /usr/lib/*/faketime/libfaketimeMT.so.1; } >/dev/null 2>&1 ||
    missing+=(faketime libfaketime)
# The pcap reader's tests capture loopback traffic with tcpdump (they skip without it or root).
command -v tcpdump >/dev/null 2>&1 || missing+=(tcpdump)
# The instrumenter's real-code coverage test counts function definitions with Universal Ctags.
command -v ctags >/dev/null 2>&1 && ctags --version 2>/dev/null | grep -q Universal || missing+=(universal-ctags)
# `p5 record --preload`'s test records an unmodified nginx proxying to a Python backend.
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || missing+=(nginx-light)
# The services test records its own redis-server behind the Python backends.
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
if ((${#missing[@]})); then
    sudo=""
    [ "$(id -u)" = 0 ] || sudo="sudo"
    echo "installing: ${missing[*]}"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}"
fi
# The PyPI packages the tests use (pinned): scripts/install-py.sh.
bash "$(dirname "$0")/install-py.sh"
