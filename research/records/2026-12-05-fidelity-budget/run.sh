#!/usr/bin/env bash
# The budget question again on a policy whose rehearsals are better (PREREGISTERED.md beside this file): base,
# real-q and dyna-q-recall, then dyna-fq-recall (the amendment), then dyna-q, on the fidelity-stage mini policy; 5 seeds × 100 held-out tasks. Finished
# (configuration, seed) runs are skipped, unfinished ones resume. Records: ablation/ beside this file.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
bash research/records/fid-model.sh
run() {
  CPU_FAST_ATTENTION=1 node --import tsx research/scripts/ablation.ts --world mini --model runs/fid-mini-A --configs "$1" \
    --seeds 5 --steps 40 --prompts 4 --k 4 --lr 0.001 --rank 8 --tasks 100 --train-tasks 200 \
    --max-turns 12 --max-act-tokens 96 --max-rehearse-tokens 641 --fidelity-tokens 641 --eval-every 0 \
    --out research/records/2026-12-05-fidelity-budget/ablation --no-write "${@:2}"
}
# The decisive pair first, on all five seeds; the secondary configuration after it.
run base,real-q,dyna-q-recall "$@"
# The amendment of 11:16 UTC (PREREGISTERED.md): only Act's rows trained.
run dyna-fq-recall "$@"
run dyna-q "$@"
