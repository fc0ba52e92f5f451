// `npm run eval -- --tts parallel|sequential --n N` reaches privateRehearsal through the CLI's lazy import, on a
// tiny random-weight model folder (the retail domain shown with one tool so prompts fit): the result JSON
// carries the committed episodes' report and every artefact; N = 0 stays the plain evaluation.
import { rmSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { evalCli } from '../../src/cli/eval';
import type { PrivateRehearsalSummary } from '../../src/eval/private-rehearsal';
import { tinyConfig, writeTinyModel } from '../fixtures/tiny-model';
import { calculateOnlyDomain, captureIo } from '../helpers/cli';

const domain = calculateOnlyDomain;
const io = captureIo;
let modelDir: string;
beforeAll(async () => {
  modelDir = await writeTinyModel(tinyConfig({ maxPositionEmbeddings: 2048 }), 4);
});
afterAll(() => {
  if (modelDir) rmSync(modelDir, { recursive: true, force: true });
});
const small = ['--tasks', 'test', '--count', '2', '--max-turns', '1', '--max-act-tokens', '4', '--max-rehearse-tokens', '4', '--fidelity-tokens', '0', '--grounding-chars', '150', '--history-chars', '150', '--threads', '1'];

describe('npm run eval -- --tts', () => {
  it('runs N imagined attempts per task, then one committed episode, in both modes', async () => {
    const plain = io();
    expect(await evalCli(['--model', modelDir, ...small], plain, { domain })).toBe(0);
    const p = JSON.parse(plain.stdout());
    for (const mode of ['parallel', 'sequential'] as const) {
      const t = io();
      expect(await evalCli(['--model', modelDir, ...small, '--tts', mode, '--n', '2'], t, { domain })).toBe(0);
      const r = JSON.parse(t.stdout()) as { tts: unknown; tasks: number; perTask: unknown[]; privateRehearsal: PrivateRehearsalSummary };
      expect(r.tts).toEqual({ mode, n: 2 });
      expect(r.tasks).toBe(2);
      expect(r.privateRehearsal.mode).toBe(mode);
      expect(r.privateRehearsal.perTask.map((x) => x.attempts.length)).toEqual([2, 2]);
      expect(r.privateRehearsal.perTask.map((x) => x.taskId)).toEqual(p.perTask.map((x: { taskId: string }) => x.taskId));
      for (const x of r.privateRehearsal.perTask) expect(x.memory.tokens).toBeGreaterThan(0);
      expect(r.perTask).toHaveLength(2);
      expect(t.stderr()).toMatch(new RegExp(`tts ${mode}`));
    }
  });
});
