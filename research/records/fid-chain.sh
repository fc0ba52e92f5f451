#!/usr/bin/env bash
# Rebuilds the fidelity stages A-E of the mini policy (research/records/2026-12-05-fidelity-stage/README.md) from the
# attentive policy into runs/fid-chain/<stage>, each stage's --init the one before it, checks each model.safetensors against the sha256 the record
# lists, and keeps each stage's pretrain.json (its data, losses and command) as
# research/records/2026-12-05-fidelity-stage/records/<stage>-pretrain.json, the records a model card is made from.
# The same seed on the same backend gives the same bytes. Run from the checkout's root; idempotent (a stage whose
# folder holds the right weights is not retrained). About 25 minutes on 2 idle cores.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
rec=research/records/2026-12-05-fidelity-stage/records
mkdir -p "$rec"
bash research/records/attentive-model.sh
common="--world mini --backend cpu-fast --copy-drills 20000 --pre-tokenizer stated-values --retokenize --act-weight 2 --snapshot-every 200"
stage() { # name sha256 init flags...
  local name=$1 want=$2 init=$3; shift 3
  local out=runs/fid-chain/$name
  if [ ! -s "$out/model.safetensors" ] || [ ! -s "$out/pretrain.json" ] || [ "$(sha256sum "$out/model.safetensors" | cut -d' ' -f1)" != "$want" ]; then
    rm -rf "$out"
    node --import tsx research/pretrain/cli.ts $common --init "$init" "$@" --out "$out" >&2
  fi
  local got
  got=$(sha256sum "$out/model.safetensors" | cut -d' ' -f1)
  [ "$got" = "$want" ] || { echo "$out/model.safetensors has sha256 $got, not $want: not the recorded build" >&2; exit 1; }
  cp "$out/pretrain.json" "$rec/$name-pretrain.json"
  echo "stage $name: $got" >&2
}
stage A 8c211b7c450366c9ecf64c6784bafe930d6fd2e70321311ef07ffc68de379b01 runs/attentive --seed 0 --steps 1200 --lr 0.0005 --act-only-tasks 3000 --rehearse-only-tasks 3000 --rehearse-weight 2
stage B b7c5c1dd0e8bbe351b2b33aec4ba03fbb8e6657fdb0c501fd2cf105a31953fc0 runs/fid-chain/A --seed 0 --steps 800 --lr 0.0005 --act-only-tasks 1000 --rehearse-only-tasks 6000 --rehearse-weight 4 --no-expert-rehearse
stage C d4010a6472bf8980af0e815e927d807223ab04ac97e73cb41d75bd7d429daaf8 runs/fid-chain/B --seed 1 --steps 600 --lr 0.00025 --act-only-tasks 1000 --rehearse-only-tasks 6000 --rehearse-weight 4 --no-expert-rehearse
stage D 24207d288f1823dd04c103d3c70de71ad5e95314cbcd710b44b28ea1ad7ae167 runs/fid-chain/C --seed 2 --steps 400 --lr 0.00025 --act-only-tasks 1000 --rehearse-only-tasks 6000 --rehearse-weight 4 --no-expert-rehearse --eval 0
stage E 1949b981f02bed5f31016c2b914ed1944aa8fb91430561c23dfbf3fd6b17d449 runs/fid-chain/D --seed 3 --steps 600 --lr 0.00025 --act-only-tasks 1000 --rehearse-only-tasks 6000 --rehearse-weight 4 --no-expert-rehearse --rehearse-write-repeat 3 --eval 0
