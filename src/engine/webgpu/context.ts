// The WebGPU core: one device, a pipeline cache, batched dispatches, a buffer pool and typed errors.
// Every WGSL kernel of the engine (forward and backward ops side by side in src/engine/webgpu/kernels/) runs
// through this file; keep its API small and stable.
//
// ## Adding a kernel (in its own file)
//
//   import { type GpuContext, GpuTensor, grid1d } from '../context';   // or './context'
//   const SRC = /* wgsl */ `
//     struct P { n: u32, s: f32 }
//     @group(0) @binding(0) var<uniform> p: P;                 // uniforms: always binding 0 (if any)
//     @group(0) @binding(1) var<storage, read> a: array<f32>;  // then the buffers, in the order passed
//     @group(0) @binding(2) var<storage, read_write> y: array<f32>;
//     @compute @workgroup_size(256)
//     fn main(@builtin(workgroup_id) w: vec3u, @builtin(num_workgroups) nw: vec3u,
//             @builtin(local_invocation_index) l: u32) {
//       let i = (w.y * nw.x + w.x) * 256u + l;                 // grid1d may fold big grids into y
//       if (i < p.n) { y[i] = a[i] * p.s; }
//     }`;
//   export function myScale(ctx: GpuContext, a: GpuTensor, s: number): GpuTensor {
//     const y = ctx.empty(a.shape, 'f32');                      // pooled, no createBuffer per call
//     ctx.dispatch({ code: SRC }, [a.buf, y.buf], [a.size, { f32: s }], grid1d(a.size, 256));
//     return y;
//   }
//
// Rules a kernel must follow:
// - Uniform values are packed in the order given, 4 bytes each: a plain number is a u32, `{ f32: x }`
//   an f32, `{ i32: x }` an i32. Declare the WGSL struct with the same fields in the same order
//   (scalars only, so no padding surprises). Omit the uniform binding when the list is empty.
// - Declare bindings in @group(0), numbered 0..n-1, as `var<uniform>`, `var<storage, read>` or
//   `var<storage, read_write>`: the bind group layout is read from these declarations (bindingKinds),
//   so a binding may go unused. dispatch() checks that the number of buffers passed matches.
// - Small per-dispatch host data (e.g. per-row settings) goes through `ctx.inline(data)`, which
//   returns a binding that is uploaded together with the uniforms at submit time (no extra flush).
// - Validate shapes on the host before dispatching (throw `EngineError('shape', ...)`; `asGpu` and
//   `assertF32` from ./tensor help): the GPU cannot throw. dispatch() itself refuses a lost device.
// - Host data that never changes (tables) goes in `ctx.constant(key, make)`, made once per key.
// - Never createBuffer per op: use `ctx.empty` / `ctx.alloc` (pooled); free temporaries with
//   `ctx.release(buffer)` or `tensor.free()` — release is deferred until the work that uses the
//   buffer has been submitted, so freeing right after dispatching is safe.
// - Work is recorded into one command encoder and submitted on `flush()` (done by read/sync/write and
//   every MAX_BATCH dispatches), so hundreds of ops cost one submit.
import { EngineError } from '../errors';
import { type Binding, type BufferSlice, type Compiled, type Kernel, type Uniform, bindingKinds, packUniforms, toEngineError } from './bindings';
import { BufferPool, type BufferReuse } from './pool';
import { GpuTensor } from './tensor';

export { GpuTensor } from './tensor';
export * from './bindings';
export type { BufferReuse } from './pool';

/** Host work recorded since the context was made (or since the caller last zeroed it): what a benchmark counts per step. */
export interface HostCounters {
  dispatches: number;
  /** createBindGroup calls (a dispatch whose kernel and buffers were bound before reuses its bind group). */
  bindGroups: number;
  submits: number;
}

export interface GpuContextOptions {
  /** navigator.gpu in browsers; Dawn's GPU object in Node. */
  gpu?: GPU;
  /** Largest single buffer this engine creates (bytes); bigger weights are sharded by rows. */
  maxBufferBytes?: number;
  /** Bytes of free buffers the pool may keep for reuse (default 256 MiB). */
  poolBytes?: number;
  /** Which free buffer a request reuses (./pool.ts); 'slot' (default) keeps a steady step's bind groups cached. */
  bufferReuse?: BufferReuse;
  /** Use subgroup operations where the device has them (default true); false runs the fallbacks. */
  subgroups?: boolean;
}

const MAX_BIND_GROUPS = 4096; // cached bind groups before the cache is dropped (stale ones only cost memory)
const MAX_BATCH = 256; // dispatches per submit: keeps the GPU fed during long graphs
const RING_CHUNK = 1 << 20; // bytes per uniform staging chunk
const STORAGE = 0x80; // GPUBufferUsage.STORAGE etc., as numbers so this file loads before globals exist
const COPY_SRC = 0x04;
const COPY_DST = 0x08;
const MAP_READ = 0x01;
const UNIFORM = 0x40;

export class GpuContext {
  readonly hasF16: boolean;
  /** The device has `subgroups` and the context may use them (kernels read it when they are dispatched). */
  hasSubgroups: boolean;
  readonly counters: HostCounters = { dispatches: 0, bindGroups: 0, submits: 0 };
  /** Uploaded tensors (weights, tables) bigger than this many bytes are sharded by rows. */
  readonly maxBufferBytes: number;
  /** Largest single buffer any op may allocate: the device's storage binding limit. */
  readonly maxBindingBytes: number;
  readonly adapterName: string;
  /**
   * The adapter runs shaders on CPU cores (lavapipe, SwiftShader, WARP): a subgroup is one SIMD register there,
   * and kernels written for that (./kernels/gemv-lane.ts) are what 'auto' takes.
   */
  readonly cpuAdapter: boolean;
  private readonly pipelines = new Map<string, Compiled>();
  private readonly byKernel = new WeakMap<Kernel, Compiled>();
  // Bind groups keyed by kernel and buffers: decode repeats the same (pooled) buffers every step, and
  // createBindGroup is the costliest host call of a dispatch.
  private readonly bindGroups = new Map<string, GPUBindGroup>();
  private readonly ids = new WeakMap<GPUBuffer, number>();
  private readonly constants = new Map<string, GPUBuffer>();
  private nextId = 1;
  private encoder: GPUCommandEncoder | null = null;
  private pass: GPUComputePassEncoder | null = null;
  private batched = 0;
  private readonly pool: BufferPool;
  private readonly staging = new BufferPool(16 << 20); // mappable readback buffers
  private deferred: GPUBuffer[] = []; // released while still referenced by unsubmitted work
  private readonly ring: { buffer: GPUBuffer; host: ArrayBuffer }[] = [];
  private ringChunk = 0;
  private ringOffset = 0;
  private readonly align: number;
  private lostInfo: GPUDeviceLostInfo | null = null;
  private readonly lostPromise: Promise<GPUDeviceLostInfo>;
  private errors: EngineError[] = [];
  private checks: Promise<EngineError | null>[] = [];
  private disposed = false;

  private constructor(
    // held so the GPU instance outlives its device: Dawn's Node binding crashes if it is collected first
    readonly gpu: GPU,
    readonly device: GPUDevice,
    adapter: GPUAdapter,
    opts: GpuContextOptions,
  ) {
    this.hasF16 = device.features.has('shader-f16');
    this.hasSubgroups = device.features.has('subgroups') && opts.subgroups !== false;
    const limit = Math.min(device.limits.maxStorageBufferBindingSize, device.limits.maxBufferSize);
    this.maxBindingBytes = limit;
    this.maxBufferBytes = Math.max(4, Math.min(opts.maxBufferBytes ?? limit, limit));
    this.pool = new BufferPool(opts.poolBytes ?? 256 << 20);
    this.pool.reuse = opts.bufferReuse ?? 'slot';
    this.align = Math.max(device.limits.minUniformBufferOffsetAlignment, device.limits.minStorageBufferOffsetAlignment);
    const info = adapter.info;
    this.adapterName = [info?.vendor, info?.architecture, info?.device, info?.description].filter(Boolean).join(' ') || 'unknown adapter';
    this.cpuAdapter = /llvmpipe|lavapipe|swiftshader|software|warp|basic render/i.test(this.adapterName) || (info as { isFallbackAdapter?: boolean } | undefined)?.isFallbackAdapter === true;
    this.lostPromise = device.lost.then((i) => (this.lostInfo = i));
    device.addEventListener('uncapturederror', (ev) => {
      // Handled here: the error is kept and raised as a typed EngineError at the next sync. Without
      // preventDefault the runtime (Dawn in Node, the browser's console) also prints it as if unhandled.
      ev.preventDefault();
      this.errors.push(toEngineError((ev as GPUUncapturedErrorEvent).error, 'GPU'));
    });
  }

  static async create(opts: GpuContextOptions = {}): Promise<GpuContext> {
    const gpu = opts.gpu ?? (globalThis.navigator as Navigator | undefined)?.gpu;
    if (!gpu) throw new EngineError('no-adapter', 'WebGPU is not available (no navigator.gpu and no gpu option)');
    const adapter = await gpu.requestAdapter({ powerPreference: 'high-performance' });
    if (!adapter) throw new EngineError('no-adapter', 'requestAdapter() returned null');
    const want: GPUFeatureName[] = ['shader-f16', 'subgroups'];
    const requiredFeatures = want.filter((f) => adapter.features.has(f));
    const l = adapter.limits;
    let device: GPUDevice;
    try {
      device = await adapter.requestDevice({
        requiredFeatures,
        requiredLimits: {
          maxStorageBufferBindingSize: l.maxStorageBufferBindingSize,
          maxBufferSize: l.maxBufferSize,
          maxComputeWorkgroupStorageSize: l.maxComputeWorkgroupStorageSize,
          maxComputeInvocationsPerWorkgroup: l.maxComputeInvocationsPerWorkgroup,
          maxComputeWorkgroupSizeX: l.maxComputeWorkgroupSizeX,
          maxStorageBuffersPerShaderStage: l.maxStorageBuffersPerShaderStage,
        },
      });
    } catch (e) {
      throw new EngineError('no-adapter', `requestDevice failed: ${(e as Error).message}`);
    }
    return new GpuContext(gpu, device, adapter, opts);
  }

  /** Which free buffer a request reuses (see ./pool.ts); switchable between steps, for the benchmark. */
  get bufferReuse(): BufferReuse {
    return this.pool.reuse;
  }
  set bufferReuse(r: BufferReuse) {
    this.pool.reuse = r;
  }

  /** Throws EngineError('device-lost') once the device is gone; then any pending error. */
  checkAlive(): void {
    if (this.lostInfo || this.disposed)
      throw new EngineError('device-lost', `GPU device lost (${this.lostInfo?.reason ?? 'disposed'}): ${this.lostInfo?.message ?? 'backend disposed'}`);
  }

  // ---------------------------------------------------------------- pipelines and dispatch

  /** The compiled kernel: pipeline and the explicit bind group layout read from its declarations. */
  compiled(k: Kernel): Compiled {
    const hit = this.byKernel.get(k); // fast path: hashing a long WGSL string on every dispatch costs µs
    if (hit) return hit;
    const entry = k.entry ?? 'main';
    const key = `${entry}\u0000${k.code}`;
    let c = this.pipelines.get(key);
    if (!c) {
      const kinds = bindingKinds(k.code);
      const layout = this.device.createBindGroupLayout({
        entries: kinds.map((type, binding) => ({
          binding,
          visibility: 0x4 /* GPUShaderStage.COMPUTE */,
          buffer: { type, hasDynamicOffset: type === 'uniform' },
        })),
      });
      const module = this.device.createShaderModule({ code: k.code });
      const pipeline = this.device.createComputePipeline({
        layout: this.device.createPipelineLayout({ bindGroupLayouts: [layout] }),
        compute: { module, entryPoint: entry },
      });
      c = { pipeline, layout, kinds, id: this.pipelines.size };
      this.pipelines.set(key, c);
    }
    this.byKernel.set(k, c);
    return c;
  }

  private bufferId(b: GPUBuffer): number {
    let id = this.ids.get(b);
    if (id === undefined) this.ids.set(b, (id = this.nextId++));
    return id;
  }

  /** A persistent buffer of host data that never changes (e.g. a rope frequency table), made once per key. */
  constant(key: string, make: () => Float32Array | Uint32Array | Int32Array): GPUBuffer {
    let b = this.constants.get(key);
    if (!b) {
      const data = make();
      b = this.createBuffer(Math.max(16, Math.ceil(data.byteLength / 16) * 16), STORAGE | COPY_DST, `constant ${key}`);
      this.upload(b, data, 0, true);
      this.constants.set(key, b);
    }
    return b;
  }

  /**
   * Stage small host data for this batch; returns a binding valid only for dispatches recorded before the
   * next flush (which dispatch() itself may trigger): stage it again for each dispatch that binds it.
   */
  inline(data: ArrayBuffer | ArrayBufferView): BufferSlice {
    const bytes =
      data instanceof ArrayBuffer ? new Uint8Array(data) : new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
    const size = Math.max(16, Math.ceil(bytes.byteLength / 16) * 16);
    if (size > RING_CHUNK) throw new EngineError('unsupported', `inline data of ${size} bytes (max ${RING_CHUNK})`);
    if (this.ringOffset + size > RING_CHUNK) {
      this.ringChunk++;
      this.ringOffset = 0;
    }
    if (this.ringChunk === this.ring.length) {
      const buffer = this.createBuffer(RING_CHUNK, UNIFORM | STORAGE | COPY_DST, 'uniform ring');
      this.ring.push({ buffer, host: new ArrayBuffer(RING_CHUNK) });
    }
    const chunk = this.ring[this.ringChunk];
    new Uint8Array(chunk.host, this.ringOffset, bytes.byteLength).set(bytes);
    const slice = { buffer: chunk.buffer, offset: this.ringOffset, size };
    this.ringOffset += Math.ceil(size / this.align) * this.align;
    return slice;
  }

  /**
   * Record one dispatch. buffers bind to @binding(1..n) (or 0..n-1 without uniforms), uniforms to
   * @binding(0). Nothing runs until the next flush.
   */
  dispatch(k: Kernel, buffers: readonly Binding[], uniforms: readonly Uniform[], workgroups: readonly [number, number?, number?]): void {
    this.checkAlive();
    const [x, y = 1, z = 1] = workgroups;
    if (x === 0 || y === 0 || z === 0) return;
    const c = this.compiled(k);
    const declared = c.kinds.length;
    const passed = buffers.length + (uniforms.length > 0 ? 1 : 0);
    if (declared !== passed || (uniforms.length > 0) !== (c.kinds[0] === 'uniform'))
      throw new EngineError('validation', `kernel declares ${declared} bindings (uniform first: ${c.kinds[0] === 'uniform'}); dispatch passes ${buffers.length} buffers and ${uniforms.length} uniforms`);
    const entries: GPUBindGroupEntry[] = [];
    let key = `${c.id}`;
    const offsets: number[] = [];
    if (uniforms.length > 0) {
      const s = this.inline(packUniforms(uniforms));
      // bound at offset 0 with a dynamic offset, so the bind group is reusable across dispatches
      entries.push({ binding: 0, resource: { buffer: s.buffer, offset: 0, size: s.size } });
      offsets.push(s.offset);
      key += `|${this.bufferId(s.buffer)}:${s.size}`;
    }
    for (const buf of buffers) {
      const binding = entries.length;
      if ('buffer' in buf) {
        entries.push({ binding, resource: { buffer: buf.buffer, offset: buf.offset, size: buf.size } });
        key += `|${this.bufferId(buf.buffer)}@${buf.offset}:${buf.size}`;
      } else {
        entries.push({ binding, resource: { buffer: buf } });
        key += `|${this.bufferId(buf)}`;
      }
    }
    let bind = this.bindGroups.get(key);
    if (!bind) {
      if (this.bindGroups.size >= MAX_BIND_GROUPS) this.bindGroups.clear();
      bind = this.device.createBindGroup({ layout: c.layout, entries });
      this.bindGroups.set(key, bind);
      this.counters.bindGroups++;
    }
    if (!this.pass) {
      this.encoder ??= this.device.createCommandEncoder();
      this.pass = this.encoder.beginComputePass();
    }
    this.pass.setPipeline(c.pipeline);
    this.pass.setBindGroup(0, bind, offsets);
    this.pass.dispatchWorkgroups(x, y, z);
    this.counters.dispatches++;
    if (++this.batched >= MAX_BATCH) this.flush();
  }

  /** The pending command encoder (compute pass closed), for copies between dispatches. */
  commandEncoder(): GPUCommandEncoder {
    this.checkAlive();
    if (this.pass) {
      this.pass.end();
      this.pass = null;
    }
    this.encoder ??= this.device.createCommandEncoder();
    return this.encoder;
  }

  /** Submit everything recorded so far (uniforms are uploaded first, in queue order). */
  flush(): void {
    if (this.lostInfo || this.disposed) return;
    if (this.pass) {
      this.pass.end();
      this.pass = null;
    }
    for (let i = 0; i <= this.ringChunk && i < this.ring.length; i++) {
      const used = i < this.ringChunk ? RING_CHUNK : this.ringOffset;
      if (used > 0) this.device.queue.writeBuffer(this.ring[i].buffer, 0, new Uint8Array(this.ring[i].host, 0, used));
    }
    if (this.encoder) {
      this.device.queue.submit([this.encoder.finish()]);
      this.counters.submits++;
    }
    this.encoder = null;
    this.batched = 0;
    this.ringChunk = 0;
    this.ringOffset = 0;
    for (const buf of this.deferred) this.pool.put(buf);
    this.deferred = [];
  }

  /** Submit and wait for the GPU; rejects with a typed error for a lost device or any GPU error. */
  async sync(): Promise<void> {
    this.checkAlive();
    this.flush();
    await this.guard(this.device.queue.onSubmittedWorkDone());
    await this.throwPending();
  }

  // ---------------------------------------------------------------- memory

  private createBuffer(size: number, usage: number, what: string): GPUBuffer {
    this.checkAlive();
    if (size > this.device.limits.maxBufferSize)
      throw new EngineError('out-of-memory', `${what}: ${size} bytes exceeds the device's maxBufferSize ${this.device.limits.maxBufferSize}`);
    this.device.pushErrorScope('out-of-memory');
    this.device.pushErrorScope('validation');
    const buf = this.device.createBuffer({ size, usage });
    const validation = this.device.popErrorScope();
    const oom = this.device.popErrorScope();
    this.checks.push(
      Promise.all([oom, validation]).then(
        ([o, v]) => (o ? toEngineError(o, `allocating ${size} bytes for ${what}`) : v ? toEngineError(v, `allocating ${what}`) : null),
        () => null,
      ),
    );
    return buf;
  }

  /** A storage buffer of at least `bytes` (usable as copy source/destination), from the pool when possible. */
  alloc(bytes: number, what = 'tensor'): GPUBuffer {
    if (bytes > this.maxBindingBytes)
      throw new EngineError('unsupported', `${what}: one buffer of ${bytes} bytes exceeds the device's ${this.maxBindingBytes}-byte binding limit`);
    const size = Math.min(BufferPool.bucket(bytes), this.maxBindingBytes);
    return this.pool.take(size) ?? this.createBuffer(size, STORAGE | COPY_SRC | COPY_DST, what);
  }

  /** Give a buffer back; it becomes reusable once the work recorded so far is submitted. */
  release(buf: GPUBuffer): void {
    if (this.encoder || this.pass) this.deferred.push(buf);
    else this.pool.put(buf);
  }

  /** A new single-buffer tensor with undefined contents. */
  empty(shape: readonly number[], dtype: 'f32' | 'i32'): GpuTensor {
    const n = shape.reduce((a, b) => a * b, 1);
    return new GpuTensor(this, [...shape], dtype, [{ row0: 0, rows: shape[0] ?? 1, data: this.alloc(Math.max(4, n * 4)) }]);
  }

  /** Upload bytes into a buffer. Flushes first when recorded work could still read the old contents. */
  upload(buf: GPUBuffer, data: ArrayBufferView, offset = 0, fresh = false): void {
    this.checkAlive();
    if (!fresh) this.flush();
    const bytes = new Uint8Array(data.buffer as ArrayBuffer, data.byteOffset, data.byteLength);
    let aligned = bytes;
    if (bytes.byteLength % 4 !== 0) {
      aligned = new Uint8Array(Math.ceil(bytes.byteLength / 4) * 4);
      aligned.set(bytes);
    }
    this.device.queue.writeBuffer(buf, offset, aligned);
  }

  /** Copy `bytes` from each (buffer, offset) to host memory. One submit, one wait. */
  async readBuffers(parts: readonly { buffer: GPUBuffer; offset: number; bytes: number }[]): Promise<Uint8Array> {
    this.checkAlive();
    const total = parts.reduce((a, p) => a + p.bytes, 0);
    const size = BufferPool.bucket(total);
    const staging = this.staging.take(size) ?? this.createBuffer(size, MAP_READ | COPY_DST, 'readback');
    const enc = this.commandEncoder();
    let at = 0;
    for (const p of parts) {
      const n = Math.ceil(p.bytes / 4) * 4;
      enc.copyBufferToBuffer(p.buffer, p.offset, staging, at, n);
      at += n;
    }
    this.flush();
    let reusable = false;
    try {
      await this.guard(staging.mapAsync(0x0001 /* GPUMapMode.READ */, 0, Math.ceil(total / 4) * 4 || 4));
      const out = new Uint8Array(total);
      out.set(new Uint8Array(staging.getMappedRange(0, Math.ceil(total / 4) * 4 || 4), 0, total));
      staging.unmap();
      reusable = true;
      await this.throwPending();
      return out;
    } finally {
      if (reusable && !this.disposed) this.staging.put(staging);
      else staging.destroy();
    }
  }

  /** Awaits `p`; a failure while the device is (or becomes) lost is reported as 'device-lost'. */
  private async guard<T>(p: Promise<T>): Promise<T> {
    try {
      const r = await Promise.race([p, this.lostPromise.then(() => null)]);
      this.checkAlive();
      return r as T;
    } catch (e) {
      if (e instanceof EngineError) throw e;
      await Promise.race([this.lostPromise, new Promise((r) => setTimeout(r, 100))]);
      this.checkAlive();
      throw new EngineError('validation', `GPU operation failed: ${(e as Error).message}`);
    }
  }

  private async throwPending(): Promise<void> {
    const found = (await Promise.all(this.checks.splice(0))).filter((e): e is EngineError => e !== null);
    const all = [...found, ...this.errors.splice(0)];
    if (all.length > 0) throw all.find((e) => e.code === 'out-of-memory') ?? all[0];
  }

  dispose(): void {
    if (this.disposed) return;
    this.flush();
    this.disposed = true;
    this.pool.destroy();
    this.staging.destroy();
    for (const r of this.ring) r.buffer.destroy();
    for (const b of this.constants.values()) b.destroy();
    this.device.destroy();
  }
}
