// The rollout state machine on the real retail environment, fed with texts (what a policy could write).
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { retailDomain } from '../../src/env/retail';
import { loadRetailBase } from '../../src/env/retail/node';
import { formatCall, formatObservation, serializeObservation } from '../../src/env/toolcall';
import type { Observation, Task } from '../../src/env/domain';
import { Episode } from '../../src/rollout/episode';

const domain = retailDomain(loadRetailBase());
const tasks = domain.tasks.generate({ split: 'train', count: 40, seed: 3 });
// A task whose reference actions include a successful write (so "the real env is untouched" means something).
const writeTask = tasks.find((t) => t.referenceActions.some((a) => domain.createEnv().isWrite(a.name)))!;

function episode(task: Task, mode: 'real' | 'rehearse', maxTurns = 10) {
  return new Episode('p', 'p:0', task, mode, domain.createEnv(), [], maxTurns);
}

describe('Episode (rollout state machine)', () => {
  it('rehearse mode: the call waits for its rehearsal, which enters the Act context as a tool message; fidelity on the side', () => {
    const ep = episode(writeTask, 'rehearse');
    expect(ep.messages.map((m) => m.role)).toEqual(writeTask.userMessages.map(() => 'user'));
    const call = writeTask.referenceActions[0];
    ep.applyAct(formatCall(call));
    expect(ep.wantsAct).toBe(false);
    expect(ep.pending).toHaveLength(1);
    const [p] = ep.pending;
    // The shadow answered the real way, but nothing of it is in the Act context yet.
    expect(p.shadow).toEqual(domain.createEnv().execute(call));
    expect(ep.messages[ep.messages.length - 1].role).toBe('assistant');
    expect(ep.historyBefore).toEqual(writeTask.userMessages.map((content) => ({ role: 'user', content })));

    // A rehearsal that differs from reality: the policy sees the rehearsal, fidelity records the gap.
    const imagined: Observation = { ok: true, name: call.name, result: 'imagined_user_0001' };
    ep.applyRehearse(p, formatObservation(imagined) + '<|im_end|>');
    expect(ep.wantsAct).toBe(true);
    expect(ep.messages[ep.messages.length - 1]).toEqual({ role: 'tool', content: serializeObservation(imagined) });
    expect(ep.steps[ep.steps.length - 1]).toEqual({ kind: 'call', call, observation: imagined });
    expect(ep.fidelity).toHaveLength(1);
    expect(ep.fidelity[0].real).toEqual(p.shadow);
    expect(ep.fidelity[0].exact).toBe(JSON.stringify(p.shadow) === JSON.stringify(imagined));

    // A faithful rehearsal of the next call is an exact match.
    const call2 = writeTask.referenceActions[1];
    ep.applyAct('Let me check.\n' + formatCall(call2));
    const [p2] = ep.pending;
    ep.applyRehearse(p2, formatObservation(p2.shadow));
    expect(ep.fidelity[1]).toMatchObject({ exact: true, f1: 1, errorAgree: true });
    // The text beside the call is kept as a reply step (facts may be stated there).
    expect(ep.steps.filter((s) => s.kind === 'reply').map((s) => (s.kind === 'reply' ? s.text : ''))).toEqual(['Let me check.']);

    // Replaying every reference action on the shadow changes it; a fresh environment is untouched.
    const before = domain.createEnv().hash();
    for (const a of writeTask.referenceActions.slice(2)) {
      ep.applyAct(formatCall(a));
      for (const q of [...ep.pending]) ep.applyRehearse(q, formatObservation(q.shadow));
    }
    expect(ep.env.hash()).not.toBe(before);
    expect(domain.createEnv().hash()).toBe(before);

    ep.applyAct('All done, your request is complete.');
    expect(ep.end).toBe('reply');
    expect(ep.steps[ep.steps.length - 1]).toEqual({ kind: 'reply', text: 'All done, your request is complete.' });
  });

  it('a malformed call becomes an error observation without any rehearsal', () => {
    const ep = episode(tasks[0], 'rehearse');
    ep.applyAct('<tool_call>\n{"name": "get_order_details", "arguments": {"order_id": \n</tool_call>');
    expect(ep.pending).toHaveLength(0);
    expect(ep.wantsAct).toBe(true);
    const last = ep.steps[ep.steps.length - 1];
    expect(last.kind === 'call' && !last.observation.ok && last.observation.code).toBe('parse');
    expect(ep.messages[ep.messages.length - 1].content).toMatch(/^\{"error":"invalid JSON/);
    // An unknown tool is a call (the simulator must validate it) in rehearse mode, an error in real mode.
    ep.applyAct(formatCall({ name: 'fly_to_moon', arguments: {} }));
    expect(ep.pending).toHaveLength(1);
    const real = episode(tasks[0], 'real');
    real.applyAct(formatCall({ name: 'fly_to_moon', arguments: {} }));
    expect(real.messages[real.messages.length - 1].content).toBe(`{"error":"Tool 'fly_to_moon' not found."}`);
  });

  it('an unparseable rehearsal ends the episode with a typed reason', () => {
    const ep = episode(tasks[0], 'rehearse');
    ep.applyAct(formatCall(tasks[0].referenceActions[0]));
    ep.applyRehearse(ep.pending[0], '<execution_result>\n{"user_id": "x"}\n</execution_result>');
    expect(ep.end).toBe('rehearse-invalid');
    expect(ep.rehearseFailure).toBe('bad-shape');
    expect(ep.pending).toHaveLength(0);
    expect(ep.fidelity).toHaveLength(0);
  });

  it('real mode answers at once; turn limit and empty responses end the episode', () => {
    const ep = episode(tasks[0], 'real', 2);
    const call = tasks[0].referenceActions[0];
    ep.applyAct(formatCall(call));
    expect(ep.pending).toHaveLength(0);
    expect(ep.messages[ep.messages.length - 1]).toEqual({ role: 'tool', content: serializeObservation(domain.createEnv().execute(call)) });
    expect(ep.done).toBe(false);
    ep.applyAct(formatCall(call));
    expect(ep.end).toBe('max-turns');
    expect(ep.terminated).toBe(true);
    expect(() => ep.applyAct('more')).toThrow();

    const empty = episode(tasks[0], 'real');
    empty.applyAct('  \n');
    expect(empty.end).toBe('empty');
  });

  it('several calls in one turn: each gets its own rehearsal, tool messages keep the call order', () => {
    const ep = episode(tasks[0], 'rehearse');
    const [a, b] = [{ name: 'calculate', arguments: { expression: '1+1' } }, { name: 'calculate', arguments: { expression: '2*3' } }];
    ep.applyAct(formatCall(a) + '\n' + formatCall(b));
    expect(ep.pending.map((p) => p.call)).toEqual([a, b]);
    const [pa, pb] = ep.pending;
    ep.applyRehearse(pb, formatObservation(pb.shadow)); // out of order
    expect(ep.wantsAct).toBe(false);
    ep.applyRehearse(pa, formatObservation(pa.shadow));
    expect(ep.messages.slice(-2).map((m) => m.content)).toEqual(['{"result":"2.0"}', '{"result":"6.0"}']);
  });

  it('never throws on arbitrary Act and Rehearse text, and keeps the conversation well-formed (property test)', () => {
    const piece = fc.oneof(
      fc.string({ maxLength: 8 }),
      fc.constantFrom(
        '<tool_call>', '</tool_call>', '\n', '<think>', '</think>', '{"name": "calculate", "arguments": {"expression": "1+1"}}',
        '{"name": "get_order_details", "arguments": {"order_id": "#W2378156"}}', '[{"name": "calculate"}]', '{"name": 5}', '<execution_result>',
        '</execution_result>', '{"result": {"a": 1}}', '{"error": "Order not found"}', '<|im_end|>', '{{{{', '"',
      ),
    );
    const text = fc.array(piece, { maxLength: 8 }).map((a) => a.join(''));
    fc.assert(
      fc.property(fc.constantFrom('real', 'rehearse') as fc.Arbitrary<'real' | 'rehearse'>, fc.array(fc.tuple(text, fc.array(text, { maxLength: 3 })), { minLength: 1, maxLength: 5 }), (mode, turns) => {
        const ep = episode(tasks[0], mode, 4);
        for (const [act, rehearsals] of turns) {
          if (!ep.wantsAct) break;
          ep.applyAct(act);
          let i = 0;
          while (ep.pending.length > 0 && !ep.done) ep.applyRehearse(ep.pending[0], rehearsals[i++] ?? '');
          expect(ep.done || ep.wantsAct).toBe(true);
        }
        // Every tool message answers a call step, and holds {"result": …} or {"error": "…"}.
        const tools = ep.messages.filter((m) => m.role === 'tool');
        expect(tools).toHaveLength(ep.steps.filter((x) => x.kind === 'call').length);
        for (const t of tools) expect(Object.keys(JSON.parse(t.content))).toSatisfy((k: string[]) => k.length === 1 && (k[0] === 'result' || k[0] === 'error'));
        expect(ep.turns).toBeLessThanOrEqual(4);
        expect(ep.fidelity.every((f) => f.f1 >= 0 && f.f1 <= 1)).toBe(true);
      }),
      { numRuns: 200, seed: 5 },
    );
  });
});
