#!/usr/bin/env bash
# The pre-registered lesson seeds (PREREGISTERED.md beside this file): npm run lesson at its defaults, seeds 7-9, on an
# otherwise idle machine (research/scripts/lesson-seeds.sh: each into seed-S/ here; a finished seed is skipped).
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
bash research/scripts/lesson-seeds.sh research/records/2026-12-05-lesson-lr 7,8,9
