#!/usr/bin/env bash
# What the test suite needs beyond npm packages, from Debian:
#   chromium    the queue dashboard's browser test (test/Dashboard.browser.test.ts)
#   prometheus  for promtool, which checks and unit-tests ops/prometheus/alerts.yml (test/OpsRules.test.ts)
#   pgbouncer   the pooler the service is tested behind (test/PgBouncer.test.ts)
# Safe to run again: it installs only what is missing, after one `apt-get update`. Where it
# cannot install, it says why, and the tests that need the program are skipped with that reason.
# `npm test` runs it with --no-chromium (the browser is large; run this script without it to get it).
set -euo pipefail

# program, Debian package, what needs it
WANTED=(
  "/usr/bin/chromium chromium the queue dashboard browser test"
  "/usr/bin/promtool prometheus the alert rules test"
  "/usr/sbin/pgbouncer pgbouncer the PgBouncer test"
)

missing=()
for entry in "${WANTED[@]}"; do
  read -r program package what <<<"$entry"
  if [ "$package" = chromium ] && [ "${1:-}" = --no-chromium ]; then continue; fi
  if [ -x "$program" ]; then
    echo "ci-prerequisites: $program is present."
  else
    missing+=("$package")
    echo "ci-prerequisites: $program is missing ($what needs it; Debian package $package)."
  fi
done

if [ "${#missing[@]}" -eq 0 ]; then exit 0; fi

if ! command -v apt-get >/dev/null 2>&1; then
  echo "ci-prerequisites: apt-get is not available; the tests that need ${missing[*]} will be skipped." \
    "Install them with your system's package manager to run those tests."
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "ci-prerequisites: installing needs root; the tests that need ${missing[*]} will be skipped." \
    "Run: sudo apt-get update && sudo apt-get install -y --no-install-recommends ${missing[*]}"
  exit 0
fi

echo "ci-prerequisites: installing Debian's ${missing[*]}."
export DEBIAN_FRONTEND=noninteractive
if apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}"; then
  echo "ci-prerequisites: installed ${missing[*]}."
else
  echo "ci-prerequisites: installing ${missing[*]} failed; the tests that need them will be skipped."
fi
