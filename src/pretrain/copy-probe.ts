// Does the policy copy values from its context? Two greedy probes, scored by exact match:
//   - first calls: the first Act turn of train-split tasks (users the policy was trained on), whose target
//     is an identity lookup with the email or name + zip from the request;
//   - drills: fresh copy drills (src/pretrain/augment.ts) of the kind it was trained on.
// A policy that writes well-formed calls with someone else's values scores near 0 on both.
import { Rng } from '../util/rng';
import type { Domain } from '../env/domain';
import { generate, GREEDY, type FinishReason } from '../model/generate';
import type { Qwen3Model } from '../model/qwen3';
import type { Tokenizer } from '../model/tokenizer';
import type { ToolDefinition } from '../rollout/chat';
import { copyDrills } from './augment';
import { expertRows, rowToExample, type Example } from './data';

export interface CopyProbe {
  firstCalls: { n: number; exact: number };
  /** The same on test-split tasks (held-out users in the full world, held-out intents in a compact one). */
  firstCallsHeldOut?: { n: number; exact: number };
  drills: { n: number; exact: number };
  /** Drill values copied exactly, by kind of value (position-wise against the wanted list). */
  drillValues?: Record<string, { n: number; exact: number }>;
  /** A few (wanted, written) pairs of each probe, for the card. */
  examples: { probe: 'first-call' | 'drill'; want: string; got: string }[];
}

/** What the probe asks of a policy: one completion per prompt, its text and why it stopped. */
export type Complete = (prompts: string[]) => Promise<{ text: string; finishReason: FinishReason }[]>;

/** The probe on a model: greedy completions of at most 96 tokens. */
export async function copyProbe(policy: { model: Qwen3Model; tokenizer: Tokenizer }, domain: Domain, o: { tasks: number; drills: number; seed: number }): Promise<CopyProbe> {
  const complete: Complete = (prompts) => generate(policy.model, policy.tokenizer, prompts.map((prompt) => ({ prompt, maxNewTokens: 96, sampling: GREEDY })));
  return probeCopying(complete, domain, o);
}

/** The probe on any policy: builds both probes' examples, asks for completions and scores them. */
export async function probeCopying(complete: Complete, domain: Domain, o: { tasks: number; drills: number; seed: number }): Promise<CopyProbe> {
  const tools = domain.definitions() as unknown as ToolDefinition[];
  const firstActs = (split: 'train' | 'test') => {
    const { rows, tasks } = expertRows(domain, { split, tasks: o.tasks, seed: o.seed, mistakeRate: 0 });
    const seen = new Set<string>();
    const first: Example[] = [];
    for (const r of rows)
      if (r.role === 'act' && !seen.has(r.taskId)) {
        seen.add(r.taskId);
        first.push(rowToExample(r, domain.policy, tools));
      }
    return { first, tasks };
  };
  const { first, tasks } = firstActs('train');
  // Filler: the same tasks' requests, as in the pretraining drills.
  const drills = copyDrills(o.drills, new Rng(o.seed * 13 + 7), tasks.flatMap((t) => t.userMessages));
  const score = async (ex: Example[], probe: CopyProbe['examples'][number]['probe']) => {
    const res = await complete(ex.map((e) => e.prompt));
    let exact = 0;
    const examples: CopyProbe['examples'] = [];
    const values: Record<string, { n: number; exact: number }> = {};
    ex.forEach((e, i) => {
      const want = e.response.replace(/<\|im_end\|>$/, '');
      const got = res[i].text;
      if (got === want && res[i].finishReason === 'eos') exact++;
      if (examples.length < 3) examples.push({ probe, want, got });
      if (probe === 'drill') {
        const gotList = got.split(', ');
        want.split(', ').forEach((v, k) => {
          const g = (values[valueKind(v)] ??= { n: 0, exact: 0 });
          g.n++;
          if (gotList[k] === v) g.exact++;
        });
      }
    });
    return { n: ex.length, exact, examples, values };
  };
  const a = await score(first, 'first-call');
  const h = await score(firstActs('test').first, 'first-call');
  const b = await score(drills, 'drill');
  return {
    firstCalls: { n: a.n, exact: a.exact },
    firstCallsHeldOut: { n: h.n, exact: h.exact },
    drills: { n: b.n, exact: b.exact },
    drillValues: b.values,
    examples: [...a.examples, ...b.examples],
  };
}

/** The kind of a drill value (src/pretrain/augment.ts copyDrills writes these five). */
export function valueKind(v: string): string {
  if (/^#W\d{7}$/.test(v)) return 'order id';
  if (/@example\.com$/.test(v)) return 'email';
  if (/^\d{5}$/.test(v)) return 'zip';
  if (/^\d{10}$/.test(v)) return 'item id';
  if (/^[A-Z][a-z]+ [A-Z][a-z]+$/.test(v)) return 'name';
  return 'other';
}
