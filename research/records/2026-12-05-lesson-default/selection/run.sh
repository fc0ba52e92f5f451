#!/usr/bin/env bash
# Choosing the bundled mini policy (README.md beside this folder): each candidate's held-out success on validation
# tasks (test split, task seed 2; the lesson and the records use task seed 1), greedy, no fidelity measurement, written
# as <name>.json here. The candidates: fidelity stages D and E (research/records/fid-chain.sh rebuilds them in
# runs/fid-chain/ with their snapshots when a stage is trained; these records were measured on the first build,
# runs/fid-mini-E, whose final weights have the same sha256) and a stage F from E with more Act rows (its command and record:
# F-pretrain.json; `npm run pretrain -- <that command> --out runs/fid-F/F1`).
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
here=research/records/2026-12-05-lesson-default/selection
for pair in E-600=runs/fid-chain/E E-400=runs/fid-chain/E/snapshots/step-400 E-200=runs/fid-chain/E/snapshots/step-200 \
            F-600=runs/fid-F/F1 F-400=runs/fid-F/F1/snapshots/step-400 F-200=runs/fid-F/F1/snapshots/step-200 D=runs/fid-chain/D; do
  name=${pair%%=*}; dir=${pair#*=}
  node --import tsx src/cli/eval.ts --world mini --tasks test --task-seed 2 --count 100 --model "$dir" --fidelity-tokens 0 --threads 1 > $here/$name.json
done
