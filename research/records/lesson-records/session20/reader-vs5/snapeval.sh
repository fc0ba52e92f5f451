#!/usr/bin/env bash
# Session 20's pre-registered rule: the earliest snapshot of the vs5 replay (every 200 steps from 600) whose
# reader is formed (P(right) >= 0.9) and that meets the issue's base bars (held-out >= 40 %, exact >= 60 %).
set -u
cd "$(dirname "$0")/../../../../.."
out=runs/s20/vs5-snap; mkdir -p $out
for n in 600 800 1000 1200 1400 1600 1800 2000; do
  d=runs/s20/vs5/snapshots/step-$n
  while [ ! -f $d/tokenizer_config.json ]; do sleep 20; done
  sleep 15
  echo "$(date +%T) step $n: eval" >&2
  node --import tsx src/cli/eval.ts --world mini --tasks test --count 100 --model $d > $out/eval-step$n.json 2> $out/eval-step$n.log
  ok=$(node -e 'const r=JSON.parse(require("fs").readFileSync(process.argv[1],"utf8"));console.log(r.success>=0.4&&r.fidelity.exact>=0.6?1:0, r.success, r.fidelity.exact)' $out/eval-step$n.json)
  echo "$(date +%T) step $n: $ok" >&2
  [ "${ok%% *}" = 1 ] || continue
  node --import tsx scripts/reason-probe.ts --model $d --attention-tasks 0 --out $out/reason-probe-step$n.json > /dev/null 2> $out/probe-step$n.log
  p=$(node -e 'const r=JSON.parse(require("fs").readFileSync(process.argv[1],"utf8"));console.log(r.contexts["history as it is"].meanPRight)' $out/reason-probe-step$n.json)
  echo "$(date +%T) step $n: P(right) $p" >&2
  if node -e 'process.exit(Number(process.argv[1])>=0.9?0:1)' $p; then
    echo $n > $out/chosen
    mkdir -p runs/s20/reader-room-model && cp -r $d/. runs/s20/reader-room-model/
    echo "$(date +%T) chosen step $n" >&2
    exit 0
  fi
done
echo "no snapshot met the rule" >&2
