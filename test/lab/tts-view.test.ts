// Private rehearsal's imagined attempts as the page compares them (workers/lab/tts-view.ts): each rehearsed
// call beside the shadow environment's answer, on an engine episode with hand-written Act and Rehearse texts.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { formatCall, formatObservation, serializeObservation } from '../../src/env/toolcall';
import { LabRollouts } from '../../workers/lab/episode';
import { rehearsedCalls } from '../../workers/lab/tts-view';
import { domain, loadTiny, retail, type Tiny } from './helpers';

let tiny: Tiny;
beforeAll(async () => {
  tiny = await loadTiny(1024);
});
afterAll(() => tiny?.backend.dispose());

describe('private rehearsal attempt view', () => {
  it('pairs each rehearsed call with the real answer to it, in step order; a reply has none', () => {
    const task = retail.tasks.generate({ split: 'train', count: 1, seed: 0 })[0];
    const cfg = { mode: 'rehearse' as const, seed: 1, k: 1, maxTurns: 4, maxNewTokens: 8, rehearseTokens: 32, temperature: 1, actSource: 'policy' as const };
    const ep = new LabRollouts({ model: tiny.model, tokenizer: tiny.tok, adapter: null }, domain, task, '', cfg).stepper.episodes[0];
    const [c0, c1] = task.referenceActions;
    const real0 = retail.createEnv().execute(c0);
    ep.applyAct(formatCall(c0));
    ep.applyRehearse(ep.pending[0], formatObservation(real0)); // faithful
    ep.applyAct(formatCall(c1));
    ep.applyRehearse(ep.pending[0], '<execution_result>\n{"error":"order not found"}\n</execution_result>'); // wrong
    ep.applyAct('Done.');
    const v = rehearsedCalls(ep);
    expect(v).toHaveLength(3);
    expect(v[0]).toEqual({ call: `${c0.name}(${JSON.stringify(c0.arguments)})`, rehearsed: serializeObservation(real0), real: serializeObservation(real0) });
    expect(v[1]!.call.startsWith(`${c1.name}(`)).toBe(true);
    expect(v[1]!.rehearsed).toBe('{"error":"order not found"}');
    expect(v[1]!.real).toBe(serializeObservation(ep.fidelity[1].real));
    expect(v[1]!.real).not.toBe(v[1]!.rehearsed);
    expect(v[2]).toBeNull();
  });
});
