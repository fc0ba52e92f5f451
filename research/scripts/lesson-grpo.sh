#!/usr/bin/env bash
# The lab's default training run, in Node on the CPU fast path with the lab's own code (src/rl/run.ts GrpoRun
# through `npm run train`), once per seed: does held-out success rise within 10 minutes? The settings below
# are the lab's defaults (src/ui/settings.svelte.ts DEFAULTS: GRPO in the real environment, 4 prompts x K 4,
# LoRA rank 8, the run settings' lr (src/method/run-config.ts: no --lr unless LR is set), 100 steps,
# held-out evaluation of 100 tasks every 50 steps, the token budgets the lab measures
# for the bundled policy on the mini world: 96 Act, 641 Rehearse tokens; the previous bundled policy's tokenizer gave 570); only the seed changes (MODE=rehearse etc. override for other runs). Each run folder keeps run.json (its whole configuration
# and seed), metrics.jsonl (per step) and eval.jsonl (per held-out evaluation), and done.json its wall-clock
# (training and evaluations together). base-s0/curve.jsonl is the base policy's evaluation on the same 100
# held-out tasks (`npm run eval`), the curves' step 0 (so each run skips its own: --base-eval skip). Plot: npm run plots -- OUT_DIR --out docs/figures/lesson-curves.png
# usage: bash research/scripts/lesson-grpo.sh OUT_DIR [SEEDS...]   (default seeds 1 2 3; finished seeds are skipped;
#        MODEL=DIR runs another policy folder than the bundled one; STEPS, PROMPTS, K, LR, RANK, BASELINE, GREEDY (1: --greedy-member), EPOCHS, SAMPLING, TOP_P, REWARD, LOSS_AGG, EVAL_EVERY, EVAL_TASKS, TRAIN_TASKS, REH_TOKENS, THREADS
#        override the defaults for other runs)
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:?usage: lesson-grpo.sh OUT_DIR [SEEDS...]}
shift || true
seeds=${*:-1 2 3}
mkdir -p "$out/base-s0"
if [ ! -f "$out/base-s0/curve.jsonl" ]; then
  node --import tsx src/cli/eval.ts --world mini --tasks test --count "${EVAL_TASKS:-100}" ${MODEL:+--model "$MODEL"} > "$out/base-s0/eval.json" 2> "$out/base-s0/eval.log"
  node -e 'const r=JSON.parse(require("fs").readFileSync(process.argv[1],"utf8"));process.stdout.write(JSON.stringify({step:0,tasks:r.tasks,success:r.success,meanReward:r.meanReward,fidelity:r.fidelity,s:r.wallS})+"\n")' "$out/base-s0/eval.json" > "$out/base-s0/curve.jsonl"
fi
for s in $seeds; do
  d="$out/${MODE:-real}-s$s"
  if [ -f "$d/done.json" ]; then echo "seed $s: done already" >&2; continue; fi
  rm -rf "$d"
  t0=$(date +%s)
  node --import tsx src/cli/train.ts --world mini --mode "${MODE:-real}" --steps "${STEPS:-100}" --seed "$s" ${MODEL:+--model "$MODEL"} \
    --k "${K:-4}" --prompts "${PROMPTS:-4}" ${LR:+--lr "$LR"} --rank "${RANK:-8}" ${BASELINE:+--baseline "$BASELINE"} ${GREEDY:+--greedy-member} ${EPOCHS:+--epochs "$EPOCHS"} ${SAMPLING:+--task-sampling "$SAMPLING"} ${TOP_P:+--top-p "$TOP_P"} ${REWARD:+--reward "$REWARD"} ${LOSS_AGG:+--loss-agg "$LOSS_AGG"} ${THREADS:+--threads "$THREADS"} \
    --eval-every "${EVAL_EVERY:-50}" --eval-tasks "${EVAL_TASKS:-100}" --train-tasks "${TRAIN_TASKS:-200}" --base-eval skip \
    --max-act-tokens 96 --max-rehearse-tokens "${REH_TOKENS:-641}" --fidelity-tokens "${REH_TOKENS:-641}" \
    --out "$d" > "$d.json" 2> "$d.log"
  t1=$(date +%s)
  echo "{\"seed\": $s, \"wallS\": $((t1 - t0))}" > "$d/done.json"
  echo "seed $s: $((t1 - t0)) s" >&2
done
