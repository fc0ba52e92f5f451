// @ts-nocheck -- AssemblyScript (compiled by scripts/build-wasm.ts), not part of the TypeScript program.
//
// Row-wise and elementwise forward ops: once the matmuls are fast these are what a small model's
// prefill spends its time on. Threads claim chunks of rows (rmsnorm) or of elements (./sched.ts).
import { chunkCount, chunkStart, claim } from './sched';
import { vexp } from './simd';

// args: 0 x, 1 w, 2 out, 3 R, 4 C, 5 eps (f32 bits). out[r] = x[r] / sqrt(mean(x[r]^2) + eps) * w
export function rmsnorm(args: usize, tid: i32, nth: i32): void {
  const X = <usize>load<u32>(args);
  const W = <usize>load<u32>(args, 4);
  const O = <usize>load<u32>(args, 8);
  const R = load<i32>(args, 12);
  const C = load<i32>(args, 16);
  const eps = load<f32>(args, 20);
  const rowBytes = <usize>C << 2;
  const chunks = chunkCount(R, nth);
  for (let ch = claim(args); ch < chunks; ch = claim(args))
  for (let r = chunkStart(R, ch, chunks), r1 = chunkStart(R, ch + 1, chunks); r < r1; r++) {
    const x = X + <usize>r * rowBytes;
    const o = O + <usize>r * rowBytes;
    // f64 sum of squares, like the reference: rows can be long (hidden sizes in the thousands).
    let s0 = f64x2.splat(0), s1 = f64x2.splat(0);
    let c = 0;
    for (; c + 4 <= C; c += 4) {
      const v = v128.load(x + (<usize>c << 2));
      const lo = f64x2.promote_low_f32x4(v);
      const hi = f64x2.promote_low_f32x4(i32x4.shuffle(v, v, 2, 3, 0, 1));
      s0 = f64x2.add(s0, f64x2.mul(lo, lo));
      s1 = f64x2.add(s1, f64x2.mul(hi, hi));
    }
    const s = f64x2.add(s0, s1);
    let ss = f64x2.extract_lane(s, 0) + f64x2.extract_lane(s, 1);
    for (; c < C; c++) {
      const v = <f64>load<f32>(x + (<usize>c << 2));
      ss += v * v;
    }
    const inv = <f32>(1 / Math.sqrt(ss / <f64>C + <f64>eps));
    const iv = f32x4.splat(inv);
    c = 0;
    for (; c + 4 <= C; c += 4) {
      const off = <usize>c << 2;
      v128.store(o + off, f32x4.mul(f32x4.mul(v128.load(x + off), iv), v128.load(W + off)));
    }
    for (; c < C; c++) {
      const off = <usize>c << 2;
      store<f32>(o + off, load<f32>(x + off) * inv * load<f32>(W + off));
    }
  }
}

// args: 0 gate, 1 up, 2 out, 3 n. out = silu(gate) * up
export function swiglu(args: usize, tid: i32, nth: i32): void {
  const G = <usize>load<u32>(args);
  const U = <usize>load<u32>(args, 4);
  const O = <usize>load<u32>(args, 8);
  const n = load<i32>(args, 12);
  const blocks = (n + 15) >> 4;
  const chunks = chunkCount(blocks, nth);
  for (let ch = claim(args); ch < chunks; ch = claim(args)) {
    const end = min(n, chunkStart(blocks, ch + 1, chunks) << 4);
    let i = chunkStart(blocks, ch, chunks) << 4;
    for (; i + 4 <= end; i += 4) {
      const off = <usize>i << 2;
      const g = v128.load(G + off);
      v128.store(O + off, f32x4.mul(f32x4.div(g, f32x4.add(f32x4.splat(1), vexp(f32x4.neg(g)))), v128.load(U + off)));
    }
    for (; i < end; i++) {
      const off = <usize>i << 2;
      const g = load<f32>(G + off);
      store<f32>(O + off, (g / (1 + Mathf.exp(-g))) * load<f32>(U + off));
    }
  }
}

// args: 0 a, 1 b, 2 out, 3 n, 4 s (f32 bits), 5 op (0: a + b, 1: a * s)
export function axpb(args: usize, tid: i32, nth: i32): void {
  const A = <usize>load<u32>(args);
  const B = <usize>load<u32>(args, 4);
  const O = <usize>load<u32>(args, 8);
  const n = load<i32>(args, 12);
  const s = load<f32>(args, 16);
  const op = load<i32>(args, 20);
  const blocks = (n + 15) >> 4;
  const chunks = chunkCount(blocks, nth);
  for (let ch = claim(args); ch < chunks; ch = claim(args)) {
    const end = min(n, chunkStart(blocks, ch + 1, chunks) << 4);
    axpbRange(A, B, O, chunkStart(blocks, ch, chunks) << 4, end, s, op);
  }
}

@inline
function axpbRange(A: usize, B: usize, O: usize, i: i32, end: i32, s: f32, op: i32): void {
  if (op == 0) {
    for (; i + 4 <= end; i += 4) {
      const off = <usize>i << 2;
      v128.store(O + off, f32x4.add(v128.load(A + off), v128.load(B + off)));
    }
    for (; i < end; i++) {
      const off = <usize>i << 2;
      store<f32>(O + off, load<f32>(A + off) + load<f32>(B + off));
    }
  } else {
    const sv = f32x4.splat(s);
    for (; i + 4 <= end; i += 4) {
      const off = <usize>i << 2;
      v128.store(O + off, f32x4.mul(v128.load(A + off), sv));
    }
    for (; i < end; i++) {
      const off = <usize>i << 2;
      store<f32>(O + off, load<f32>(A + off) * s);
    }
  }
}

// Backward of swiglu. args: 0 dy, 1 gate, 2 up, 3 dGate out, 4 dUp out, 5 n.
// sig = sigmoid(g): dUp = dy * g * sig, dGate = dy * up * sig * (1 + g * (1 - sig))
export function swigluBackward(args: usize, tid: i32, nth: i32): void {
  const DY = <usize>load<u32>(args);
  const G = <usize>load<u32>(args, 4);
  const U = <usize>load<u32>(args, 8);
  const DG = <usize>load<u32>(args, 12);
  const DU = <usize>load<u32>(args, 16);
  const n = load<i32>(args, 20);
  const blocks = (n + 15) >> 4;
  const chunks = chunkCount(blocks, nth);
  for (let ch = claim(args); ch < chunks; ch = claim(args)) {
    const end = min(n, chunkStart(blocks, ch + 1, chunks) << 4);
    let i = chunkStart(blocks, ch, chunks) << 4;
    const one = f32x4.splat(1);
    for (; i + 4 <= end; i += 4) {
      const off = <usize>i << 2;
      const g = v128.load(G + off);
      const dy = v128.load(DY + off);
      const sig = f32x4.div(one, f32x4.add(one, vexp(f32x4.neg(g))));
      v128.store(DU + off, f32x4.mul(f32x4.mul(dy, g), sig));
      v128.store(DG + off, f32x4.mul(f32x4.mul(f32x4.mul(dy, v128.load(U + off)), sig), f32x4.add(one, f32x4.mul(g, f32x4.sub(one, sig)))));
    }
    for (; i < end; i++) {
      const off = <usize>i << 2;
      const g = load<f32>(G + off);
      const dy = load<f32>(DY + off);
      const sig: f32 = 1 / (1 + Mathf.exp(-g));
      store<f32>(DU + off, dy * g * sig);
      store<f32>(DG + off, dy * load<f32>(U + off) * sig * (1 + g * (1 - sig)));
    }
  }
}

// One AdamW step in place. args: 0 param, 1 grad, 2 m, 3 v, 4 n, 5..10 f32 bits of lr, beta1, beta2,
// eps, decay (1 - lr * weightDecay), gradScale, 11..12 f32 bits of the bias corrections bc1, bc2.
export function adamw(args: usize, tid: i32, nth: i32): void {
  const P = <usize>load<u32>(args);
  const Gr = <usize>load<u32>(args, 4);
  const Mm = <usize>load<u32>(args, 8);
  const Vv = <usize>load<u32>(args, 12);
  const n = load<i32>(args, 16);
  const lr = load<f32>(args, 20), b1 = load<f32>(args, 24), b2 = load<f32>(args, 28), eps = load<f32>(args, 32);
  const decay = load<f32>(args, 36), gs = load<f32>(args, 40), bc1 = load<f32>(args, 44), bc2 = load<f32>(args, 48);
  const vlr = f32x4.splat(lr), vb1 = f32x4.splat(b1), vb2 = f32x4.splat(b2), veps = f32x4.splat(eps);
  const v1b1 = f32x4.splat(1 - b1), v1b2 = f32x4.splat(1 - b2), vdec = f32x4.splat(decay), vgs = f32x4.splat(gs);
  const vbc1 = f32x4.splat(bc1), vbc2 = f32x4.splat(bc2);
  const blocks = (n + 15) >> 4;
  const chunks = chunkCount(blocks, nth);
  for (let ch = claim(args); ch < chunks; ch = claim(args)) {
    const end = min(n, chunkStart(blocks, ch + 1, chunks) << 4);
    let i = chunkStart(blocks, ch, chunks) << 4;
    for (; i + 4 <= end; i += 4) {
      const o = <usize>i << 2;
      const g = f32x4.mul(v128.load(Gr + o), vgs);
      const m = f32x4.add(f32x4.mul(vb1, v128.load(Mm + o)), f32x4.mul(v1b1, g));
      const v = f32x4.add(f32x4.mul(vb2, v128.load(Vv + o)), f32x4.mul(v1b2, f32x4.mul(g, g)));
      v128.store(Mm + o, m);
      v128.store(Vv + o, v);
      const step = f32x4.div(f32x4.mul(vlr, f32x4.div(m, vbc1)), f32x4.add(f32x4.sqrt(f32x4.div(v, vbc2)), veps));
      v128.store(P + o, f32x4.sub(f32x4.mul(v128.load(P + o), vdec), step));
    }
    for (; i < end; i++) {
      const o = <usize>i << 2;
      const g = load<f32>(Gr + o) * gs;
      const m = b1 * load<f32>(Mm + o) + (1 - b1) * g;
      const v = b2 * load<f32>(Vv + o) + (1 - b2) * g * g;
      store<f32>(Mm + o, m);
      store<f32>(Vv + o, v);
      store<f32>(P + o, load<f32>(P + o) * decay - (lr * (m / bc1)) / (Mathf.sqrt(v / bc2) + eps));
    }
  }
}

// Backward of rmsnorm. args: 0 dy, 1 x, 2 w, 3 dx out, 4 R, 5 C, 6 eps (f32 bits), 7 dw partials
// (nth x C f64, zeroed by the caller; thread tid adds sum_r dy*x*inv of its rows into row tid).
// Per row: inv = 1/sqrt(mean(x^2)+eps), k = inv^3 * sum_c(w dy x) / C, dx = inv w dy - k x.
export function rmsnormBackward(args: usize, tid: i32, nth: i32): void {
  const DY = <usize>load<u32>(args);
  const X = <usize>load<u32>(args, 4);
  const W = <usize>load<u32>(args, 8);
  const DX = <usize>load<u32>(args, 12);
  const R = load<i32>(args, 16);
  const C = load<i32>(args, 20);
  const eps = load<f32>(args, 24);
  const dw = <usize>load<u32>(args, 28) + <usize>tid * (<usize>C << 3);
  const rowBytes = <usize>C << 2;
  const chunks = chunkCount(R, nth);
  for (let ch = claim(args); ch < chunks; ch = claim(args)) {
    const r1 = chunkStart(R, ch + 1, chunks);
    for (let r = chunkStart(R, ch, chunks); r < r1; r++) {
      const x = X + <usize>r * rowBytes;
      const g = DY + <usize>r * rowBytes;
      const o = DX + <usize>r * rowBytes;
      // two values a step in f64x2 lanes (the scalar loop's f64 arithmetic, summed in two interleaved halves)
      let vss = f64x2.splat(0), vdot = f64x2.splat(0);
      const C2 = C & ~1;
      for (let c = 0; c < C2; c += 2) {
        const off = <usize>c << 2;
        const xv = f64x2.promote_low_f32x4(v128.load64_zero(x + off));
        vss = f64x2.add(vss, f64x2.mul(xv, xv));
        vdot = f64x2.add(vdot, f64x2.mul(f64x2.mul(f64x2.promote_low_f32x4(v128.load64_zero(W + off)), f64x2.promote_low_f32x4(v128.load64_zero(g + off))), xv));
      }
      let ss: f64 = f64x2.extract_lane(vss, 0) + f64x2.extract_lane(vss, 1);
      let dot: f64 = f64x2.extract_lane(vdot, 0) + f64x2.extract_lane(vdot, 1);
      for (let c = C2; c < C; c++) {
        const off = <usize>c << 2;
        const xv = <f64>load<f32>(x + off);
        ss += xv * xv;
        dot += <f64>load<f32>(W + off) * <f64>load<f32>(g + off) * xv;
      }
      const inv = 1 / Math.sqrt(ss / <f64>C + <f64>eps);
      const k = (inv * inv * inv * dot) / <f64>C;
      const vinv = f64x2.splat(inv), vk = f64x2.splat(k);
      for (let c = 0; c < C2; c += 2) {
        const off = <usize>c << 2;
        const xv = f64x2.promote_low_f32x4(v128.load64_zero(x + off));
        const gv = f64x2.promote_low_f32x4(v128.load64_zero(g + off));
        const o2 = f32x4.demote_f64x2_zero(f64x2.sub(f64x2.mul(f64x2.mul(vinv, f64x2.promote_low_f32x4(v128.load64_zero(W + off))), gv), f64x2.mul(vk, xv)));
        v128.store64_lane(o + off, o2, 0);
        const d = dw + (<usize>c << 3);
        v128.store(d, f64x2.add(v128.load(d), f64x2.mul(f64x2.mul(gv, xv), vinv)));
      }
      for (let c = C2; c < C; c++) {
        const off = <usize>c << 2;
        const xv = <f64>load<f32>(x + off);
        const gv = <f64>load<f32>(g + off);
        store<f32>(o + off, <f32>(inv * <f64>load<f32>(W + off) * gv - k * xv));
        const d = dw + (<usize>c << 3);
        store<f64>(d, load<f64>(d) + gv * xv * inv);
      }
    }
  }
}
