#!/usr/bin/env bash
# The pre-registered lesson seeds (PREREGISTERED.md beside this file): npm run lesson at its defaults (the two runs side
# by side, fidelity on 50 of the 100 held-out tasks), seeds 10-12, on an otherwise idle machine
# (research/scripts/lesson-seeds.sh: each into seed-S/ here; a finished seed is skipped).
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
bash research/scripts/lesson-seeds.sh research/records/2026-12-06-lesson-side-by-side 10,11,12
