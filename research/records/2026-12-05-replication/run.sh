#!/usr/bin/env bash
# The replication on fresh seeds 5-9 (PREREGISTERED.md beside this file): real-q and dyna-q-recall on the attentive
# mini policy, the budget experiment's settings. Finished runs are skipped, unfinished ones resume.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
bash research/records/attentive-model.sh
CPU_FAST_ATTENTION=1 exec node --import tsx research/scripts/ablation.ts --world mini --model runs/attentive --configs real-q,dyna-q-recall \
  --seeds 10 --only-seeds 5,6,7,8,9 --steps 40 --prompts 4 --k 4 --lr 0.001 --rank 8 --tasks 100 --train-tasks 200 \
  --max-turns 12 --max-act-tokens 96 --max-rehearse-tokens 641 --fidelity-tokens 641 --eval-every 0 \
  --out research/records/2026-12-05-replication/ablation --no-write "$@"
