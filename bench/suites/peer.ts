// peer suite: our full-parameter training step against PyTorch's on the same CPU, per thread (issue 51's bar:
// training the bundled model on one 2,048-token row at >= 1.0x PyTorch per thread).
//
// Both sides load the bundled policy (models/default: config.json + model.safetensors, f32) and train it on the
// same row of 2,048 random token ids: next-token cross-entropy, backward, global grad-norm clip at 1, AdamW (lr
// 1e-5, no weight decay). PyTorch runs eagerly in a child process (bench/peer/torch_step.py: its own attention,
// RMSNorm and fused AdamW CPU kernels; MKL/oneDNN matrix products) on the same thread count, serving one step per
// request, so its steps and ours alternate step by step (the order rotating round by round) and see the same load.
// Ours: cpu-fast as it is by default (strict build), and the relaxed build (fused multiply-adds, kernels/simd.ts)
// where the engine has relaxed SIMD. The first step's loss of each side is recorded: the same weights and tokens
// must give the same loss (a check that both do the same work).
//
// PyTorch comes from a virtual environment the suite creates under runs/peer/venv (git-ignored) on first use:
// `python3 -m venv` and `pip install torch` from this machine's own package index (BENCH_PEER_PIP_ARGS overrides
// the index arguments; BENCH_PEER_PYTHON names another interpreter that has torch). A machine without Python or
// torch skips the suite with a logged reason.
import { spawn, spawnSync, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { createCpuFastBackend, relaxedSimdAvailable, type CpuFastBackend } from '../../src/engine/cpu/fast/backend';
import { paramCount } from '../../src/model/config';
import { DirSource } from '../../src/model/source-node';
import { loadQwen3 } from '../../src/model/weights';
import { packBatch } from '../../src/train/batch';
import { Trainer } from '../../src/train/trainer';
import { Rng } from '../../src/util/rng';
import { median, type BenchContext, type BenchSuite } from '../lib';

const ROOT = join(import.meta.dirname ?? new URL('.', import.meta.url).pathname, '../..');
const MODEL_DIR = join(ROOT, 'models/default');
const VENV = join(ROOT, 'runs/peer/venv');
const SCRIPT = join(ROOT, 'bench/peer/torch_step.py');

/** The pip arguments that pick this machine's local index (where it has one), else pip's own configuration. */
function pipIndexArgs(): string[] {
  if (process.env.BENCH_PEER_PIP_ARGS) return process.env.BENCH_PEER_PIP_ARGS.split(/\s+/).filter(Boolean);
  if (!existsSync('/opt/pypi/simple')) return [];
  return ['--index-url', 'file:///opt/pypi/simple', ...(existsSync('/opt/pypi-more/simple') ? ['--extra-index-url', 'file:///opt/pypi-more/simple'] : []), ...(existsSync('/opt/wheels') ? ['--find-links', '/opt/wheels'] : [])];
}

/** A Python interpreter with torch, making the venv on first use; null (reason logged) without one. */
function torchPython(ctx: BenchContext): string | null {
  const has = (py: string) => spawnSync(py, ['-c', 'import torch'], { encoding: 'utf8' }).status === 0;
  if (process.env.BENCH_PEER_PYTHON) return has(process.env.BENCH_PEER_PYTHON) ? process.env.BENCH_PEER_PYTHON : (ctx.log(`BENCH_PEER_PYTHON=${process.env.BENCH_PEER_PYTHON} has no torch`), null);
  const py = join(VENV, 'bin/python');
  if (existsSync(py) && has(py)) return py;
  ctx.log(`creating ${VENV} and installing torch (pip ${pipIndexArgs().join(' ')})`);
  mkdirSync(join(ROOT, 'runs/peer'), { recursive: true });
  const mk = spawnSync('python3', ['-m', 'venv', VENV], { encoding: 'utf8' });
  if (mk.status !== 0) return ctx.log(`peer skipped: python3 -m venv failed: ${(mk.stderr ?? mk.error?.message ?? '').trim().split('\n').pop()}`), null;
  const pip = spawnSync(join(VENV, 'bin/pip'), ['install', '--no-input', ...pipIndexArgs(), 'torch'], { encoding: 'utf8', timeout: 1_800_000 });
  if (pip.status !== 0 || !has(py)) return ctx.log(`peer skipped: pip install torch failed: ${(pip.stderr ?? '').trim().split('\n').slice(-2).join(' | ')}`), null;
  return py;
}

/**
 * PyTorch held to 128-bit SIMD, the width of wasm's: ATen's own kernels (attention, norms, AdamW) at their
 * baseline build (SSE), MKL's matrix products on its SSE2 code path (CNR mode COMPATIBLE: on this AMD host MKL
 * ignores the finer MKL_ENABLE_INSTRUCTIONS / CBWR=SSE4_2 caps), oneDNN at SSE4.1. Beside PyTorch as it runs by
 * default, it says how much of the gap between the two engines is the width of the vector units.
 */
const TORCH_128: Record<string, string> = { ATEN_CPU_CAPABILITY: 'default', MKL_CBWR: 'COMPATIBLE', ONEDNN_MAX_CPU_ISA: 'SSE41' };

/** The PyTorch side: a child process serving steps. */
class TorchPeer {
  private lines: AsyncIterableIterator<string>;
  private constructor(private readonly child: ChildProcessWithoutNullStreams) {
    this.lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  }
  info: Record<string, unknown> = {};

  static async start(py: string, threads: number, tokensPath: string, isaEnv: Record<string, string> = {}): Promise<TorchPeer> {
    const env = { ...process.env, OMP_NUM_THREADS: String(threads), MKL_NUM_THREADS: String(threads), ...isaEnv };
    const child = spawn(py, [SCRIPT, MODEL_DIR, String(threads), tokensPath], { env });
    let err = '';
    child.stderr.on('data', (d) => (err += String(d)));
    const p = new TorchPeer(child);
    const first = await p.next();
    if (!first || !('ready' in first)) throw new Error(`torch peer did not start: ${err.trim().split('\n').slice(-3).join(' | ')}`);
    p.info = first.ready as Record<string, unknown>;
    return p;
  }

  private async next(): Promise<Record<string, unknown> | null> {
    for (;;) {
      const r = await this.lines.next();
      if (r.done) return null;
      if (r.value.startsWith('{')) return JSON.parse(r.value) as Record<string, unknown>;
    }
  }

  async step(): Promise<{ s: number; loss: number }> {
    this.child.stdin.write('step\n');
    const r = await this.next();
    if (!r) throw new Error('torch peer exited');
    return r as { s: number; loss: number };
  }

  close(): void {
    this.child.stdin.end('quit\n');
  }
}


const suite: BenchSuite = {
  name: 'peer',
  async run(ctx) {
    const py = torchPython(ctx);
    if (!py) return;
    const len = ctx.quick ? 512 : 2048;
    const rng = new Rng(5);
    const config = JSON.parse(readFileSync(join(MODEL_DIR, 'config.json'), 'utf8')) as { vocab_size: number; num_attention_heads: number; head_dim: number; num_hidden_layers: number };
    const tokens = Array.from({ length: len }, () => rng.int(config.vocab_size));
    mkdirSync(join(ROOT, 'runs/peer'), { recursive: true });
    const tokensPath = join(ROOT, 'runs/peer/tokens.json');
    writeFileSync(tokensPath, JSON.stringify(tokens));
    const batch = packBatch([{ tokens, mask: tokens.map(() => 1) }], 'seq-mean-token-mean');
    const relaxed = await relaxedSimdAvailable();
    if (!relaxed) ctx.log('relaxed SIMD not available here: the strict build only');
    const model = 'bundled (models/default, f32)';
    const shape = `1x${len} tokens`;
    const name = `train step, full, 1x${len}`;
    for (const threads of [1, 2]) {
      const peer = await TorchPeer.start(py, threads, tokensPath);
      ctx.log(`${threads}t torch: ${JSON.stringify(peer.info)}`);
      const narrow = await TorchPeer.start(py, threads, tokensPath, TORCH_128);
      ctx.log(`${threads}t torch, 128-bit SIMD (${Object.entries(TORCH_128).map(([k, v]) => `${k}=${v}`).join(' ')}): ${JSON.stringify(narrow.info)}`);
      const peers = [{ p: peer, label: '' }, { p: narrow, label: ' 128-bit' }];
      const ours: { b: CpuFastBackend; tr: Trainer; free: () => void; name: string }[] = [];
      try {
        for (const simd of relaxed ? (['strict', 'relaxed'] as const) : (['strict'] as const)) {
          const b = await createCpuFastBackend({ threads, simd });
          const { model: m } = await loadQwen3(new DirSource(MODEL_DIR), b, { format: 'f32' });
          const tr = new Trainer(m, { mode: 'full', recompute: false, weightDecay: 0, maxGradNorm: 1, schedule: { kind: 'constant', lr: 1e-5 }, loss: { kind: 'ce' } });
          ours.push({ b, tr, name: `cpu-fast ${simd}`, free: () => (tr.free(), m.free(), b.dispose()) });
          if (paramCount(m.config) !== peer.info.params) ctx.log(`WARNING: parameter counts differ: ours ${paramCount(m.config)}, torch ${String(peer.info.params)}`);
        }
        // variants 0 and 1 are PyTorch (as it runs, then held to 128-bit SIMD), then ours
        const runs: (() => Promise<{ s: number; loss: number }>)[] = [
          () => peer.step(),
          () => narrow.step(),
          ...ours.map((o) => async () => {
            const t0 = performance.now();
            const r = await o.tr.trainStep([batch]);
            if (!r.applied) throw new Error(`bench step refused: ${r.refused}`);
            return { s: (performance.now() - t0) / 1000, loss: r.loss };
          }),
        ];
        const first: { s: number; loss: number }[] = [];
        for (const run of runs) first.push(await run()); // warm-up, and the first step's loss on the same weights
        const O = peers.length; // ours start here
        ctx.log(`${threads}t first-step loss: torch ${first[0].loss.toFixed(6)}, torch 128-bit ${first[1].loss.toFixed(6)}, ${ours.map((o, i) => `${o.name} ${first[i + O].loss.toFixed(6)}`).join(', ')}`);
        const times: number[][] = runs.map(() => []);
        const probes: number[] = []; // the wasm multiply-add peak, probed at the end of every round
        const rounds = ctx.quick ? 2 : 7;
        for (let k = 0; k < rounds; k++) {
          for (let j = 0; j < runs.length; j++) {
            const i = (j + k) % runs.length;
            times[i].push((await runs[i]()).s);
          }
          probes.push(ctx.probe('fma'));
        }
        const keys = (len * (len + 1)) / 2;
        const flops = 6 * Number(peer.info.params) * len + 14 * keys * config.num_attention_heads * config.head_dim * config.num_hidden_layers;
        // Both against the wasm multiply-add peak, each step against its round's probe: ours as the fraction of it
        // our step uses; PyTorch's (its vector units are up to 4x wider: AVX-512 here) as the fraction ours would
        // need, the same flops in the same time, to run level with it.
        const rec = (i: number, backend: 'cpu-fast' | 'pytorch', label: string) => {
          const s = median(times[i]);
          const bound = { kind: 'fma' as const, use: flops / s / 1e9, best: flops / Math.min(...times[i]) / 1e9, paired: { use: times[i].map((t) => flops / t / 1e9), limit: probes } };
          ctx.record({ case: `${name}, ${label}`, backend, metric: 'train_tok_s', value: len / s, unit: 'tok/s', threads, shape, model, bound });
          ctx.record({ case: `${name}, ${label}`, backend, metric: 'loss_first_step', value: first[i].loss, unit: 'nats', threads, shape, model });
        };
        peers.forEach(({ label }, j) => rec(j, 'pytorch', `pytorch ${String(peer.info.torch)} eager${label ? `,${label} SIMD` : ''}`));
        ours.forEach((o, i) => rec(i + O, 'cpu-fast', o.name));
        for (const [j, { label }] of peers.entries())
          ours.forEach((o, i) =>
            ctx.record({ case: `${name}, ${o.name} / pytorch${label}`, backend: 'cpu-fast', metric: 'speedup', value: median(times[j].map((t, k) => t / times[i + O][k])), unit: 'x', threads, shape, model }),
          );
        ctx.log(`${threads}t ${name}: torch ${median(times[0]).toFixed(3)} s, torch 128-bit ${median(times[1]).toFixed(3)} s, ${ours.map((o, i) => `${o.name} ${median(times[i + O]).toFixed(3)} s`).join(', ')} a step (median of ${rounds} rotating rounds)`);
      } finally {
        peer.close();
        narrow.close();
        for (const o of ours) o.free();
      }
    }
  },
};

export default suite;
