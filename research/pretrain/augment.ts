// Identity swap: a copy of a task's rows in which the values the policy must copy from the request (the
// user's names, email, zip, order numbers) are replaced, consistently across every prompt and response of
// the task, by random ones never seen anywhere else.
//
// Why: with 448 distinct users in 600 tasks, a small model lowers its loss faster by recalling plausible
// training-set values than by copying from the context; the first two bundled policies wrote well-formed
// calls with someone else's email or order number (0-2 % of calls ran without error, on train tasks too).
// Values that cannot be predicted from memory leave copying as the only way to the loss.
//
// What is swapped (found from the task's reference-action arguments that occur in its user messages):
//   - letter runs of first_name / last_name / the email's local part: Capitalised as whole words,
//     lower/UPPER case only inside identifiers (next to '.', '_', '@' or a digit: emails, user ids), so a
//     product colour that happens to equal a surname is left alone;
//   - every run of 4+ digits (order numbers, zip codes, the email's digits), bounded by non-digits.
// The rows stay internally consistent (the same new id everywhere), not consistent with the database:
// they teach copying, not facts.
import { Rng } from '../../src/util/rng';
import { escapeRegExp } from '../../src/util/regex';
import type { Task } from '../../src/env/domain';
import type { Encoded, Example } from './data';

const SYLLABLES = ['ka', 'lo', 'mi', 'ren', 'tu', 'sa', 'vo', 'ne', 'dri', 'po', 'shi', 'ga', 'lu', 'ber', 'to', 'zan', 'fi', 'mor', 'qui', 'el'];

function randomName(rng: Rng): string {
  const n = 2 + rng.int(2);
  let s = '';
  for (let i = 0; i < n; i++) s += SYLLABLES[rng.int(SYLLABLES.length)];
  return s;
}

function randomDigits(rng: Rng, like: string): string {
  let s = '';
  for (let i = 0; i < like.length; i++) s += i === 0 && like[0] !== '0' ? String(1 + rng.int(9)) : String(rng.int(10));
  return s;
}

const cap = (s: string) => s.charAt(0).toUpperCase() + s.slice(1).toLowerCase();
const esc = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** The names and long numbers of a task's request that its reference actions use (what must be copied). */
export function copyTargets(task: Pick<Task, 'userMessages' | 'referenceActions'>): { names: string[]; numbers: string[] } {
  const msg = task.userMessages.join('\n').toLowerCase();
  const names = new Set<string>();
  const numbers = new Set<string>();
  for (const a of task.referenceActions)
    for (const [k, v] of Object.entries(a.arguments)) {
      if (typeof v !== 'string' || !msg.includes(v.toLowerCase())) continue;
      for (const d of v.match(/[0-9]{4,}/g) ?? []) numbers.add(d);
      const letters = k === 'first_name' || k === 'last_name' ? v : k === 'email' ? v.split('@')[0] : '';
      for (const w of letters.match(/[A-Za-z]{3,}/g) ?? []) names.add(w.toLowerCase());
    }
  return { names: [...names], numbers: [...numbers] };
}

/**
 * The consistent replacement behind every identity swap: each name (lower case) and each long number gets a
 * fresh random value (names first, then numbers, in the order given: the draws from `rng`), and the returned
 * function rewrites a text with them — names Capitalised as whole words, lower/UPPER case only inside
 * identifiers (emails, user ids), numbers as whole digit runs. Null when there is nothing to swap.
 */
export function identitySwapper(targets: { names: readonly string[]; numbers: readonly string[] }, rng: Rng): ((s: string) => string) | null {
  const map = new Map<string, string>();
  const pats: string[] = [];
  for (const n of targets.names) {
    const m = randomName(rng);
    map.set(cap(n), cap(m));
    map.set(n, m);
    map.set(n.toUpperCase(), m.toUpperCase());
    pats.push(`\\b${esc(cap(n))}\\b`);
    for (const f of [n, n.toUpperCase()]) pats.push(`(?<=^|[^A-Za-z])${esc(f)}(?=[._@0-9])`, `(?<=[._@])${esc(f)}(?![A-Za-z])`);
  }
  for (const d of targets.numbers) {
    map.set(d, randomDigits(rng, d));
    pats.push(`(?<![0-9])${d}(?![0-9])`);
  }
  if (pats.length === 0) return null;
  // Longest first, so a number that contains another is replaced whole.
  pats.sort((a, b) => b.length - a.length);
  const re = new RegExp(pats.join('|'), 'g');
  return (s) => s.replace(re, (hit) => map.get(hit) ?? hit);
}

/** The task's examples with its copy targets swapped for fresh random values (seeded). */
export function swapIdentities(task: Pick<Task, 'userMessages' | 'referenceActions'>, examples: readonly Example[], rng: Rng): Example[] {
  const swap = identitySwapper(copyTargets(task), rng);
  if (!swap) return examples.map((e) => ({ ...e }));
  return examples.map((e) => ({ ...e, prompt: swap(e.prompt), response: swap(e.response) }));
}

/**
 * In place: the examples of each task whose seeded draw falls under `share` become their identity-swapped
 * twins (one draw per task in task order, then the swaps, all from `rng`). Returns how many tasks.
 */
export function swapTaskShare(tasks: readonly Task[], examples: Example[], share: number, rng: Rng): number {
  const byTask = new Map(tasks.map((t) => [t.id, t]));
  const swapped = new Set(tasks.filter(() => rng.next() < share).map((t) => t.id));
  const groups = new Map<string, number[]>();
  examples.forEach((e, i) => {
    const g = groups.get(e.taskId);
    if (g) g.push(i);
    else groups.set(e.taskId, [i]);
  });
  for (const [id, idx] of groups) {
    if (!swapped.has(id)) continue;
    const twin = swapIdentities(byTask.get(id)!, idx.map((i) => examples[i]), rng);
    idx.forEach((i, k) => (examples[i] = twin[k]));
  }
  return swapped.size;
}

/**
 * Synthetic copy drills: a user message with filler and a list of fresh ids, emails and names, and the
 * assistant repeating the list. Copying over a distance is the skill the domain rows need and reward too
 * rarely for a small model to find it (induction heads form fast on repeated random sequences); the
 * drills use the chat format and the kinds of values the tools take, so the skill transfers.
 */
export function copyDrills(n: number, rng: Rng, filler: readonly string[], o: { probeKinds?: boolean } = {}): Example[] {
  const value = (): string => {
    // probeKinds adds two kinds no training drill has, for the copy probe: user ids and amounts.
    const k = rng.int(o.probeKinds ? 7 : 5);
    if (k === 5) return `${randomName(rng)}_${randomName(rng)}_${randomDigits(rng, '1234')}`;
    if (k === 6) return `${randomDigits(rng, '1'.repeat(1 + rng.int(4)))}.${randomDigits(rng, '00')}`;
    if (k === 0) return `#W${randomDigits(rng, '1234567')}`;
    if (k === 1) return `${randomName(rng)}.${randomName(rng)}${randomDigits(rng, '1234')}@example.com`;
    if (k === 2) return `${cap(randomName(rng))} ${cap(randomName(rng))}`;
    if (k === 3) return randomDigits(rng, '12345');
    return randomDigits(rng, '1234567890');
  };
  const out: Example[] = [];
  for (let i = 0; i < n; i++) {
    const vals = Array.from({ length: 1 + rng.int(4) }, value);
    const pad = Array.from({ length: rng.int(6) }, () => filler[rng.int(filler.length)]).join(' ');
    const prompt = `<|im_start|>user\n${pad}${pad ? '\n' : ''}Please repeat exactly: ${vals.join(', ')}<|im_end|>\n<|im_start|>assistant\n`;
    out.push({ role: 'copy', taskId: `copy-${i}`, prompt, response: `${vals.join(', ')}<|im_end|>` });
  }
  return out;
}

/**
 * One step of text-span copies: sequences `eot span eot span` (spans of 20-60 tokens cut at random from
 * random encoded rows; shuffled by default, so memory of the data cannot predict them), loss on the second copy only (promptLen covers the first), packed up to
 * `maxTokens` tokens and `maxRows` rows. Pure induction: every copied token is predicted by the token
 * before it, the setting in which copy heads form fastest.
 */
export function spanCopies(rows: readonly Encoded[], maxTokens: number, maxRows: number, eot: number, rng: Rng, shuffle = true): Encoded[] {
  const out: Encoded[] = [];
  let used = 0;
  while (out.length < maxRows) {
    const src = rows[rng.int(rows.length)].ids;
    const len = Math.min(src.length, 20 + rng.int(41));
    if (used + 2 * len + 2 > maxTokens) break;
    const at = rng.int(src.length - len + 1);
    // Shuffled: the tokens are the data's, their order is not, so the second copy can only come from the first.
    const span = src.slice(at, at + len);
    for (let i = shuffle ? len - 1 : 0; i > 0; i--) {
      const j = rng.int(i + 1);
      [span[i], span[j]] = [span[j], span[i]];
    }
    const ids = new Int32Array(2 * len + 2);
    ids[0] = eot;
    ids.set(span, 1);
    ids[len + 1] = eot;
    ids.set(span, len + 2);
    out.push({ role: 'copy', ids, promptLen: len + 2 });
    used += ids.length;
  }
  return out;
}

const LONG_NUMBER = /(?<![0-9])[0-9]{4,}(?![0-9])/g;
const PRICE = /(?<![0-9.])[0-9]{1,4}\.[0-9]{1,2}(?![0-9])/g;

/**
 * A consistent value swap: every run of 4+ digits (order, item, product and user ids, zips, card digits) and
 * every price-like decimal becomes a random one of the same shape, the same hit always the same replacement
 * (across every text the returned function is applied to).
 */
function recordValueSwapper(rng: Rng): (s: string) => string {
  const map = new Map<string, string>();
  const fresh = (hit: string, make: () => string) => {
    let v = map.get(hit);
    if (v === undefined) map.set(hit, (v = make()));
    return v;
  };
  return (s) =>
    s
      .replace(LONG_NUMBER, (hit) => fresh(hit, () => randomDigits(rng, hit)))
      .replace(PRICE, (hit) => fresh(hit, () => { const [a, b] = hit.split('.'); return `${randomDigits(rng, a)}.${randomDigits(rng, b).replace(/^0/, '1')}`; }));
}

/**
 * A Rehearse row with the values of its records swapped (recordValueSwapper), in its prompt and its target
 * alike. The row stays internally consistent (a grounding example still matches the target) but no longer
 * agrees with the database, so a policy that writes a remembered record instead of the one its prompt shows
 * loses the loss: copying is the only way to it.
 */
export function swapRecordValues(e: Example, rng: Rng): Example {
  const swap = recordValueSwapper(rng);
  return { ...e, prompt: swap(e.prompt), response: swap(e.response) };
}

/**
 * Record-copy drills: a user message listing 2-3 records of one kind (the JSON an observation holds: orders,
 * products, users; their values swapped for random ones) and the assistant repeating one of them exactly.
 * The records share every key, so a copy that resumes after a repeated key at the wrong record goes wrong:
 * the long-copy skill a grounded rehearsal needs and a 4-layer policy loses on long records.
 * `groups`: records of the same kind (the bodies of observations, e.g. `{"result":{...}}`).
 */
export function recordCopies(n: number, rng: Rng, groups: readonly (readonly string[])[]): Example[] {
  const usable = groups.filter((g) => g.length >= 2);
  if (n > 0 && usable.length === 0) throw new Error('record copies need at least two records of one kind');
  const out: Example[] = [];
  for (let i = 0; i < n; i++) {
    const g = usable[rng.int(usable.length)];
    const k = Math.min(g.length, 2 + rng.int(2));
    const picked: string[] = [];
    while (picked.length < k) {
      const r = g[rng.int(g.length)];
      if (!picked.includes(r)) picked.push(r);
    }
    const recs = picked.map((r) => recordValueSwapper(rng)(r));
    const j = rng.int(k);
    const prompt = `<|im_start|>user\nRecords:\n${recs.map((r, x) => `${x + 1}. ${r}`).join('\n')}\nPlease repeat record ${j + 1} exactly.<|im_end|>\n<|im_start|>assistant\n`;
    out.push({ role: 'copy', taskId: `record-copy-${i}`, prompt, response: `${recs[j]}<|im_end|>` });
  }
  return out;
}

/** The first user turn of a chat prompt (the request), with its markers: what the short drills keep. */
export function requestTurn(prompt: string): string {
  const at = prompt.indexOf('<|im_start|>user\n');
  if (at < 0) throw new Error('a row without a user turn');
  return prompt.slice(at, prompt.indexOf('<|im_end|>', at) + '<|im_end|>'.length);
}

/** A stated value matched whole, as the stated-values pre-tokenizer matches it (src/model/bpe.ts). */
const wholeValue = (v: string) => new RegExp(`(?<![A-Za-z0-9])${escapeRegExp(v)}(?![A-Za-z0-9])`, 'g');

export interface ValueSwapSource {
  /** Act rows whose call spells, as a JSON string, the lexicon value `v` the conversation after the system turn (from `head`) states. */
  candidates: { e: Example; v: string; head: number }[];
  /** The values the calls spell (in retail: the two reasons). */
  stated: string[];
  /** The rest of the lexicon. */
  others: string[];
}

/** The rows stated-value swaps are drawn from (one scan, shared by the full twins and the short drills). */
export function valueSwapSource(examples: readonly Example[], lexicon: readonly string[]): ValueSwapSource {
  if (lexicon.length < 2) throw new Error('stated-value swaps need a lexicon of at least two values');
  const candidates: ValueSwapSource['candidates'] = [];
  for (const e of examples) {
    if (e.role !== 'act') continue;
    const end = e.prompt.indexOf('<|im_end|>'); // the system turn (policy and tools) ends at its first <|im_end|>
    const head = end < 0 ? 0 : end;
    for (const v of lexicon) {
      if (!e.response.includes(JSON.stringify(v))) continue;
      if (wholeValue(v).test(e.prompt.slice(head))) candidates.push({ e, v, head });
    }
  }
  if (candidates.length === 0) throw new Error('stated-value swaps: no Act row spells a value the user stated');
  const stated = [...new Set(candidates.map((c) => c.v))];
  const others = lexicon.filter((x) => !stated.includes(x));
  if (others.length === 0) throw new Error('stated-value swaps need lexicon values that no call spells');
  return { candidates, stated, others };
}

/**
 * Stated-value swaps: twins of Act rows whose call spells, as a JSON string, a value the user stated in the
 * conversation (in retail: a cancellation reason), with that value replaced by another value of the lexicon
 * wherever the conversation spells it — the request, the call, later observations — except in the system turn,
 * whose tool descriptions stay the domain's.
 *
 * Why: with two possible reasons a small policy lowers its loss as far as the marginal takes it (P(right)
 * 0.5 whatever the request says) and never forms the lookup (docs/lesson.md: no head attends to the request's
 * reason). With the lexicon's ~150 values in the reason's place only looking the value up lowers the loss, and
 * every lexicon value is one token of the stated-values tokenizer, as a reason is: the same one-token lookup.
 * The twins are consistent within themselves, not with the database (the call would be refused): they teach
 * reading, not facts. `n` twins are drawn with replacement from the rows that qualify (valueSwapSource).
 */
export function statedValueSwaps(src: ValueSwapSource, n: number, rng: Rng, o: { short?: boolean } = {}): Example[] {
  const { candidates, stated, others } = src;
  const out: Example[] = [];
  for (let i = 0; i < n; i++) {
    const { e, v, head } = candidates[rng.int(candidates.length)];
    // Half the twins state one of the values the calls really take (a real reason: kept or exchanged for the
    // other), half any other value of the lexicon. Without the first half the policy copies any value but
    // the two real reasons, for which its prior from the real rows (0.5 each) wins.
    const w = rng.next() < 0.5 ? stated[rng.int(stated.length)] : others[rng.int(others.length)];
    const re = wholeValue(v);
    if (o.short) {
      // The request alone (the first user turn) and the call: ~60 tokens instead of ~400, the same lookup.
      const request = requestTurn(e.prompt).replace(re, () => w);
      out.push({ role: 'copy', taskId: `${e.taskId}:swap-${i}`, prompt: `${request}\n<|im_start|>assistant\n`, response: e.response.replace(re, () => w) });
      continue;
    }
    out.push({
      ...e,
      taskId: `${e.taskId}:swap-${i}`,
      prompt: e.prompt.slice(0, head) + e.prompt.slice(head).replace(re, () => w),
      response: e.response.replace(re, () => w),
    });
  }
  return out;
}
