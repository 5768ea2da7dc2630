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
  libcpp-httplib-dev python3-venv chromium chromium-driver \
  g++-aarch64-linux-gnu qemu-user libpcre2-dev:arm64 libutf8proc-dev:arm64 >/dev/null
