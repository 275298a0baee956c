#!/usr/bin/env bash
# Builds and runs every test twice: a portable Release build with GCC (-DATTN_NATIVE=OFF: the
# kernels are picked at run time, as an installed package runs them), then one clang build for
# this CPU with AddressSanitizer + UndefinedBehaviorSanitizer and libFuzzer's instrumentation,
# which runs every test again and then each fuzz harness for a short fixed time
# (ATTN_FUZZ_SECONDS, default 15). One sanitized build instead of two (sanitized tests, then
# fuzzers), and the tests' own code at -O0 in it (tests/CMakeLists.txt), keep CI at 17-22 minutes
# on two shared cores.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/deps.sh
jobs=$(nproc)
# clang 14's ASan flags libstdc++ 12's std::stable_sort temporary buffer (operator new(nothrow)
# freed by operator delete, which clang lowers to free) as a mismatch: a known false positive.
export ASAN_OPTIONS=${ASAN_OPTIONS:-alloc_dealloc_mismatch=0}
build() {  # <dir> <cmake flags...>
  local dir=$1
  shift
  echo "== build $dir"
  cmake -S . -B "$dir" "$@" >/dev/null
  cmake --build "$dir" -j"$jobs" >/dev/null
  (cd "$dir" && ctest --output-on-failure -j"$jobs")
}
build build-test-release -DCMAKE_BUILD_TYPE=Release -DATTN_NATIVE=OFF -DATTN_BENCH=ON
build build-test-sanitize -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ -DATTN_FUZZ=ON
fuzz/run.sh build-test-sanitize "${ATTN_FUZZ_SECONDS:-15}"
