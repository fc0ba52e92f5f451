#!/usr/bin/env bash
# dyna-fq-recall with 7 rehearsed prompts per step beside the 1 real one (dyna-fq8-recall), on the attentive mini
# policy, seeds 0-9, paired with real-q (PREREGISTERED.md beside this file). The base and real-q records are copies
# of research/records/2026-12-05-act-only/ablation (real-q repeated its committed runs task for task there), so only
# dyna-fq8-recall runs. Finished runs are skipped, unfinished ones resume. Two processes share the seeds:
#   bash research/records/2026-12-05-act-only-8/run.sh 0,2,4,6,8 & bash research/records/2026-12-05-act-only-8/run.sh 1,3,5,7,9
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
bash research/records/attentive-model.sh
seeds="${1:-0,1,2,3,4,5,6,7,8,9}"
IFS=, read -ra list <<<"$seeds"
for s in "${list[@]}"; do
  CPU_FAST_ATTENTION=1 node --import tsx research/scripts/ablation.ts --world mini --model runs/attentive --configs dyna-fq8-recall \
    --seeds 10 --only-seeds "$s" --steps 40 --prompts 4 --k 4 --lr 0.001 --rank 8 --tasks 100 --train-tasks 200 \
    --max-turns 12 --max-act-tokens 96 --max-rehearse-tokens 641 --fidelity-tokens 641 --eval-every 0 --threads 1 \
    --out research/records/2026-12-05-act-only-8/ablation --no-write "${@:2}"
done
