#!/usr/bin/env bash
# Builds and runs every test twice: a Release build, then an AddressSanitizer +
# UndefinedBehaviorSanitizer build.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/deps.sh
jobs=$(nproc)
for kind in release sanitize; do
  dir=build-test-$kind
  flags=(-DCMAKE_BUILD_TYPE=Release)
  [ "$kind" = sanitize ] && flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DATTN_SANITIZE=ON)
  echo "== $kind build ($dir)"
  cmake -S . -B "$dir" "${flags[@]}" >/dev/null
  cmake --build "$dir" -j"$jobs" >/dev/null
  (cd "$dir" && ctest --output-on-failure -j"$jobs")
done
