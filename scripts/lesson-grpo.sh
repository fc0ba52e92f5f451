#!/usr/bin/env bash
# The lab's default training run, in Node on the CPU fast path with the lab's own code (src/rl/run.ts GrpoRun
# through `npm run train`), once per seed: does held-out success rise within 10 minutes? The settings below
# are the lab's defaults (src/ui/settings.svelte.ts DEFAULTS); each run's folder keeps run.json (its full
# configuration and seed), metrics.jsonl and eval.jsonl (held-out success and fidelity per evaluation).
# usage: bash scripts/lesson-grpo.sh OUT_DIR [SEEDS...]   (default seeds 1 2 3)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: lesson-grpo.sh OUT_DIR [SEEDS...]}
shift || true
seeds=${*:-1 2 3}
mkdir -p "$out"
for s in $seeds; do
  d="$out/seed-$s"
  if [ -f "$d/done.json" ]; then echo "seed $s: done already" >&2; continue; fi
  rm -rf "$d"
  t0=$(date +%s)
  node --import tsx src/cli/train.ts --world mini --mode "${MODE:-rehearse}" --steps "${STEPS:-60}" --seed "$s" \
    --k "${K:-4}" --prompts "${PROMPTS:-4}" --lr "${LR:-0.002}" --rank "${RANK:-8}" \
    --eval-every "${EVAL_EVERY:-20}" --eval-tasks "${EVAL_TASKS:-100}" --train-tasks 200 \
    --max-act-tokens "${ACT_TOKENS:-96}" --max-rehearse-tokens "${REH_TOKENS:-570}" --fidelity-tokens "${REH_TOKENS:-570}" \
    --out "$d" > "$out/seed-$s.json" 2> "$out/seed-$s.log"
  t1=$(date +%s)
  echo "{\"seed\": $s, \"wallS\": $((t1 - t0))}" > "$d/done.json"
  echo "seed $s: $((t1 - t0)) s" >&2
done
