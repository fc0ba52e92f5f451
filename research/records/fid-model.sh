#!/usr/bin/env bash
# Rebuilds the fidelity-stage mini policy (sha256 8c211b7c4503…) in runs/fid-mini-A: the attentive five-stage policy
# (research/records/attentive-model.sh) continued 1200 steps on more Rehearse rows grounded as rollouts ground them
# (issue 46, research/records/2026-12-05-fidelity-stage). The same seed on the same backend gives the same bytes;
# the script checks them. Run from the checkout's root; idempotent (about 10-25 minutes on 2 cores when it trains).
set -euo pipefail
want=8c211b7c450366c9ecf64c6784bafe930d6fd2e70321311ef07ffc68de379b01
bash research/records/attentive-model.sh
if [ ! -s runs/fid-mini-A/model.safetensors ]; then
  node --import tsx research/pretrain/cli.ts --world mini --seed 0 --steps 1200 --backend cpu-fast --init runs/attentive --lr 0.0005 \
    --copy-drills 20000 --pre-tokenizer stated-values --retokenize --act-weight 2 --act-only-tasks 3000 --rehearse-only-tasks 3000 \
    --rehearse-weight 2 --snapshot-every 200 --out runs/fid-mini-A >&2
fi
got=$(sha256sum runs/fid-mini-A/model.safetensors | cut -d' ' -f1)
[ "$got" = "$want" ] || { echo "runs/fid-mini-A/model.safetensors has sha256 $got, not $want: a different build; move it away and rerun" >&2; exit 1; }
