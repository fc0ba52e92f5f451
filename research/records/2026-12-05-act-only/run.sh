#!/usr/bin/env bash
# Act-only rehearsed training beside ¼ of the real episodes on the attentive mini policy (PREREGISTERED.md beside this
# file): base, then per seed 0-9 real-q and dyna-fq-recall; 100 held-out tasks. Finished (configuration, seed) runs
# are skipped, unfinished ones resume. Records: ablation/ beside this file (checkpoints and rollout logs git-ignored).
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
bash research/records/attentive-model.sh
run() {
  CPU_FAST_ATTENTION=1 node --import tsx research/scripts/ablation.ts --world mini --model runs/attentive --configs "$1" \
    --seeds 10 --only-seeds "$2" --steps 40 --prompts 4 --k 4 --lr 0.001 --rank 8 --tasks 100 --train-tasks 200 \
    --max-turns 12 --max-act-tokens 96 --max-rehearse-tokens 641 --fidelity-tokens 641 --eval-every 0 \
    --out research/records/2026-12-05-act-only/ablation --no-write "${@:3}"
}
run base 0 "$@"
for s in 0 1 2 3 4 5 6 7 8 9; do run real-q,dyna-fq-recall "$s" "$@"; done
