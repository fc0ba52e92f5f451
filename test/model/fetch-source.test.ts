// Loading over HTTP (what the browser does with a model folder served next to the app), from a real
// local server.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { FetchSource } from '../../src/model/source';
import { loadModel } from '../../src/model/load';
import { CpuRefBackend } from '../../src/engine/cpu/ref';
import { ModelFormatError } from '../../src/engine/errors';
import { generate } from '../../src/model/generate';
import { INDEX_FILE as INDEX } from '../../src/model/weights';
import { tinyConfig, tinyModelFiles } from '../fixtures/tiny-model';

let server: Server;
let base: string;
let files: Map<string, Uint8Array>;

beforeAll(async () => {
  files = await tinyModelFiles(tinyConfig(), 13);
  server = createServer((req, res) => {
    const name = decodeURIComponent((req.url ?? '').replace(/^\/models\/tiny\//, ''));
    const f = files.get(name);
    if (req.url === '/models/broken/config.json') return void res.writeHead(500).end('boom');
    if (!f) return void res.writeHead(404).end();
    res.writeHead(200, { 'content-length': f.length });
    res.end(req.method === 'HEAD' ? undefined : f);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/models`;
});
afterAll(() => new Promise<void>((r) => server.close(() => r())));

describe('FetchSource', () => {
  it('loads a model and tokenizer over HTTP and generates', async () => {
    const src = new FetchSource(`${base}/tiny/`);
    expect(await src.has('config.json')).toBe(true);
    expect(await src.has(INDEX)).toBe(false);
    const { model, tokenizer } = await loadModel(src, new CpuRefBackend(), { format: 'q8' });
    const [r] = await generate(model, tokenizer, [{ prompt: 'hi', maxNewTokens: 3, stopTokens: [] }]);
    expect(r.tokens).toHaveLength(3);
  });

  it('names the missing file, and reports HTTP errors', async () => {
    const e1 = await new FetchSource(`${base}/nothing`).read('tokenizer.json').catch((e: unknown) => e);
    expect(e1).toBeInstanceOf(ModelFormatError);
    expect((e1 as Error).message).toBe(`tokenizer.json: file is missing from ${base}/nothing`);
    const e2 = await new FetchSource(`${base}/broken`).read('config.json').catch((e: unknown) => e);
    expect((e2 as Error).message).toBe(`config.json: fetch from ${base}/broken failed with HTTP 500`);
  });
});
