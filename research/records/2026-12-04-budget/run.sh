#!/usr/bin/env bash
# Issue 46's budget ablation (PREREGISTERED.md beside this file): base, real-q, dyna-q-sim on the attentive mini
# policy; 5 seeds × 100 held-out tasks. Finished (configuration, seed) runs are skipped, unfinished ones resume.
# Records: ablation/ beside this file (finished runs are skipped; checkpoints and rollout logs are git-ignored).
set -euo pipefail
# The first runs (base, real-q seeds 0-1, dyna-q-obs seed 0) ran with attention kernel version 1; every run keeps it.
cd "$(git rev-parse --show-toplevel)"
bash research/records/attentive-model.sh
CPU_FAST_ATTENTION=1 exec node --import tsx research/scripts/ablation.ts --world mini --model runs/attentive --configs base,real-q,dyna-q-sim,dyna-q,dyna-q-tok,envace-verifier,envace-strict,dyna-q-recall,real-h,dyna-h,envace-recall,dyna-h-recall \
  --seeds 5 --steps 40 --prompts 4 --k 4 --lr 0.001 --rank 8 --tasks 100 --train-tasks 200 \
  --max-turns 12 --max-act-tokens 96 --max-rehearse-tokens 641 --fidelity-tokens 641 --eval-every 0 \
  --out research/records/2026-12-04-budget/ablation --no-write "$@"
