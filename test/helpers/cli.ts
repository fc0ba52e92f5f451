// Shared by the in-process CLI tests: an io that captures what a CLI writes, and a tiny random-weight model
// folder per test file (the retail domain they show it, one tool and a short policy, is test/fixtures').
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll } from 'vitest';
import type { CliIo } from '../../src/cli/args';
import { tinyConfig, writeTinyModel } from '../fixtures/tiny-model';

export { calculateOnlyDomain } from '../fixtures/domains';

export function captureIo(): CliIo & { stdout: () => string; stderr: () => string } {
  let o = '';
  let e = '';
  return { out: (s) => void (o += s), err: (s) => void (e += s), stdout: () => o, stderr: () => e };
}

/**
 * A temporary work folder and a tiny random-weight model folder for a CLI test file (2048-token context,
 * weight seed 4), created before its tests and removed after them. `modelDir` is set once beforeAll has run.
 */
export function tinyModelWorkspace(prefix: string): { readonly work: string; modelDir: string } {
  const ws = { work: mkdtempSync(join(tmpdir(), prefix)), modelDir: '' };
  beforeAll(async () => {
    ws.modelDir = await writeTinyModel(tinyConfig({ maxPositionEmbeddings: 2048 }), 4);
  });
  afterAll(() => {
    rmSync(ws.work, { recursive: true, force: true });
    if (ws.modelDir) rmSync(ws.modelDir, { recursive: true, force: true });
  });
  return ws;
}
