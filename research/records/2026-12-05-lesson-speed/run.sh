#!/usr/bin/env bash
# The pre-registered lesson seeds (PREREGISTERED.md beside this file): npm run lesson at its defaults, seeds 4-6, each
# into seed-S/ here (run folders' checkpoints and rollout logs are git-ignored), on an otherwise idle machine. A
# finished seed (lesson.json present) is skipped; an unfinished one starts again.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
here=research/records/2026-12-05-lesson-speed
for s in 4 5 6; do
  [ -s $here/seed-$s/lesson.json ] && continue
  rm -rf $here/seed-$s
  echo "seed $s: start $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
  node --import tsx src/cli/lesson.ts --seed $s --out $here/seed-$s
  echo "seed $s: end $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
done
