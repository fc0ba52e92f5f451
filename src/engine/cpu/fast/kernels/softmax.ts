// @ts-nocheck -- AssemblyScript (compiled by scripts/build-wasm.ts), not part of the TypeScript program.
//
// The vocabulary-wide part of the loss heads: per row of logits, the softmax p, its log-normalizer and
// sum_i p_i x_i (for the entropy). The per-row loss rules stay in JS (../train.ts).
import { chunkCount, chunkStart, claim } from './sched';
import { vexp } from './simd';

// args: 0 x (R,V), 1 weight (R) (rows with weight 0 are skipped and get p = 0), 2 p out (R,V),
// 3 stats out (R,2) f64: [lse, sum p*x], 4 R, 5 V.
export function softmaxRows(args: usize, tid: i32, nth: i32): void {
  const X = <usize>load<u32>(args);
  const Wt = <usize>load<u32>(args, 4);
  const P = <usize>load<u32>(args, 8);
  const St = <usize>load<u32>(args, 12);
  const R = load<i32>(args, 16);
  const V = load<i32>(args, 20);
  const rowBytes = <usize>V << 2;
  const chunks = chunkCount(R, nth);
  for (let ch = claim(args); ch < chunks; ch = claim(args)) {
    const r1 = chunkStart(R, ch + 1, chunks);
    for (let r = chunkStart(R, ch, chunks); r < r1; r++) {
      const x = X + <usize>r * rowBytes;
      const p = P + <usize>r * rowBytes;
      if (load<f32>(Wt + (<usize>r << 2)) == 0) {
        memory.fill(p, 0, rowBytes);
        continue;
      }
      let mv = f32x4.splat(-Infinity);
      let i = 0;
      for (; i + 4 <= V; i += 4) mv = f32x4.max(mv, v128.load(x + (<usize>i << 2)));
      let mx = max(max(f32x4.extract_lane(mv, 0), f32x4.extract_lane(mv, 1)), max(f32x4.extract_lane(mv, 2), f32x4.extract_lane(mv, 3)));
      for (; i < V; i++) mx = max(mx, load<f32>(x + (<usize>i << 2)));
      // exp(x - max) into p, summed in f64 (a vocabulary is ~1e5 terms): 4 values a step, in two f64x2 sums
      const vmx = f32x4.splat(mx);
      let s0 = f64x2.splat(0), s1 = f64x2.splat(0);
      for (i = 0; i + 4 <= V; i += 4) {
        const e = vexp(f32x4.sub(v128.load(x + (<usize>i << 2)), vmx));
        v128.store(p + (<usize>i << 2), e);
        s0 = f64x2.add(s0, f64x2.promote_low_f32x4(e));
        s1 = f64x2.add(s1, f64x2.promote_low_f32x4(i32x4.shuffle(e, e, 2, 3, 0, 1)));
      }
      let sum: f64 = (f64x2.extract_lane(s0, 0) + f64x2.extract_lane(s0, 1)) + (f64x2.extract_lane(s1, 0) + f64x2.extract_lane(s1, 1));
      for (; i < V; i++) {
        const e = Mathf.exp(load<f32>(x + (<usize>i << 2)) - mx);
        store<f32>(p + (<usize>i << 2), e);
        sum += <f64>e;
      }
      const lse = <f64>mx + Math.log(sum);
      const inv = <f32>(1 / sum);
      const vinv = f32x4.splat(inv);
      s0 = f64x2.splat(0);
      s1 = f64x2.splat(0);
      for (i = 0; i + 4 <= V; i += 4) {
        const o = <usize>i << 2;
        const pi = f32x4.mul(v128.load(p + o), vinv);
        v128.store(p + o, pi);
        const xv = v128.load(x + o);
        s0 = f64x2.add(s0, f64x2.mul(f64x2.promote_low_f32x4(pi), f64x2.promote_low_f32x4(xv)));
        s1 = f64x2.add(s1, f64x2.mul(f64x2.promote_low_f32x4(i32x4.shuffle(pi, pi, 2, 3, 0, 1)), f64x2.promote_low_f32x4(i32x4.shuffle(xv, xv, 2, 3, 0, 1))));
      }
      let px: f64 = (f64x2.extract_lane(s0, 0) + f64x2.extract_lane(s0, 1)) + (f64x2.extract_lane(s1, 0) + f64x2.extract_lane(s1, 1));
      for (; i < V; i++) {
        const pi = load<f32>(p + (<usize>i << 2)) * inv;
        store<f32>(p + (<usize>i << 2), pi);
        px += <f64>pi * <f64>load<f32>(x + (<usize>i << 2));
      }
      store<f64>(St + (<usize>r << 4), lse);
      store<f64>(St + (<usize>r << 4), px, 8);
    }
  }
}
