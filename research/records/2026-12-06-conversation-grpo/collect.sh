#!/usr/bin/env bash
# Keeps what the record needs of a finished run folder: run.json, the JSONL logs but the rollouts (tens of MB),
# the train CLI's log and the end's Act adapter (PEFT), with the checkout's absolute path taken out.
#   bash research/records/2026-12-06-conversation-grpo/collect.sh runs/cgrpo-t1.0-s1
set -euo pipefail
run=$1 name=$(basename "$1")
dir=research/records/2026-12-06-conversation-grpo/$name
root=$(pwd)
mkdir -p "$dir/adapter"
cp "$run/run.json" "$run/eval.jsonl" "$run/metrics.jsonl" "$dir/"
[ -f "$run/train-cli.json" ] && cp "$run/train-cli.json" "$dir/"
[ -f "runs/$name.log" ] && cp "runs/$name.log" "$dir/train.log"
ck=$(node -e "console.log(JSON.parse(require('fs').readFileSync('$run/run.json','utf8')).checkpoint)")
cp "$run/$ck/adapter/"* "$dir/adapter/"
find "$dir" -type f \( -name '*.json' -o -name '*.jsonl' -o -name '*.log' \) -exec sed -i "s#$root/##g" {} +
echo "$dir: $(ls "$dir" | tr '\n' ' ')(adapter of $ck)"
