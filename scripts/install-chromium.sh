#!/bin/sh
# install-chromium.sh installs Debian's headless-capable Chromium, which the
# live page's browser test (bench/browser.TestPageInChromium) and the
# screenshot command (scripts/debugpage-screenshot.sh) drive. Idempotent:
# it installs only when no chromium is on the PATH.
set -eu
if command -v chromium >/dev/null 2>&1; then
	echo "install-chromium: $(chromium --version 2>/dev/null || echo chromium) is present"
	exit 0
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
$sudo apt-get update
$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium fonts-dejavu-core
chromium --version
