// Does the policy copy values from its context? Two greedy probes, scored by exact match:
//   - first calls: the first Act turn of train-split tasks (users the policy was trained on), whose target
//     is an identity lookup with the email or name + zip from the request;
//   - drills: fresh copy drills (src/pretrain/augment.ts) of the kind it was trained on.
// A policy that writes well-formed calls with someone else's values scores near 0 on both.
import { Rng } from '../engine/rng';
import type { Domain } from '../env/domain';
import { generate, GREEDY, type FinishReason } from '../model/generate';
import type { Qwen3Model } from '../model/qwen3';
import type { Tokenizer } from '../model/tokenizer';
import type { ToolDefinition } from '../rollout/chat';
import { copyDrills } from './augment';
import { expertRows, rowToExample, type Example } from './data';

export interface CopyProbe {
  firstCalls: { n: number; exact: number };
  drills: { n: number; exact: number };
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
  const { rows, tasks } = expertRows(domain, { split: 'train', tasks: o.tasks, seed: o.seed, mistakeRate: 0 });
  const seen = new Set<string>();
  const first: Example[] = [];
  for (const r of rows)
    if (r.role === 'act' && !seen.has(r.taskId)) {
      seen.add(r.taskId);
      first.push(rowToExample(r, domain.policy, tools));
    }
  // Filler: the same tasks' requests, as in the pretraining drills.
  const drills = copyDrills(o.drills, new Rng(o.seed * 13 + 7), tasks.flatMap((t) => t.userMessages));
  const score = async (ex: Example[], probe: CopyProbe['examples'][number]['probe']) => {
    const res = await complete(ex.map((e) => e.prompt));
    let exact = 0;
    const examples: CopyProbe['examples'] = [];
    ex.forEach((e, i) => {
      const want = e.response.replace(/<\|im_end\|>$/, '');
      const got = res[i].text;
      if (got === want && res[i].finishReason === 'eos') exact++;
      if (examples.length < 3) examples.push({ probe, want, got });
    });
    return { n: ex.length, exact, examples };
  };
  const a = await score(first, 'first-call');
  const b = await score(drills, 'drill');
  return { firstCalls: { n: a.n, exact: a.exact }, drills: { n: b.n, exact: b.exact }, examples: [...a.examples, ...b.examples] };
}
