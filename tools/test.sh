#!/usr/bin/env bash
# Builds and runs every test twice: a portable Release build with GCC (-DATTN_NATIVE=OFF: the
# kernels are picked at run time, as an installed package runs them), then one clang build for
# this CPU with AddressSanitizer + UndefinedBehaviorSanitizer and libFuzzer's instrumentation,
# which runs every test again and then each fuzz harness for a short fixed time
# (ATTN_FUZZ_SECONDS, default 8: 14 harnesses). What keeps CI near 15 minutes on two shared cores
# (docs/testing.md): one sanitized build instead of two, the tests' own code at -O0 in both
# builds (tests/CMakeLists.txt), the parsing code at -O1 and line tables rather than full debug
# information in the sanitized one (enough for the sanitizers' reports), and Ninja, which starts a
# target's compiles before the libraries it links are done.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/deps.sh
jobs=$(nproc)
# clang 14's ASan flags libstdc++ 12's std::stable_sort temporary buffer (operator new(nothrow)
# freed by operator delete, which clang lowers to free) as a mismatch: a known false positive.
export ASAN_OPTIONS=${ASAN_OPTIONS:-alloc_dealloc_mismatch=0}
# ccache (tools/deps.sh installs it): a machine's later runs recompile only what changed. The
# clone's own path is not part of the key (CCACHE_BASEDIR, CCACHE_NOHASHDIR), so every clone on a
# machine shares the cache; the sanitizers' reports then name the source files of the clone that
# first compiled them, which hold the same text.
launcher=()
if command -v ccache >/dev/null 2>&1; then
  export CCACHE_BASEDIR=$PWD CCACHE_NOHASHDIR=true
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi
build() {  # <dir> <cmake flags...>
  local dir=$1
  shift
  echo "== build $dir"
  local generator=()
  [ -f "$dir/CMakeCache.txt" ] || generator=(-G Ninja)  # a directory keeps the generator it has
  cmake -S . -B "$dir" "${generator[@]}" "${launcher[@]}" "$@" >/dev/null
  cmake --build "$dir" -j"$jobs" -- --quiet  # Ninja: only a failing command's output
  (cd "$dir" && ctest --output-on-failure -j"$jobs")
}
build build-test-release -DCMAKE_BUILD_TYPE=Release -DATTN_NATIVE=OFF -DATTN_BENCH=ON
build build-test-sanitize -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ -DATTN_FUZZ=ON -DATTN_PYTHON=ON \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -gline-tables-only -DNDEBUG"
fuzz/run.sh build-test-sanitize "${ATTN_FUZZ_SECONDS:-8}"
