#!/usr/bin/env bash
# Installs the Debian packages snapkv builds and tests with (needs root or sudo).
# Quiet and quick when everything is already there. nginx is for the multi-replica test
# (tests/server, case nginx; deploy/nginx/), which runs its own nginx from a temporary prefix.
set -euo pipefail
PKGS=(build-essential cmake ninja-build pkg-config git python3 python3-pip
      libgtest-dev libgmock-dev libbenchmark-dev libcli11-dev nlohmann-json3-dev libfmt-dev libspdlog-dev
      libpcre2-dev libssl-dev libcpp-httplib-dev libomp-dev clang libclang-rt-14-dev ccache
      nginx python3-matplotlib)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# python3/pip may come from elsewhere (pyenv); only ask apt for them when absent. matplotlib (the
# pictures of snapkv eval) always comes from Debian: snapkv eval falls back to /usr/bin/python3
# when the python3 on PATH cannot import it.
if command -v python3 >/dev/null; then
  tmp=(); for p in "${missing[@]}"; do [[ "$p" == python3 || "$p" == python3-pip ]] || tmp+=("$p"); done
  missing=("${tmp[@]}")
fi
if ((${#missing[@]})); then
  echo "deps.sh: installing ${missing[*]}" >&2
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
