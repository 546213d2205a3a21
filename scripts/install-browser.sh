#!/usr/bin/env bash
# Installs what the p5 web browser tests need, if it is missing: Debian's chromium (Playwright's
# own browser download does not work here), node/npm, and playwright-core under
# web/tests/browser/node_modules. Idempotent; needs root (or sudo) only when a package is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
missing=()
[ -x /usr/bin/chromium ] || missing+=(chromium)
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
if ((${#missing[@]})); then
    sudo=""
    [ "$(id -u)" = 0 ] || sudo="sudo"
    echo "installing: ${missing[*]}"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
if [ ! -f web/tests/browser/node_modules/playwright-core/package.json ]; then
    echo "installing playwright-core into web/tests/browser/node_modules"
    (cd web/tests/browser && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm install --no-audit --no-fund --silent)
fi
