#!/usr/bin/env bash
# Installs what kiln builds and tests with, from Debian 12 packages only.
set -euo pipefail
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends \
  g++ cmake ninja-build ccache make \
  libgtest-dev nlohmann-json3-dev libcli11-dev libxxhash-dev \
  clang libclang-rt-14-dev >/dev/null
