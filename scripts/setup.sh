#!/usr/bin/env bash
# One idempotent install for a fresh clone: system packages (Vulkan + lavapipe, Chromium) and npm packages.
# What it changes on the system is in docs/setup.md: apt packages libvulkan1, mesa-vulkan-drivers and
# chromium when missing, and on Debian 12 the bookworm-backports suite in /etc/apt/sources.list.d/; each change
# is printed as it is made.
# onnxruntime-node (pulled in by @huggingface/transformers) would try to download CUDA binaries in its
# postinstall and fail offline; we never use it (onnxruntime-web is our oracle), so its download is skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-system.sh
export ONNXRUNTIME_NODE_INSTALL=skip ONNXRUNTIME_NODE_INSTALL_CUDA=skip
stamp=node_modules/.envace-install-stamp
if [ ! -f "$stamp" ] || [ package-lock.json -nt "$stamp" ] || [ package.json -nt "$stamp" ]; then
  if [ -f package-lock.json ]; then npm ci --no-audit --no-fund; else npm install --no-audit --no-fund; fi
  touch "$stamp"
fi
