// The copy probe behind the model card's main conclusion ("it does not copy"), run on policies whose
// behaviour is known: one that copies the values in front of it, one that writes well-formed answers with
// someone else's values, and one that copies but never stops.
//
// Why not a model: no model at hand copies (the bundled one is the probe's negative finding) and training one
// that does is far too slow for a unit test, so the probe is split at the model call (`probeCopying` takes
// the completions; `copyProbe` passes greedy generation) and everything else runs for real: the train-split
// expert rows, the fresh drills, the exact-match and stop rule, and the card's examples. The policies here
// read only the prompt, as a model would.
import { describe, expect, it } from 'vitest';
import { retailDomain } from '../../src/env/retail/index';
import { loadRetailBase } from '../../src/env/retail/node';
import { formatCall } from '../../src/env/toolcall';
import type { FinishReason } from '../../src/model/generate';
import { probeCopying, type Complete } from '../../research/pretrain/copy-probe';
import { expertRows, rowToExample } from '../../research/pretrain/data';
import type { ToolDefinition } from '../../src/rollout/chat';

const domain = retailDomain(loadRetailBase());
const o = { tasks: 12, drills: 12, seed: 5 };

/** Copies from the prompt: a drill's list, or the identity in the last user message (email, else name + zip). */
function copied(prompt: string): string {
  const drill = /Please repeat exactly: (.*)<\|im_end\|>\n<\|im_start\|>assistant\n$/.exec(prompt);
  if (drill) return drill[1];
  const user = prompt.slice(prompt.lastIndexOf('<|im_start|>user\n'));
  const email = /[\w.]+@example\.com/.exec(user);
  if (email) return formatCall({ name: 'find_user_id_by_email', arguments: { email: email[0] } });
  const name = /\b([A-Z][a-z]+) ([A-Z][a-z]+)\b/.exec(user);
  const zip = /\b\d{5}\b/.exec(user);
  // A later Act turn of the in-context probe: this copier answers only identity lookups.
  if (!name || !zip) return '';
  return formatCall({ name: 'find_user_id_by_name_zip', arguments: { first_name: name[1], last_name: name[2], zip: zip[0] } });
}
const policy = (answer: (prompts: string[], i: number) => string, finishReason: FinishReason = 'eos'): Complete =>
  async (prompts) => prompts.map((_, i) => ({ text: answer(prompts, i), finishReason }));

describe('copy probe', () => {
  it('a policy that copies scores every first call and every drill', async () => {
    const r = await probeCopying(policy((p, i) => copied(p[i])), domain, o);
    expect(r.firstCalls).toEqual({ n: 12, exact: 12 });
    expect(r.drills).toEqual({ n: 12, exact: 12 });
    expect(r.firstCallsHeldOut).toEqual({ n: 12, exact: 12 });
    // Per kind of drill value: everything copied, and the kinds are the drills' own.
    const kinds = Object.entries(r.drillValues!);
    expect(kinds.length).toBeGreaterThan(2);
    for (const [kind, g] of kinds) {
      expect(kind).not.toBe('other');
      expect(g.exact).toBe(g.n);
    }
    expect(r.examples).toHaveLength(6);
    for (const e of r.examples) expect(e.got).toBe(e.want);
    expect(r.examples.map((e) => e.probe)).toEqual(['first-call', 'first-call', 'first-call', 'drill', 'drill', 'drill']);
    expect(r.examples[0].want).toMatch(/^<tool_call>\n\{"name": "find_user_id_by_/);
  });

  it("a policy that writes the right shape with another prompt's values scores 0", async () => {
    // Each answer is the copier's answer to the previous prompt of the same probe: the right tool, well-formed
    // arguments of the right kinds, someone else's values (what the card says the bundled model does).
    const r = await probeCopying(policy((p, i) => copied(p[(i + p.length - 1) % p.length])), domain, o);
    expect(r.firstCalls).toEqual({ n: 12, exact: 0 });
    expect(r.drills).toEqual({ n: 12, exact: 0 });
    expect(r.firstCallsHeldOut!.exact).toBe(0);
    for (const g of Object.values(r.drillValues!)) expect(g.exact).toBe(0);
    for (const e of r.examples) {
      expect(e.got).not.toBe(e.want);
      if (e.probe === 'first-call') expect(e.got).toMatch(/^<tool_call>\n\{"name": "find_user_id_by_/);
    }
  });

  it('in context: the reference turns score every value they copy, by kind; turns of another prompt score almost none', async () => {
    // The oracle answers each Act prompt with the expert's own turn (the probe's reference).
    const { rows } = expertRows(domain, { split: 'test', tasks: o.tasks, seed: o.seed, mistakeRate: 0 });
    const tools = domain.definitions() as unknown as ToolDefinition[];
    const answer = new Map(rows.filter((r) => r.role === 'act').map((r) => [rowToExample(r, domain.policy, tools).prompt, r.target]));
    const r = await probeCopying(policy((p, i) => answer.get(p[i]) ?? ''), domain, o);
    const kinds = r.inContext!;
    for (const k of ['user id', 'order id', 'amount (in a reply)']) expect(kinds[k]?.n, k).toBeGreaterThan(0);
    for (const [k, g] of Object.entries(kinds)) expect(g.exact, k).toBe(g.n);
    const shifted = await probeCopying(policy((p, i) => answer.get(p[(i + 1) % p.length]) ?? ''), domain, o);
    const all = Object.values(shifted.inContext!).reduce((a, g) => ({ n: a.n + g.n, exact: a.exact + g.exact }), { n: 0, exact: 0 });
    expect(all.n).toBe(Object.values(kinds).reduce((a, g) => a + g.n, 0));
    expect(all.exact / all.n).toBeLessThan(0.2);
  });

  it('a copy that does not stop (no end of turn) is not counted', async () => {
    const r = await probeCopying(policy((p, i) => copied(p[i]), 'length'), domain, o);
    expect(r.firstCalls.exact).toBe(0);
    expect(r.drills.exact).toBe(0);
  });
});
