#!/usr/bin/env bash
# The pre-registered lesson seeds (PREREGISTERED.md beside this file): npm run lesson at its defaults (the two runs
# started together, side by side, the world-rehearsal run logging real-only's base evaluation as its step 0), seeds
# 13-15, on an otherwise idle machine (research/scripts/lesson-seeds.sh: each into seed-S/ here; a finished seed is skipped).
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
bash research/scripts/lesson-seeds.sh research/records/2026-12-06-lesson-together 13,14,15
