#!/usr/bin/env bash
# τ²-bench's own CLI on its retail domain, with the lab's retail policy as the agent and the lab's model user
# as the user, both served by the lab's OpenAI-compatible endpoint (issue 47, item 5; docs/tau2-harness.md).
#
#   TAU2_REPO=PATH scripts/tau2-harness.sh [--tasks N] [--max-steps N] [--out FILE] [--model DIR] [--adapter DIR]
#
# TAU2_REPO: a snapshot of github.com/sierra-research/tau2-bench, a git directory (bare or not; the commit
# TAU2_REV, default HEAD, is archived) or a source tree. Default: .cache/tau2-src if it exists.
# What it does, everything under .cache/tau2 (git-ignored):
#   1. a Python venv (TAU2_PYTHON, default python3.11 or python3; >= 3.11) with τ²'s dependencies from this
#      machine's package index, except litellm and addict, which the index lacks: the stand-ins in
#      integrations/tau2/shim (litellm/ over the official `openai` client: completion with tools and
#      completion_cost; addict.py: Dict) are put on the venv's path, with τ²'s src/ (τ² declares Python >= 3.12,
#      its code runs on 3.11; the index has wheels for 3.11 only);
#   2. τ²'s data folder (TAU2_DATA_DIR): the retail db.json and the 74 train tasks of data/tau2-retail (or
#      ../shared/data/tau2-retail), τ²'s own retail policy.md, split file and user-simulator guidelines;
#   3. the lab's endpoint, `npm run serve -- --openai --world retail --prompt lab --user-name ...`, on a free
#      loopback port: the agent and the user are the bundled retail policy (or --model/--adapter), each
#      rendered with the lab's own prompt for its role (docs/tau2-harness.md says why);
#   4. `tau2 run --domain retail --task-split-name train --num-tasks N` against it, greedy on both sides, and
#      copies τ²'s results.json to --out (default runs/tau2/results.json).
# Then `TAU2_RESULTS=FILE npx vitest run test/env/tau2-harness.test.ts` checks τ²'s reward against the lab's.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
TASKS=20
MAX_STEPS=${TAU2_MAX_STEPS:-30}
OUT=runs/tau2/results.json
MODEL_ARGS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --tasks) TASKS=$2; shift 2 ;;
    --max-steps) MAX_STEPS=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --model|--adapter) MODEL_ARGS+=("$1" "$2"); shift 2 ;;
    -h|--help) sed -n 2,24p "$0"; exit 0 ;;
    *) echo "tau2-harness: unknown argument $1" >&2; exit 2 ;;
  esac
done

CACHE=$ROOT/.cache/tau2
REPO=${TAU2_REPO:-$ROOT/.cache/tau2-src}
REV=${TAU2_REV:-HEAD}
SRC=$CACHE/src
mkdir -p "$CACHE"

# 1. τ²'s source, from the snapshot.
GITDIR=
# A git directory is the snapshot itself (bare) or holds one (.git); a plain tree inside this checkout is not.
if [ -f "$REPO/HEAD" ] || [ -e "$REPO/.git" ]; then GITDIR=$(git -C "$REPO" rev-parse --absolute-git-dir 2>/dev/null || true); fi
if [ -d "$REPO/src/tau2" ] && [ -z "$GITDIR" ]; then
  SRC=$REPO
elif [ -n "$GITDIR" ] && git --git-dir="$GITDIR" rev-parse --verify -q "$REV^{commit}" >/dev/null; then
  COMMIT=$(git --git-dir="$GITDIR" rev-parse "$REV^{commit}")
  if [ "$(cat "$SRC/.commit" 2>/dev/null)" != "$COMMIT" ]; then
    rm -rf "$SRC" && mkdir -p "$SRC"
    git --git-dir="$GITDIR" archive "$COMMIT" -- src pyproject.toml LICENSE data/tau2/user_simulator data/tau2/domains/retail/policy.md data/tau2/domains/retail/split_tasks.json | tar -x -C "$SRC"
    echo "$COMMIT" > "$SRC/.commit"
  fi
else
  echo "tau2-harness: TAU2_REPO ($REPO) is neither a git directory with $REV nor a tau2-bench source tree" >&2
  echo "  get one with: git clone https://github.com/sierra-research/tau2-bench .cache/tau2-src" >&2
  exit 2
fi
echo "tau2-harness: tau2-bench $(cat "$SRC/.commit" 2>/dev/null || echo "(source tree $SRC)")" >&2

# 2. The venv.
PY=${TAU2_PYTHON:-$(command -v python3.11 || command -v python3)}
VENV=$CACHE/venv
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
if [ ! -e "$VENV/.deps-ok" ]; then
  "$VENV/bin/pip" install -q rich "tabulate>=0.9.0" "fastapi>=0.115.11" "uvicorn>=0.34.0" "pandas>=2.2.3" "psutil>=7.0.0" \
    "loguru>=0.7.3" "docstring-parser>=0.16" "tenacity>=9.0.0" "deepdiff>=8.4.2" "PyYAML>=6.0.2" "toml>=0.10.2" \
    python-dotenv "typer>=0.12.5" "requests>=2.31.0" "numpy>=1.24.0" "httpx>=0.24.0" openai pydantic
  touch "$VENV/.deps-ok"
fi
SITE=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
printf '%s\n%s\n' "$SRC/src" "$ROOT/integrations/tau2/shim" > "$SITE/envace-tau2.pth"

# 3. τ²'s data folder.
DATA=$CACHE/data
SHARED=$ROOT/data/tau2-retail
[ -f "$SHARED/db.json" ] || SHARED=$ROOT/../shared/data/tau2-retail
RD=$DATA/tau2/domains/retail
mkdir -p "$RD" "$DATA/tau2/user_simulator"
cp "$SHARED/db.json" "$RD/db.json"
cp "$SHARED/tasks-train.json" "$RD/tasks.json"
cp "$SRC/data/tau2/domains/retail/policy.md" "$SRC/data/tau2/domains/retail/split_tasks.json" "$RD/"
cp "$SRC"/data/tau2/user_simulator/*.md "$DATA/tau2/user_simulator/"

# 4. The lab's endpoint, then τ²'s run.
SERVE_LOG=$CACHE/serve.log
node --import tsx src/cli/serve-openai.ts --port 0 --world retail --prompt lab --name envace-retail --user-name envace-retail-user \
  --max-tokens "${TAU2_ACT_TOKENS:-256}" --threads 1 ${MODEL_ARGS[@]+"${MODEL_ARGS[@]}"} > "$CACHE/serve.json" 2> "$SERVE_LOG" &
SERVER=$!
trap 'kill "$SERVER" 2>/dev/null || true' EXIT
for _ in $(seq 1 600); do
  [ -s "$CACHE/serve.json" ] && break
  kill -0 "$SERVER" 2>/dev/null || { echo "tau2-harness: the endpoint did not start:" >&2; cat "$SERVE_LOG" >&2; exit 1; }
  sleep 0.5
done
URL=$("$VENV/bin/python" -c 'import json,sys; print(json.load(open(sys.argv[1]))["url"])' "$CACHE/serve.json")
echo "tau2-harness: endpoint $URL" >&2

NAME=envace-$(date -u +%Y%m%dT%H%M%SZ)
ARGS="{\"api_base\": \"$URL\", \"temperature\": 0.0, \"seed\": 0}"
TAU2_DATA_DIR=$DATA OPENAI_API_KEY=none "$VENV/bin/python" -m tau2.cli run --domain retail --task-split-name train --num-tasks "$TASKS" \
  --agent llm_agent --agent-llm openai/envace-retail --agent-llm-args "$ARGS" \
  --user user_simulator --user-llm openai/envace-retail-user --user-llm-args "$ARGS" \
  --num-trials 1 --max-steps "$MAX_STEPS" --max-concurrency 1 --seed 300 --save-to "$NAME"
mkdir -p "$(dirname "$OUT")"
cp "$DATA/simulations/$NAME/results.json" "$OUT"
# τ²'s own database and facts verdicts of each conversation, its termination gate aside (the test compares them too).
TAU2_DATA_DIR=$DATA "$VENV/bin/python" integrations/tau2/components.py "$OUT" "$(dirname "$OUT")/components.json"
echo "tau2-harness: results in $OUT, τ²'s components beside it" >&2
