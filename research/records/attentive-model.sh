#!/usr/bin/env bash
# Extracts the attentive five-stage mini policy (sha256 9508c9e67aba…, bundled until commit dcd4e42) to runs/attentive,
# the starting policy of the budget experiment and its replication. Run from the checkout's root; idempotent.
set -euo pipefail
mkdir -p runs/attentive
for f in config.json generation_config.json model.safetensors tokenizer.json tokenizer_config.json; do
  [ -s runs/attentive/$f ] || git show dcd4e42:models/default/$f > runs/attentive/$f
done
