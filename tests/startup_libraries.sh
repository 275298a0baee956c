#!/usr/bin/env bash
# Issue 23: a plain run loads neither OpenBLAS nor Open MPI. attn-cli (and the Python module, when
# built) have no NEEDED entry for them; --version and a run without a BLAS product do not load
# them (LD_DEBUG=libs); a run whose prefill attention multiplies through sgemm loads OpenBLAS.
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
  if grep -Eq 'libmpi|libopenblas' <<<"$needed"; then fail "$elf needs: $needed"; fi
done

# The libraries a command's process loaded, from the dynamic loader's own log.
loaded() {
  LD_DEBUG=libs "$cli" "$@" 2>&1 >/dev/null | grep -Eo 'calling init: [^ ]+' | sort -u
}

for cmd in "--version" "decode --config configs/mha.json --prefill 1 --steps 1"; do
  # shellcheck disable=SC2086 # the command's words
  libs=$(loaded $cmd)
  grep -q 'libc.so' <<<"$libs" || fail "attn-cli $cmd: no loader log (LD_DEBUG unsupported?)"
  if grep -Eq 'libmpi|libopenblas' <<<"$libs"; then fail "attn-cli $cmd loaded: $libs"; fi
done
# Prefill attention over 7 rows is an sgemm (attention.cpp, head_attention).
libs=$(loaded run --config configs/mha.json)
grep -q 'libopenblas' <<<"$libs" || fail "attn-cli run --config configs/mha.json: no OpenBLAS: $libs"
if grep -q 'libmpi' <<<"$libs"; then fail "attn-cli run --config configs/mha.json loaded MPI"; fi
# The summary says whether OpenBLAS was needed.
core=$("$cli" decode --config configs/mha.json --prefill 1 --steps 1 2>&1 >/dev/null)
grep -q 'OpenBLAS core = not loaded' <<<"$core" || fail "decode without sgemm: $core"

[ $failed = 0 ] && echo "startup libraries: all checks passed"
exit $failed
