#!/usr/bin/env bash
# The conversation-stage README's four evaluations of one policy folder, one at a time, at one thread:
#   bash research/records/2026-12-05-user-identity/eval.sh TAG MODEL [s1] [s4] [onemsg] [fid]
# (no kinds named: s1, onemsg and fid). <TAG>-<kind>.json is the eval's stdout, <TAG>-<kind>-stderr.txt its
# stderr, with the checkout's absolute path taken out. EVAL_DIR names another records folder to write into; kind
# `full` is the one-message evaluation with rehearsal fidelity measured (onemsg skips it). ADAPTER names a PEFT
# adapter or a training run folder (its last checkpoint) to evaluate on MODEL; WORLD another world than mini.
set -euo pipefail
tag=$1 model=$2; shift 2
world=${WORLD:-mini}
extra=(); [ -z "${ADAPTER:-}" ] || extra=(--adapter "$ADAPTER")
kinds=("$@"); [ ${#kinds[@]} -gt 0 ] || kinds=(s1 onemsg fid)
dir=${EVAL_DIR:-research/records/2026-12-05-user-identity}
root=$(pwd)
for k in "${kinds[@]}"; do
  case $k in
    s1) args=(--world $world --user scripted --tasks test --count 100 --threads 1) ;;
    s4) args=(--world $world --user scripted --tasks test --count 100 --samples 4 --threads 1) ;;
    onemsg) args=(--world $world --tasks test --count 100 --threads 1 --fidelity-tokens 0) ;;
    full) args=(--world $world --tasks test --count 100 --threads 1) ;;
    fid) args=(--world $world --tasks test --count 100 --user model --user-fidelity --threads 1) ;;
    *) echo "unknown kind $k" >&2; exit 2 ;;
  esac
  echo "npm run eval -- ${args[*]} --model $model ${extra[*]}   # $tag-$k" >&2
  nice -n 10 npm run --silent eval -- "${args[@]}" --model "$model" "${extra[@]}" > "$dir/$tag-$k.json" 2> "$dir/$tag-$k-stderr.txt"
  sed -i "s#$root/##g" "$dir/$tag-$k.json" "$dir/$tag-$k-stderr.txt"
done
