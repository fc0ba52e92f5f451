#!/usr/bin/env bash
# The pre-registered lesson seeds (PREREGISTERED.md beside this file): npm run lesson from the 8-layer policy G8,
# seeds 1-3, each into seed-S/ here (run folders' checkpoints and rollouts are git-ignored). A finished seed
# (lesson.json present) is skipped.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
here=research/records/2026-12-05-lesson-g8
for s in 1 2 3; do
  [ -s $here/seed-$s/lesson.json ] && continue
  rm -rf $here/seed-$s
  echo "seed $s: start $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
  node --import tsx src/cli/lesson.ts --seed $s --model research/records/2026-12-05-capacity/G8 --out $here/seed-$s
  echo "seed $s: end $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
done
