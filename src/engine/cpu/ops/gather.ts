// Index-driven copies and their backward: embedding / its scatter-add, gatherRows / scatterAddRows,
// kvWrite / the gather of its cache gradient.
import type { Tensor, TokenLayout } from '../../backend';
import { assertShape } from '../../errors';
import { asCpu, CpuTensor, weightAt } from '../tensor';

// table (V,C), ids (T) -> (T,C)
export function embedding(table: Tensor, ids: Tensor): Tensor {
  const w = asCpu(table);
  const id = asCpu(ids).i32;
  const [V, C] = w.shape;
  const out = new Float32Array(id.length * C);
  for (let t = 0; t < id.length; t++) {
    assertShape(id[t] >= 0 && id[t] < V, `embedding: token id ${id[t]} outside [0,${V})`);
    for (let c = 0; c < C; c++) out[t * C + c] = weightAt(w, id[t], c);
  }
  return new CpuTensor([id.length, C], 'f32', out);
}

// Backward of `out[t * C + c] = weightAt(w, id[t], c)`: dTable[ids[t]] += dy[t] (in place).
export function embeddingBackward(dy: Tensor, ids: Int32Array, dTable: Tensor): void {
  const g = asCpu(dy).f32;
  const table = asCpu(dTable).f32;
  const [V, C] = dTable.shape;
  assertShape(g.length === ids.length * C, `embeddingBackward: dy (${dy.shape}) vs ${ids.length} ids, C=${C}`);
  for (let t = 0; t < ids.length; t++) {
    assertShape(ids[t] >= 0 && ids[t] < V, `embeddingBackward: token id ${ids[t]} outside [0,${V})`);
    for (let c = 0; c < C; c++) table[ids[t] * C + c] += g[t * C + c];
  }
}

// x (R,C), rows (n) -> (n,C)
export function gatherRows(x: Tensor, rows: Tensor): Tensor {
  const xs = asCpu(x).f32;
  const idx = asCpu(rows).i32;
  const [R, C] = x.shape;
  const out = new Float32Array(idx.length * C);
  for (let i = 0; i < idx.length; i++) {
    assertShape(idx[i] >= 0 && idx[i] < R, `gatherRows: row ${idx[i]} outside [0,${R})`);
    out.set(xs.subarray(idx[i] * C, (idx[i] + 1) * C), i * C);
  }
  return new CpuTensor([idx.length, C], 'f32', out);
}

// Backward of `out.set(xs.subarray(idx[i] * C, ...), i * C)` (gatherRows): dst[rows[i]] += src[i] (in place).
export function scatterAddRows(dst: Tensor, src: Tensor, rows: Tensor): void {
  const d = asCpu(dst).f32;
  const x = asCpu(src).f32;
  const idx = asCpu(rows).i32;
  const [R, C] = dst.shape;
  assertShape(x.length === idx.length * C, `scatterAddRows: src (${src.shape}) vs ${idx.length} rows of ${C}`);
  for (let i = 0; i < idx.length; i++) {
    assertShape(idx[i] >= 0 && idx[i] < R, `scatterAddRows: row ${idx[i]} outside [0,${R})`);
    for (let c = 0; c < C; c++) d[idx[i] * C + c] += x[i * C + c];
  }
}

// k, v (T,Hkv,D) -> cache (S,maxT,Hkv,D)
export function kvWrite(kCache: Tensor, vCache: Tensor, k: Tensor, v: Tensor, layout: TokenLayout): void {
  const [S, maxT, Hkv, D] = kCache.shape;
  const slot = asCpu(layout.slot).i32;
  const pos = asCpu(layout.pos).i32;
  const row = Hkv * D;
  for (const [cache, src] of [
    [asCpu(kCache).f32, asCpu(k).f32],
    [asCpu(vCache).f32, asCpu(v).f32],
  ] as const) {
    assertShape(src.length === slot.length * row, `kvWrite: k/v (${k.shape}) vs cache (${kCache.shape})`);
    for (let t = 0; t < slot.length; t++) {
      assertShape(slot[t] >= 0 && slot[t] < S && pos[t] >= 0 && pos[t] < maxT, `kvWrite: slot ${slot[t]} pos ${pos[t]} outside cache (${S},${maxT})`);
      cache.set(src.subarray(t * row, (t + 1) * row), (slot[t] * maxT + pos[t]) * row);
    }
  }
}

// Backward of `cache.set(src.subarray(t * row, ...), (slot[t] * maxT + pos[t]) * row)` (kvWrite):
// dk[t] = dkCache[slot[t], pos[t]], a gather.
export function kvWriteBackward(dkCache: Tensor, dvCache: Tensor, layout: TokenLayout): { dk: Tensor; dv: Tensor } {
  const [S, maxT, Hkv, D] = dkCache.shape;
  const slot = asCpu(layout.slot).i32;
  const pos = asCpu(layout.pos).i32;
  const row = Hkv * D;
  const gather = (src: Float32Array) => {
    const out = new Float32Array(slot.length * row);
    for (let t = 0; t < slot.length; t++) {
      assertShape(slot[t] >= 0 && slot[t] < S && pos[t] >= 0 && pos[t] < maxT, `kvWriteBackward: slot ${slot[t]} pos ${pos[t]} outside cache`);
      const o = (slot[t] * maxT + pos[t]) * row;
      out.set(src.subarray(o, o + row), t * row);
    }
    return new CpuTensor([slot.length, Hkv, D], 'f32', out);
  };
  return { dk: gather(asCpu(dkCache).f32), dv: gather(asCpu(dvCache).f32) };
}
