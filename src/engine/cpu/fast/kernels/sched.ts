// @ts-nocheck -- AssemblyScript (compiled by scripts/build-wasm.ts), not part of the TypeScript program.
//
// Dynamic work sharing: the threads of a job claim chunks from one counter in the argument block
// (zeroed by the caller) instead of taking fixed shares, so a thread that the OS descheduled (other
// processes on a busy machine) does not hold the whole job back.

/** Byte offset of the chunk counter in every kernel's argument block (slot 31). */
export const COUNTER: usize = 124;

/** The next unclaimed chunk index (grows past the last chunk when the work is gone). */
@inline
export function claim(args: usize): i32 {
  if (ASC_FEATURE_THREADS) return atomic.add<i32>(args + COUNTER, 1);
  const v = load<i32>(args + COUNTER);
  store<i32>(args + COUNTER, v + 1);
  return v;
}

/** Chunks to cut `units` of work into for `nth` threads: about 4 per thread, at least one unit each. */
@inline
export function chunkCount(units: i32, nth: i32): i32 {
  return nth == 1 ? 1 : min(units, nth * 4);
}

/** First unit of chunk `ch` of `chunks` over `units` (chunk ch covers [chunkStart(ch), chunkStart(ch + 1))). */
@inline
export function chunkStart(units: i32, ch: i32, chunks: i32): i32 {
  return <i32>((<i64>units * ch) / chunks);
}
