// Measures device memory: counts the bytes of every GPUBuffer a device creates and destroys, by
// wrapping that device's createBuffer (instrumentation for benchmarks and memory tests only).
export interface DeviceBytes {
  /** Bytes of buffers alive now. */
  live(): number;
  /** Highest `live()` since the start or the last resetPeak(). */
  peak(): number;
  resetPeak(): void;
  /** Restore the device's own createBuffer. */
  stop(): void;
}

export function trackDeviceBytes(device: GPUDevice): DeviceBytes {
  const orig = device.createBuffer.bind(device);
  let live = 0;
  let peak = 0;
  device.createBuffer = (desc: GPUBufferDescriptor): GPUBuffer => {
    const buf = orig(desc);
    const size = desc.size;
    live += size;
    peak = Math.max(peak, live);
    const destroy = buf.destroy.bind(buf);
    let gone = false;
    buf.destroy = () => {
      if (!gone) live -= size;
      gone = true;
      destroy();
    };
    return buf;
  };
  return {
    live: () => live,
    peak: () => peak,
    resetPeak: () => {
      peak = live;
    },
    stop: () => {
      device.createBuffer = orig;
    },
  };
}
