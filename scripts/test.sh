#!/usr/bin/env bash
# p5's one test command (README, .ci/run): installs what the tests need on a fresh machine,
# then checks formatting, lints and docs with warnings denied, and runs every test of the
# workspace.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh
# PostgreSQL for the merge tests: $P5_TEST_PG_URL, the local server, or a throwaway one.
eval "$(bash scripts/pg-test-server.sh)"
# Headless Chromium and playwright-core for the web viewer's browser test.
bash scripts/install-browser.sh

echo "== cargo fmt --check"
cargo fmt --all --check
echo "== cargo clippy (warnings denied)"
cargo clippy --workspace --all-targets --locked -- -D warnings
echo "== cargo doc (warnings denied: no broken or private links in the docs)"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --locked
echo "== cargo build (the preload and runtime libraries the tests load and link)"
# Built before any test runs: a test that finds one older than its sources builds it with
# `cargo build`, whose runtime build rewrites target/debug/deps/libp5_runtime.a while another
# test may be linking against it (seen: "ld: cannot find …/libp5_runtime.a").
cargo build --workspace --locked
echo "== cargo test"
cargo test --workspace --locked 2>&1 | tee target/test.log
echo "== real code bases instrumented and still building (SQLite, Lua, libFuzzer, a crate, a PyPI package)"
cargo test -p p5-instrument --locked -- --ignored realcode 2>&1 | tee -a target/test.log
# Fail loudly if the runner executed nothing (a test suite that cannot fail is a defect).
grep -q "test result: ok" target/test.log
