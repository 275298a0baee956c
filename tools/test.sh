#!/usr/bin/env bash
# Builds and runs every test twice: a portable Release build (-DATTN_NATIVE=OFF: the kernels are
# picked at run time, as an installed package runs them), then an AddressSanitizer +
# UndefinedBehaviorSanitizer build for this CPU; then builds the libFuzzer harnesses (clang) and runs each
# for a short fixed time (ATTN_FUZZ_SECONDS, default 20).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/deps.sh
jobs=$(nproc)
for kind in release sanitize; do
  dir=build-test-$kind
  flags=(-DCMAKE_BUILD_TYPE=Release -DATTN_NATIVE=OFF -DATTN_BENCH=ON)
  [ "$kind" = sanitize ] && flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DATTN_SANITIZE=ON)
  echo "== $kind build ($dir)"
  cmake -S . -B "$dir" "${flags[@]}" >/dev/null
  cmake --build "$dir" -j"$jobs" >/dev/null
  (cd "$dir" && ctest --output-on-failure -j"$jobs")
done
echo "== fuzz build (build-test-fuzz, clang)"
cmake -S . -B build-test-fuzz -DCMAKE_CXX_COMPILER=clang++ -DATTN_FUZZ=ON -DBUILD_TESTING=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build-test-fuzz -j"$jobs" --target fuzz_safetensors fuzz_config fuzz_input >/dev/null
fuzz/run.sh build-test-fuzz "${ATTN_FUZZ_SECONDS:-20}"
