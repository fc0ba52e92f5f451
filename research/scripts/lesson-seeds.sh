#!/usr/bin/env bash
# usage: bash research/scripts/lesson-seeds.sh RECORD_DIR SEEDS [npm run lesson flags...]
# Pre-registered lesson seeds, one after the other: `npm run lesson` for each seed of the comma-separated SEEDS into
# RECORD_DIR/seed-S/ (run folders' checkpoints and rollout logs are git-ignored), with the load average at each start
# and end. A finished seed (lesson.json present) is skipped; an unfinished one starts again from the base policy.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
here="${1:?RECORD_DIR}"
IFS=, read -ra seeds <<<"${2:?SEEDS}"
for s in "${seeds[@]}"; do
  [ -s "$here/seed-$s/lesson.json" ] && continue
  rm -rf "$here/seed-$s"
  echo "seed $s: start $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
  node --import tsx src/cli/lesson.ts --seed "$s" "${@:3}" --out "$here/seed-$s"
  echo "seed $s: end $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
done
