// Typed, readable errors. Everything the engine or the model loader refuses is one of these, so the UI and
// the CLI can show a clear message and the worker never dies on bad input.

export type EngineErrorCode =
  | 'no-adapter' // no WebGPU adapter/device could be obtained
  | 'device-lost' // the GPU device was lost (driver reset, tab backgrounded, OOM kill)
  | 'out-of-memory' // an allocation failed
  | 'unsupported' // a feature or limit this op needs is missing
  | 'shape' // tensors of incompatible shapes or dtypes were passed to an op
  | 'validation'; // the GPU reported a validation error

export class EngineError extends Error {
  override readonly name = 'EngineError';
  constructor(
    readonly code: EngineErrorCode,
    message: string,
  ) {
    super(`[${code}] ${message}`);
  }
}

/** A model file (config.json, *.safetensors, tokenizer.json, ...) that cannot be used. Names the file. */
export class ModelFormatError extends Error {
  override readonly name = 'ModelFormatError';
  constructor(
    readonly file: string,
    readonly problem: string,
  ) {
    super(`${file}: ${problem}`);
  }
}

export function assertShape(cond: boolean, what: string): asserts cond {
  if (!cond) throw new EngineError('shape', what);
}
