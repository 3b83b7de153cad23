#!/bin/sh
# debugpage-screenshot.sh regenerates docs/debugpage.png: the live page in
# headless Chromium after a real cancellation, with live tasks holding and
# waiting (bench/browser.TestPageInChromium). Needs chromium
# (scripts/install-chromium.sh).
set -eu
cd "$(dirname "$0")/.."
MOIRAI_SCREENSHOT="$PWD/docs/debugpage.png" go test ./bench/browser -run '^TestPageInChromium$' -count=1 -v
