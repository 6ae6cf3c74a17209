#!/usr/bin/env bash
# What the test suite needs beyond npm packages: Debian's `chromium`, which the
# queue dashboard's browser test drives (test/Dashboard.browser.test.ts). Safe
# to run again: it installs only what is missing. Where it cannot install, it
# says why, and that test is skipped.
set -euo pipefail

CHROMIUM=/usr/bin/chromium

if [ -x "$CHROMIUM" ]; then
  echo "ci-prerequisites: $CHROMIUM is present ($("$CHROMIUM" --version 2>/dev/null || echo "version unknown"))."
  exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
  echo "ci-prerequisites: $CHROMIUM is missing and apt-get is not available;" \
    "the queue dashboard browser test will be skipped. Install Chromium at $CHROMIUM to run it."
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "ci-prerequisites: $CHROMIUM is missing and installing it needs root;" \
    "the queue dashboard browser test will be skipped. Run: sudo apt-get install -y chromium"
  exit 0
fi

echo "ci-prerequisites: installing Debian's chromium package for the queue dashboard browser test."
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq chromium
echo "ci-prerequisites: $CHROMIUM is installed ($("$CHROMIUM" --version 2>/dev/null || echo "version unknown"))."
