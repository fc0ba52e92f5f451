// Item-change rows and reply-amount swaps: more of the two skills an item change needs and the data gives
// least of.
//
// Why: the mini policy writes exchange and item-modification calls with the right order and old items, but
// the right *new* item (the variant the request names by its options) in 2 of 37 held-out calls (P 5e-5,
// teacher-forced), and states the price difference from the call's result in 7 of 37 replies: "$7.73" for
// 7.69, "$96.55" for 96.17 (research/scripts/item-probe.ts). A compact world's catalogue is small (281 variants), so the
// first is a lookup the policy can learn — from the product record in its context, or by heart — but an item
// change is 1 task in 7 and its decisive tokens are ten digits of one call. The second is a copy of a number
// from the last observation that the real rows can also be predicted from the prices before it, roughly.
//
//   - changeRows: the Act rows around an item-changing call (the call, and the reply after its result), to add
//     more of them (from extra tasks) than the task mix gives;
//   - changeCallDrills: those calls cut to the request and the call (~100 tokens instead of ~1,500), the
//     lookup (request options -> item id) without the distance;
//   - amountSwaps: twins of reply rows that state an amount the last observation holds, with that number
//     replaced in the observation and the reply by a random one (the reply's wording kept), so only copying it
//     predicts the reply; `short` cuts them to the request, the last call, its result and the reply. The twins
//     agree with themselves, not with the database: they teach copying, not facts.
import { Rng } from '../../src/util/rng';
import { requestTurn } from './augment';
import type { Example } from './data';

const START_ASSISTANT = '<|im_start|>assistant\n';

/** Start of the prompt's last `n` turns (n = 1: the open assistant turn the response completes). */
function lastTurns(prompt: string, n: number): number {
  let at = prompt.length;
  for (let i = 0; i < n; i++) {
    at = prompt.lastIndexOf('<|im_start|>', at - 1);
    if (at < 0) throw new Error('change drills: a row with fewer turns than needed');
  }
  return at;
}

/**
 * The Act rows that write a call with `key` among its arguments, and the Act rows that reply (no call) right
 * after the result of such a call.
 */
export function changeRows(examples: readonly Example[], key = 'new_item_ids'): { calls: Example[]; replies: Example[] } {
  const calls: Example[] = [];
  const replies: Example[] = [];
  const k = `"${key}"`;
  for (const e of examples) {
    if (e.role !== 'act') continue;
    if (e.response.includes('<tool_call>')) {
      if (e.response.includes(k)) calls.push(e);
    } else {
      const lastCall = e.prompt.slice(lastTurns(e.prompt, 3));
      if (lastCall.startsWith(START_ASSISTANT) && lastCall.includes(k)) replies.push(e);
    }
  }
  return { calls, replies };
}

/**
 * `n` item-change calls cut to the request and the call, drawn with replacement: first the new items (each set
 * of them equally often, so a variant the task mix rarely asks for is drilled as often as a common one), then one
 * of the calls that ask for them.
 */
export function changeCallDrills(calls: readonly Example[], n: number, rng: Rng, key = 'new_item_ids'): Example[] {
  if (n > 0 && calls.length === 0) throw new Error('change-call drills: no Act row writes an item-changing call');
  const byTarget = new Map<string, Example[]>();
  const target = new RegExp(`"${key}": (\\[[^\\]]*\\])`);
  for (const e of calls) {
    const k = target.exec(e.response)?.[1] ?? '';
    const g = byTarget.get(k);
    if (g) g.push(e);
    else byTarget.set(k, [e]);
  }
  const groups = [...byTarget.values()];
  const out: Example[] = [];
  for (let i = 0; i < n; i++) {
    const g = groups[rng.int(groups.length)];
    const e = g[rng.int(g.length)];
    out.push({ role: 'copy', taskId: `${e.taskId}:call-${i}`, prompt: `${requestTurn(e.prompt)}\n${START_ASSISTANT}`, response: e.response });
  }
  return out;
}

// A JSON number in value position (after ':', ',' or '['), never the digits of a quoted id.
const JSON_NUMBER = /(?<=[:,[])-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?=[,}\]])/g;
const MONEY = /\$(\d+\.\d{2})(?!\d)/g;

/** The reply rows whose every stated amount is a number of the last observation (what a swap can move). */
export function amountSwapSource(examples: readonly Example[]): Example[] {
  return examples.filter((e) => {
    if (e.role !== 'act' || e.response.includes('<tool_call>')) return false;
    const amounts = [...e.response.matchAll(MONEY)].map((m) => m[1]);
    if (amounts.length === 0) return false;
    const obs = e.prompt.slice(lastTurns(e.prompt, 2));
    const held = new Set([...obs.matchAll(JSON_NUMBER)].map((m) => Math.abs(Number(m[0])).toFixed(2)));
    return amounts.every((a) => held.has(a));
  });
}

/** A random amount with as many integer digits as `like` (at least 1.00). */
function randomAmount(rng: Rng, like: string): string {
  const digits = like.split('.')[0].length;
  const lo = digits <= 1 ? 1 : 10 ** (digits - 1);
  const whole = lo + rng.int(10 ** digits - lo);
  return `${whole}.${String(rng.int(100)).padStart(2, '0')}`;
}

/**
 * `n` twins of the source rows with each stated amount replaced, in the last observation (every number that
 * rounds to it, its sign kept) and in the reply, by a random one. `short`: the request, the last call, its
 * result and the reply only.
 */
export function amountSwaps(source: readonly Example[], n: number, rng: Rng, o: { short?: boolean } = {}): Example[] {
  if (n > 0 && source.length === 0) throw new Error('amount swaps: no reply states an amount of the observation before it');
  const out: Example[] = [];
  for (let i = 0; i < n; i++) {
    const e = source[rng.int(source.length)];
    const map = new Map<string, string>();
    for (const m of e.response.matchAll(MONEY)) if (!map.has(m[1])) map.set(m[1], randomAmount(rng, m[1]));
    const cut = lastTurns(e.prompt, 2);
    const obs = e.prompt.slice(cut).replace(JSON_NUMBER, (x) => {
      const to = map.get(Math.abs(Number(x)).toFixed(2));
      return to === undefined ? x : (x.startsWith('-') ? '-' : '') + to;
    });
    const response = e.response.replace(MONEY, (all, a: string) => '$' + (map.get(a) ?? a));
    const head = o.short ? `${requestTurn(e.prompt)}\n${e.prompt.slice(lastTurns(e.prompt, 3), cut)}` : e.prompt.slice(0, cut);
    out.push({ role: o.short ? 'copy' : e.role, taskId: `${e.taskId}:amount-${i}`, prompt: head + obs, response });
  }
  return out;
}
