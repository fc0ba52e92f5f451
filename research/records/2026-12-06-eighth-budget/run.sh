#!/usr/bin/env bash
# Rehearsed episodes at 1/8 of the real budget (PREREGISTERED.md beside this file): dyna-fq8-recall against real-q on
# the attentive mini policy at 20 steps, fresh training seeds 20-29, 300 held-out tasks; the base's evaluation is the
# powered attempt's. Finished runs are skipped, unfinished ones resume from their last checkpoint. Two processes may
# share the seeds, e.g.
#   bash research/records/2026-12-06-eighth-budget/run.sh 20,22,24,26,28 & bash research/records/2026-12-06-eighth-budget/run.sh 21,23,25,27,29
# Each process runs its seeds' real-q runs first, then their dyna-fq8-recall runs.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
bash research/records/attentive-model.sh
seeds="${1:-20,21,22,23,24,25,26,27,28,29}"
IFS=, read -ra list <<<"$seeds"
out=research/records/2026-12-06-eighth-budget/ablation
mkdir -p "$out"
[ -d "$out/base-s0" ] || cp -r research/records/2026-12-05-powered-budget/ablation/base-s0 "$out/base-s0"
ablation() {
  CPU_FAST_ATTENTION=1 node --import tsx research/scripts/ablation.ts --world mini --model runs/attentive --seeds 30 --steps 20 \
    --prompts 4 --k 4 --lr 0.001 --rank 8 --tasks 300 --train-tasks 200 --max-turns 12 --max-act-tokens 96 \
    --max-rehearse-tokens 641 --fidelity-tokens 641 --eval-every 0 --threads 1 \
    --out "$out" --no-write "$@"
}
for configs in real-q dyna-fq8-recall; do
  for s in "${list[@]}"; do ablation --configs "$configs" --only-seeds "$s" "${@:2}"; done
done
