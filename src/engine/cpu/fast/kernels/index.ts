// @ts-nocheck -- AssemblyScript (compiled by scripts/build-wasm.ts), not part of the TypeScript program.
//
// Entry point of the CPU fast path's WebAssembly module. Every kernel has the same signature
// (args: pointer to an i32 argument block, tid, nth) and computes thread `tid`'s share of the work, so
// the main thread and the worker threads run the same exports on the same shared memory.
export { gemm, GEMM_SCRATCH, KC } from './gemm';
export { gemm2, GEMM2_SCRATCH, packPanels } from './gemm2';
export { gemv } from './gemv';
export { gemv2 } from './gemv2';
export { attention1, attentionBackward1 } from './attention1';
export { attention2, attentionBackward2 } from './attention2';
export { attention3, attentionBackward3 } from './attention3';
export { rmsnorm, swiglu, axpb, swigluBackward, adamw, rmsnormBackward } from './elementwise';
export { softmaxRows } from './softmax';
export { probeMulAdd, probeMadd, maddLane, probeRead, probeCopy } from './probe';
