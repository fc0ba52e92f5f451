// WGSL snippets shared by forward and backward kernels, written once: a kernel interpolates the ones it
// needs into its source.
export const WG = 256;

/** 1-D thread index for grids folded by grid1d. */
export const INDEX = /* wgsl */ `
fn index(w: vec3u, nw: vec3u, l: u32) -> u32 { return (w.y * nw.x + w.x) * ${WG}u + l; }`;

/** Workgroup tree reductions over WG threads; every thread must call them (they have barriers). */
export const REDUCE = /* wgsl */ `
var<workgroup> red: array<f32, ${WG}>;
fn reduce_sum(l: u32, v: f32) -> f32 {
  red[l] = v;
  workgroupBarrier();
  for (var s = ${WG / 2}u; s > 0u; s >>= 1u) {
    if (l < s) { red[l] += red[l + s]; }
    workgroupBarrier();
  }
  let out = red[0];
  workgroupBarrier();
  return out;
}
fn reduce_max(l: u32, v: f32) -> f32 {
  red[l] = v;
  workgroupBarrier();
  for (var s = ${WG / 2}u; s > 0u; s >>= 1u) {
    if (l < s) { red[l] = max(red[l], red[l + s]); }
    workgroupBarrier();
  }
  let out = red[0];
  workgroupBarrier();
  return out;
}
fn row_of(w: vec3u, nw: vec3u) -> u32 { return w.y * nw.x + w.x; }`;

/**
 * The RoPE angle pos * f_i with f_i = hi_i + lo_i (a (hi, lo) pair of ropeFreqs), hi_i holding 9 significant
 * bits so that pos * hi_i is exact for pos < 2^15; reduced to [-pi, pi] with a two-part 2*pi (Cody-Waite)
 * before sin/cos, whose WGSL accuracy is only specified on [-pi, pi]. Keeps long-context angles within
 * ~1e-6 rad. The forward rotation and its transpose in the backward both call it, so they agree exactly.
 */
export const ROPE_ANGLE = /* wgsl */ `
fn rope_angle(ps: f32, f: vec2f) -> f32 {
  let ahi = ps * f.x;
  let alo = ps * f.y;
  let k = round((ahi + alo) * 0.15915494309189535);
  return ((ahi - k * 6.28125) - k * 0.0019353071795864769) + alo;
}`;

/** Host table of (hi, lo) splits of theta^(-2i/D) for i < D/2 (see ROPE_ANGLE). */
export function ropeFreqs(theta: number, d: number): Float32Array {
  const out = new Float32Array(d);
  for (let i = 0; i < d / 2; i++) {
    const f = Math.pow(theta, (-2 * i) / d);
    const q = 2 ** (Math.floor(Math.log2(f)) - 8); // 9 significant bits
    const hi = Math.round(f / q) * q;
    out[2 * i] = hi;
    out[2 * i + 1] = f - hi;
  }
  return out;
}
