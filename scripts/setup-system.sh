#!/usr/bin/env bash
# Installs the system packages the tests need, idempotently:
#  - Vulkan loader + Mesa >= 25 lavapipe (software Vulkan) so Dawn (npm `webgpu`) finds an adapter in Node;
#  - Debian's Chromium for the browser end-to-end tests.
# Debian 12 ships Mesa 22.3, which Dawn rejects; Mesa 25 comes from bookworm-backports.
set -euo pipefail

have_lavapipe() {
  ls /usr/share/vulkan/icd.d/lvp_icd*.json >/dev/null 2>&1 || return 1
  local v
  v=$(dpkg-query -W -f='${Version}' mesa-vulkan-drivers 2>/dev/null || echo 0)
  dpkg --compare-versions "$v" ge 25 && return 0 || return 1
}
have_chromium() { command -v chromium >/dev/null 2>&1; }

if have_lavapipe && have_chromium && ldconfig -p | grep -q libvulkan.so.1; then
  echo "[setup-system] Vulkan/lavapipe (Mesa >= 25) and Chromium already installed" >&2
  exit 0
fi

if [ ! -f /etc/debian_version ] || ! command -v apt-get >/dev/null 2>&1; then
  cat >&2 <<'MSG'
[setup-system] This is not a Debian/Ubuntu machine, so nothing was installed automatically.
Install by hand: a Vulkan loader (libvulkan1), Mesa >= 25 with the lavapipe software driver
(mesa-vulkan-drivers), and Chromium (for the browser tests). On macOS, Dawn uses Metal and needs nothing;
set CHROMIUM_PATH to a Chrome/Chromium binary for the browser tests.
MSG
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

. /etc/os-release
if [ "${ID:-}" = "debian" ] && [ "${VERSION_CODENAME:-}" = "bookworm" ]; then
  src=/etc/apt/sources.list.d/debian.sources
  if [ -f "$src" ] && ! grep -q 'bookworm-backports' "$src"; then
    echo "[setup-system] adding the bookworm-backports suite to $src (for Mesa >= 25)" >&2
    $SUDO sed -i '0,/^Suites: bookworm bookworm-updates$/s//Suites: bookworm bookworm-updates bookworm-backports/' "$src"
  elif [ ! -f "$src" ] && ! grep -rqs 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then
    echo "[setup-system] writing /etc/apt/sources.list.d/backports.list (bookworm-backports, for Mesa >= 25)" >&2
    echo 'deb http://deb.debian.org/debian bookworm-backports main' | $SUDO tee /etc/apt/sources.list.d/backports.list >/dev/null
  fi
  echo "[setup-system] apt-get install: libvulkan1 chromium, and mesa-vulkan-drivers from bookworm-backports" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq libvulkan1 chromium >/dev/null
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq -t bookworm-backports mesa-vulkan-drivers >/dev/null
else
  # Ubuntu 24.04+ / Debian 13+ already ship Mesa >= 24/25.
  echo "[setup-system] apt-get install: libvulkan1 mesa-vulkan-drivers chromium" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq libvulkan1 mesa-vulkan-drivers chromium >/dev/null || \
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq libvulkan1 mesa-vulkan-drivers chromium-browser >/dev/null
fi
echo "[setup-system] installed: mesa-vulkan-drivers $(dpkg-query -W -f='${Version}' mesa-vulkan-drivers), chromium" >&2
