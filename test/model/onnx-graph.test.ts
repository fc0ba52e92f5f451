import { describe, expect, it } from 'vitest';
import * as ort from 'onnxruntime-web';
import { OnnxGraph } from '../../src/model/onnx/graph';
import { Rng } from '../../src/util/rng';

ort.env.wasm.numThreads = 1;

function randn(n: number, seed: number): Float32Array {
  const r = new Rng(seed);
  return Float32Array.from({ length: n }, () => r.normal());
}

describe('OnnxGraph', () => {
  it('a MatMul graph with an initializer runs in onnxruntime-web and matches a JS matmul', async () => {
    const [M, K, N] = [3, 5, 4];
    const w = randn(K * N, 1); // (K,N), ONNX MatMul layout
    const g = new OnnxGraph(17);
    g.addInput('x', 'float32', ['M', K]);
    g.addInitializer('w', w, [K, N]);
    const y = g.op('MatMul', ['x', 'w']);
    g.addNode('Mul', [y, 'two'], ['y'], {});
    g.addInitializer('two', new Float32Array([2]), []);
    g.addOutput('y', 'float32', ['M', N]);
    const session = await ort.InferenceSession.create(g.toBytes());
    const x = randn(M * K, 2);
    const out = (await session.run({ x: new ort.Tensor('float32', x, [M, K]) })).y;
    expect(out.dims).toEqual([M, N]);
    const got = out.data as Float32Array;
    for (let m = 0; m < M; m++)
      for (let n = 0; n < N; n++) {
        let acc = 0;
        for (let k = 0; k < K; k++) acc += x[m * K + k] * w[k * N + n];
        expect(got[m * N + n]).toBeCloseTo(2 * acc, 4);
      }
  });

  it('writes int, float, ints, string and tensor attributes that ORT accepts', async () => {
    const g = new OnnxGraph(17);
    g.addInput('x', 'float32', [2, 3]);
    const c = g.op('Constant', [], { value: { tensor: { data: new Float32Array([1, 2, 3]), dims: [3] } } });
    const added = g.op('Add', ['x', c]);
    const t = g.op('Transpose', [added], { perm: [1, 0] });
    const lr = g.op('LeakyRelu', [t], { alpha: 0.5 });
    const s = g.op('Softmax', [lr], { axis: -1 });
    g.addNode('Identity', [s], ['y']);
    g.addOutput('y', 'float32', [3, 2]);
    const session = await ort.InferenceSession.create(g.toBytes());
    const x = new Float32Array([-1, -4, 0, 1, -3, 2]);
    const y = (await session.run({ x: new ort.Tensor('float32', x, [2, 3]) })).y.data as Float32Array;
    // x + [1,2,3] = [[0,-2,3],[2,-1,5]] -> T -> [[0,2],[-2,-1],[3,5]] -> leaky(0.5) -> [[0,2],[-1,-0.5],[3,5]]
    const rows = [[0, 2], [-1, -0.5], [3, 5]];
    rows.forEach(([a, b], i) => {
      const ea = Math.exp(a), eb = Math.exp(b);
      expect(y[2 * i]).toBeCloseTo(ea / (ea + eb), 6);
      expect(y[2 * i + 1]).toBeCloseTo(eb / (ea + eb), 6);
    });
  });
});
