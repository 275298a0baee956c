#!/usr/bin/env bash
# Issue 23: a run loads neither OpenBLAS nor Open MPI. attn-cli (and the Python module, when
# built) have no NEEDED entry for them; --version and a run without a BLAS product do not load
# them (LD_DEBUG=libs), nor does the notebook's run or a larger prefill. Issue 52: nor the OpenMP
# runtime (libgomp, libomp): the engine's threads are its own pool's, `omp simd` needs no runtime.
# Usage: tests/startup_libraries.sh attn-cli source-dir [more ELF files to check]
set -uo pipefail
cli=$1
cd "$2" || exit 1
shift 2
failed=0
fail() {
  echo "FAIL: $*"
  failed=1
}

for elf in "$cli" "$@"; do
  [ -e "$elf" ] || continue
  needed=$(readelf -d "$elf" | grep NEEDED)
  if grep -Eq 'libmpi|libopenblas|libgomp|libomp|libiomp' <<<"$needed"; then fail "$elf needs: $needed"; fi
done

# Issue 52: built with ATTN_STATIC_RUNTIME (the ctest entry says so), attn-cli needs none of the
# libraries linked into it; their loading and symbol binding were most of a process's start-up.
if [ "${ATTN_STATIC_RUNTIME:-OFF}" = ON ]; then
  needed=$(readelf -d "$cli" | grep NEEDED)
  if grep -Eq 'libstdc\+\+|libgcc_s|libstb|libz\.' <<<"$needed"; then
    fail "$cli (ATTN_STATIC_RUNTIME) needs: $needed"
  fi
fi

# The libraries a command's process loaded, from the dynamic loader's own log.
loaded() {
  LD_DEBUG=libs "$cli" "$@" 2>&1 >/dev/null | grep -Eo 'calling init: [^ ]+' | sort -u
}

for cmd in "--version" "decode --config configs/mha.json --prefill 1 --steps 1" "run" \
  "run --config configs/mha.json"; do
  # shellcheck disable=SC2086 # the command's words
  libs=$(loaded $cmd)
  grep -q 'libc.so' <<<"$libs" || fail "attn-cli $cmd: no loader log (LD_DEBUG unsupported?)"
  if grep -Eq 'libmpi|libopenblas|libgomp|libomp|libiomp' <<<"$libs"; then fail "attn-cli $cmd loaded: $libs"; fi
done
# A prefill whose attention and products once went to OpenBLAS's sgemm (64 rows against 128 keys
# of head_dim 64): the own kernels now compute every product in the one order of issue 50, so no
# run loads OpenBLAS; only `bench`'s sgemm probe does.
big=(run --config configs/mha.json -c 129 --prefill 128 --steps 1)
libs=$(loaded "${big[@]}")
if grep -Eq 'libopenblas|libmpi|libgomp|libomp|libiomp' <<<"$libs"; then fail "attn-cli ${big[*]} loaded: $libs"; fi
# The summary says whether OpenBLAS was needed.
core=$("$cli" decode --config configs/mha.json --prefill 1 --steps 1 2>&1 >/dev/null)
grep -q 'OpenBLAS core = not loaded' <<<"$core" || fail "decode without sgemm: $core"
# ... and knows it without asking the loader, which searched for and opened the library's files
# (dlopen with RTLD_NOLOAD by name) in every run's summary.
search=$(LD_DEBUG=libs "$cli" decode --config configs/mha.json --prefill 1 --steps 1 2>&1 >/dev/null |
  grep 'find library=libopenblas')
[ -z "$search" ] || fail "decode without sgemm searched for OpenBLAS: $search"

# Under mpirun with the MPI module missing (a copy of attn-cli alone in a folder): status 1 and
# one message from main's handler, not a crash.
if strings "$cli" | grep -q 'cannot load the MPI module'; then
  alone=$(mktemp -d)
  cp "$cli" "$alone/attn-cli"
  out=$(OMPI_COMM_WORLD_SIZE=1 "$alone/attn-cli" run 2>&1)
  status=$?
  rm -rf "$alone"
  [ $status = 1 ] || fail "no MPI module under mpirun: status $status, want 1: $out"
  [ "$(grep -c . <<<"$out")" = 1 ] && grep -q '^attn-cli: error: cannot load the MPI module' <<<"$out" ||
    fail "no MPI module under mpirun: want one error line, got: $out"
fi

[ $failed = 0 ] && echo "startup libraries: all checks passed"
exit $failed
