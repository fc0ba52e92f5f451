#!/usr/bin/env bash
# dyna-fq8-recall against real-q at ¼ of the real episodes on the bundled 8-layer mini policy (models/default, G8),
# seeds 0-9, with the base (PREREGISTERED.md beside this file). Finished runs are skipped, unfinished ones resume
# from their last checkpoint. Seeds may be shared between processes, e.g.
#   bash research/records/2026-12-05-g8-budget/run.sh 0,2,4,6,8 & bash research/records/2026-12-05-g8-budget/run.sh 1,3,5,7,9
# Each process runs its seeds' base/real-q runs first (minutes), then their dyna-fq8-recall runs.
# Every run uses the code of commit 2366c7b (PREREGISTERED.md, amendment): run this script from a worktree of it and
# copy the finished runs back, e.g.
#   git worktree add ../g8-code 2366c7b && ln -s "$PWD/node_modules" ../g8-code/node_modules
#   cp -r research/records/2026-12-05-g8-budget/ablation ../g8-code/research/records/2026-12-05-g8-budget/   # resume
#   (cd ../g8-code && bash research/records/2026-12-05-g8-budget/run.sh 0,2,4,6,8)
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
seeds="${1:-0,1,2,3,4,5,6,7,8,9}"
IFS=, read -ra list <<<"$seeds"
for configs in base,real-q dyna-fq8-recall; do
  for s in "${list[@]}"; do
    CPU_FAST_ATTENTION=1 node --import tsx research/scripts/ablation.ts --world mini --model models/default --configs "$configs" \
      --seeds 10 --only-seeds "$s" --steps 40 --prompts 4 --k 4 --lr 0.001 --rank 8 --tasks 100 --train-tasks 200 \
      --max-turns 12 --max-act-tokens 96 --max-rehearse-tokens 641 --fidelity-tokens 641 --eval-every 0 --threads 1 \
      --out research/records/2026-12-05-g8-budget/ablation --no-write "${@:2}"
  done
done
