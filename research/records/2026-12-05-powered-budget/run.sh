#!/usr/bin/env bash
# The powered replication of act-only-8 (PREREGISTERED.md beside this file): dyna-fq8-recall against real-q on the
# attentive mini policy, fresh training seeds 10-19, 300 held-out tasks, with the base. Finished runs are skipped,
# unfinished ones resume from their last checkpoint. Two processes may share the seeds, e.g.
#   bash research/records/2026-12-05-powered-budget/run.sh 10,12,14,16,18 & bash research/records/2026-12-05-powered-budget/run.sh 11,13,15,17,19
# Each process runs its seeds' real-q runs first, then their dyna-fq8-recall runs; the base policy is evaluated once,
# by the process whose first seed is 10 (ablation.ts evaluates the base only under seed 0: greedy evaluation reads no
# seed; until 2026-12-06 this script asked for it under seeds 10-19, where it never ran).
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
bash research/records/attentive-model.sh
seeds="${1:-10,11,12,13,14,15,16,17,18,19}"
IFS=, read -ra list <<<"$seeds"
ablation() {
  CPU_FAST_ATTENTION=1 node --import tsx research/scripts/ablation.ts --world mini --model runs/attentive --seeds 20 --steps 40 \
    --prompts 4 --k 4 --lr 0.001 --rank 8 --tasks 300 --train-tasks 200 --max-turns 12 --max-act-tokens 96 \
    --max-rehearse-tokens 641 --fidelity-tokens 641 --eval-every 0 --threads 1 \
    --out research/records/2026-12-05-powered-budget/ablation --no-write "$@"
}
[ "${list[0]}" = 10 ] && ablation --configs base --only-seeds 0 "${@:2}"
for configs in real-q dyna-fq8-recall; do
  for s in "${list[@]}"; do ablation --configs "$configs" --only-seeds "$s" "${@:2}"; done
done
