// Does the policy copy values from its context? Three greedy probes, scored by exact match:
//   - first calls: the first Act turn of train-split tasks (users the policy was trained on), whose target
//     is an identity lookup with the email or name + zip from the request;
//   - drills: fresh copy drills (research/pretrain/augment.ts) of the kind it was trained on, plus two kinds of value
//     no training drill lists (user ids, amounts);
//   - in context: every Act turn of held-out tasks' reference trajectories, teacher-forced on the real
//     history, scored per value the reference turn copies from that history (a call argument, or an amount
//     its reply states), by kind of value: user and order ids from observations, item ids, amounts, ...
// A policy that writes well-formed calls with someone else's values scores near 0 on both.
import { Rng } from '../../src/util/rng';
import type { Domain, Row } from '../../src/env/domain';
import { generate, GREEDY, type FinishReason } from '../../src/model/generate';
import type { Qwen3Model } from '../../src/model/qwen3';
import type { Tokenizer } from '../../src/model/tokenizer';
import type { ToolDefinition } from '../../src/rollout/chat';
import { copyDrills } from './augment';
import { parse } from '../../src/env/toolcall';
import { tokenBudgets } from '../../src/rollout/budget';
import { expertRows, rowToExample, type Example } from './data';

export interface CopyProbe {
  firstCalls: { n: number; exact: number };
  /** The same on test-split tasks (held-out users in the full world, held-out intents in a compact one). */
  firstCallsHeldOut?: { n: number; exact: number };
  drills: { n: number; exact: number };
  /** Drill values copied exactly, by kind of value (position-wise against the wanted list). */
  drillValues?: Record<string, { n: number; exact: number }>;
  /** Values the reference Act turns of held-out tasks copy from their history, copied exactly, by kind. */
  inContext?: Record<string, { n: number; exact: number }>;
  /** A few (wanted, written) pairs of each probe, for the card. */
  examples: { probe: 'first-call' | 'drill'; want: string; got: string }[];
}

/** What the probe asks of a policy: one completion per prompt, its text and why it stopped. */
/** null: the prompt and its budget do not fit the model's context (such a turn is left out). */
export type Complete = (prompts: string[], maxNewTokens?: number) => Promise<({ text: string; finishReason: FinishReason } | null)[]>;

/** The probe on a model: greedy completions of at most 96 tokens (in context: the world's Act budget). */
export async function copyProbe(policy: { model: Qwen3Model; tokenizer: Tokenizer }, domain: Domain, o: { tasks: number; drills: number; seed: number }): Promise<CopyProbe> {
  const complete: Complete = async (prompts, max = 96) => {
    const ids = prompts.map((p) => policy.tokenizer.encode(p));
    const fits = ids.map((x) => x.length + max <= policy.model.config.maxPositionEmbeddings);
    const res = await generate(policy.model, policy.tokenizer, ids.filter((_, i) => fits[i]).map((prompt) => ({ prompt, maxNewTokens: max, sampling: GREEDY })));
    let k = 0;
    return fits.map((f) => (f ? res[k++] : null));
  };
  return probeCopying(complete, domain, { ...o, actTokens: tokenBudgets(domain, policy.tokenizer).act });
}

/** The probe on any policy: builds both probes' examples, asks for completions and scores them. */
export async function probeCopying(complete: Complete, domain: Domain, o: { tasks: number; drills: number; seed: number; actTokens?: number }): Promise<CopyProbe> {
  const tools = domain.definitions() as unknown as ToolDefinition[];
  const [train, test] = (['train', 'test'] as const).map((split) => expertRows(domain, { split, tasks: o.tasks, seed: o.seed, mistakeRate: 0 }));
  const firstActs = ({ rows, tasks }: typeof train) => {
    const seen = new Set<string>();
    const first: Example[] = [];
    for (const r of rows)
      if (r.role === 'act' && !seen.has(r.taskId)) {
        seen.add(r.taskId);
        first.push(rowToExample(r, domain.policy, tools));
      }
    return { first, tasks };
  };
  const { first, tasks } = firstActs(train);
  // Filler: the same tasks' requests, as in the pretraining drills.
  const drills = copyDrills(o.drills, new Rng(o.seed * 13 + 7), tasks.flatMap((t) => t.userMessages), { probeKinds: true });
  const score = async (ex: Example[], probe: CopyProbe['examples'][number]['probe']) => {
    const res = await complete(ex.map((e) => e.prompt));
    let exact = 0;
    const examples: CopyProbe['examples'] = [];
    const values: Record<string, { n: number; exact: number }> = {};
    ex.forEach((e, i) => {
      const want = e.response.replace(/<\|im_end\|>$/, '');
      const got = res[i]?.text ?? '';
      if (got === want && res[i]?.finishReason === 'eos') exact++;
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
  const inContext = await scoreInContext(complete, domain, tools, test.rows, o.actTokens ?? 256);
  const a = await score(first, 'first-call');
  const h = await score(firstActs(test).first, 'first-call');
  const b = await score(drills, 'drill');
  return {
    firstCalls: { n: a.n, exact: a.exact },
    firstCallsHeldOut: { n: h.n, exact: h.exact },
    drills: { n: b.n, exact: b.exact },
    drillValues: b.values,
    inContext,
    examples: [...a.examples, ...b.examples],
  };
}

/** The kind of a drill value (research/pretrain/augment.ts copyDrills writes these seven with probeKinds). */
export function valueKind(v: string): string {
  if (/^[a-z]+_[a-z]+_\d{4}$/.test(v)) return 'user id';
  if (/^\d+\.\d{2}$/.test(v)) return 'amount';
  if (/^#W\d{7}$/.test(v)) return 'order id';
  if (/@example\.com$/.test(v)) return 'email';
  if (/^\d{5}$/.test(v)) return 'zip';
  if (/^\d{10}$/.test(v)) return 'item id';
  if (/^[A-Z][a-z]+ [A-Z][a-z]+$/.test(v)) return 'name';
  return 'other';
}

/** The kind of a call argument, by its name (the retail tools' argument names). */
function argumentKind(name: string): string {
  if (name === 'user_id') return 'user id';
  if (name === 'order_id') return 'order id';
  if (name === 'item_ids' || name === 'new_item_ids') return 'item id';
  if (name === 'product_id') return 'product id';
  if (name === 'payment_method_id') return 'payment method id';
  if (name === 'email') return 'email';
  if (name === 'first_name' || name === 'last_name') return 'name';
  if (name === 'zip') return 'zip';
  if (name === 'address1' || name === 'address2' || name === 'city' || name === 'state' || name === 'country') return 'address';
  return 'other';
}

/** Amounts as a reply writes them (a price, a total, a refund). */
const AMOUNT = /\d+\.\d{2}/g;

/**
 * The in-context probe: every Act turn of the expert's rows (held-out tasks, no mistakes), given the real
 * history. A value counts when the reference turn writes it and the history holds it (so it must be copied,
 * not known): each argument value of a reference call (one per list element), and each amount a reference
 * reply states. It is exact when the policy's turn calls the same tool with the same value in that argument
 * (the same list position), or its reply contains the amount.
 */
async function scoreInContext(complete: Complete, domain: Domain, tools: ToolDefinition[], rows: readonly Row[], actTokens: number): Promise<Record<string, { n: number; exact: number }>> {
  const acts = rows.filter((r) => r.role === 'act');
  const res = await complete(acts.map((r) => rowToExample(r, domain.policy, tools).prompt), actTokens);
  const out: Record<string, { n: number; exact: number }> = {};
  const count = (kind: string, hit: boolean) => {
    const g = (out[kind] ??= { n: 0, exact: 0 });
    g.n++;
    if (hit) g.exact++;
  };
  acts.forEach((r, i) => {
    const done = res[i];
    if (done === null) {
      count('(turns whose prompt does not fit the context: left out)', false);
      return;
    }
    const history = (r.messages as { content: string }[]).map((m) => m.content).join('\n');
    const want = parse(r.target);
    const got = parse(done.text);
    const call = want.calls[0];
    if (call) {
      const mine = got.calls.find((c) => c.name === call.name);
      for (const [k, v] of Object.entries(call.arguments)) {
        const values = Array.isArray(v) ? v : [v];
        values.forEach((x, j) => {
          if ((typeof x !== 'string' && typeof x !== 'number') || !history.includes(String(x))) return;
          const m = mine?.arguments[k];
          count(argumentKind(k), (Array.isArray(v) ? Array.isArray(m) && m[j] === x : m === x));
        });
      }
    } else for (const a of new Set(want.reply.match(AMOUNT) ?? [])) if (history.includes(a)) count('amount (in a reply)', got.calls.length === 0 && got.reply.includes(a));
  });
  return out;
}
