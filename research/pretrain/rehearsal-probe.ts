// Where greedy rehearsals break: every reference call of held-out tasks rehearsed as a rollout grounds it
// (the call's own real result among the examples when it fits the grounding budget), and for each rehearsal
// that is not exact, the first character where it leaves the real observation and what it wrote there:
//  - 'copied from elsewhere': the next characters it wrote stand somewhere in its prompt (an induction copy
//    that resumed at the wrong occurrence of a repeated key, e.g. the options of another item of the order);
//  - 'not in the prompt': they stand nowhere in it (written from what the policy learned of the world).
// A rehearsal that never closes within the budget and repeats a long stretch of itself is a loop.
// The answer separates "cannot copy reliably" (the real result was in the prompt) from "cannot know"
// (it was not), which call for different remedies.
import type { Task } from '../../src/env/domain';
import { formatObservation, serializeObservation } from '../../src/env/toolcall';
import type { Qwen3Model } from '../../src/model/qwen3';
import type { Tokenizer } from '../../src/model/tokenizer';
import { evalRehearsalFidelity, type FidelityEvalStep } from '../../src/rollout/fidelity-eval';
import type { RehearsePromptOptions } from '../../src/rollout/rehearse-prompt';
import type { RolloutDomain } from '../../src/rollout/rollout';

/** Characters of the output after the divergence looked up in the prompt. */
const LOOKUP_CHARS = 24;
/** A repeated stretch at least this long makes an unclosed rehearsal a loop. */
const LOOP_CHARS = 120;
/** Characters of the real observation and of the output kept from the divergence on. */
const SNIPPET_CHARS = 40;

export type Divergence = 'copied from elsewhere' | 'not in the prompt';

export interface RehearsalCallProbe {
  tool: string;
  /** The real observation stood in the prompt (as a grounding example or in the history). */
  resultInPrompt: boolean;
  parsed: boolean;
  exact: boolean;
  /** For rehearsals that are not exact: first differing character of the output, and what stood there. */
  divergeAt: number | null;
  divergence: Divergence | null;
  loop: boolean;
  /**
   * For rehearsals that are not exact: the key path in the real observation where the output left it
   * (`result.items[].price`; digit-only keys, such as a product's variants keyed by item id, read `#`), and
   * the next characters of the real observation and of the output from there. Absent in probes written before.
   */
  field?: string | null;
  want?: string;
  wrote?: string;
}

export interface RehearsalProbeGroup {
  calls: number;
  parsed: number;
  exact: number;
  /** Not exact, by what the output wrote where it left the real observation. */
  copiedFromElsewhere: number;
  notInPrompt: number;
  /** Did not parse because it repeated itself up to the budget. */
  loops: number;
}

export interface RehearsalProbe {
  tasks: number;
  maxRehearseTokens: number;
  rehearsePrompt: RehearsePromptOptions;
  /** Split by whether the real observation stood in the prompt. */
  resultInPrompt: RehearsalProbeGroup;
  resultNotInPrompt: RehearsalProbeGroup;
  byTool: Record<string, { inPrompt: RehearsalProbeGroup; notInPrompt: RehearsalProbeGroup }>;
  /** Rehearsals that are not exact, by `tool field` where they left the real observation, most first. */
  byField?: Record<string, number>;
  calls: RehearsalCallProbe[];
}

/** Whether some stretch of `minLen` characters occurs twice in `s` without overlapping (a rehearsal caught in a cycle). */
export function repeatsItself(s: string, minLen: number): boolean {
  // A loop of period p repeats every window; probing windows from the end finds it in O(n) lookups.
  for (let end = s.length; end - minLen >= 0; end -= Math.max(1, minLen >> 2)) {
    const w = s.slice(end - minLen, end);
    const first = s.indexOf(w);
    if (first >= 0 && first + minLen <= end - minLen) return true;
  }
  return false;
}

/**
 * The key path at character `at` of a formatted observation (`<execution_result>\n{json}\n…`): the keys and
 * arrays that enclose it, `(outside)` before the JSON opens or after it closes (exported for tests).
 */
export function jsonPathAt(s: string, at: number): string {
  type Frame = { arr: true } | { arr: false; key: string | null };
  const stack: Frame[] = [];
  let inString = false;
  let start = 0;
  let last = '';
  let opened = false;
  for (let j = 0; j < Math.min(at, s.length); j++) {
    const c = s[j];
    if (inString) {
      if (c === '\\') j++;
      else if (c === '"') {
        inString = false;
        last = s.slice(start, j);
      }
      continue;
    }
    if (!opened && c !== '{') continue;
    if (c === '"') {
      inString = true;
      start = j + 1;
    } else if (c === '{') {
      opened = true;
      stack.push({ arr: false, key: null });
    } else if (c === '[') stack.push({ arr: true });
    else if (c === '}' || c === ']') {
      stack.pop();
      if (stack.length === 0) return '(outside)';
    } else if (c === ':') {
      const top = stack[stack.length - 1];
      if (top && !top.arr) top.key = last;
    } else if (c === ',') {
      const top = stack[stack.length - 1];
      if (top && !top.arr) top.key = null;
    }
  }
  if (stack.length === 0) return '(outside)';
  return stack
    .map((f, i) => (f.arr ? '[]' : f.key === null ? (i === stack.length - 1 ? '.(key)' : '') : '.' + (/^\d+$/.test(f.key) ? '#' : f.key)))
    .join('')
    .replace(/^\./, '');
}

/** The probe of one rehearsal step (exported for tests). */
export function classifyStep(s: FidelityEvalStep, prompt: string): RehearsalCallProbe {
  const want = formatObservation(s.real);
  const resultInPrompt = prompt.includes(serializeObservation(s.real));
  const parsed = s.failure === null;
  const exact = s.fidelity.exact;
  let divergeAt: number | null = null;
  let divergence: Divergence | null = null;
  if (!exact) {
    let i = 0;
    while (i < s.text.length && i < want.length && s.text[i] === want[i]) i++;
    divergeAt = i;
    const next = s.text.slice(i, i + LOOKUP_CHARS);
    divergence = next.length > 0 && prompt.includes(next) ? 'copied from elsewhere' : 'not in the prompt';
  }
  const loop = s.failure === 'no-close-tag' && repeatsItself(s.text, LOOP_CHARS);
  if (divergeAt === null) return { tool: s.call.name, resultInPrompt, parsed, exact, divergeAt, divergence, loop };
  const field = jsonPathAt(want, divergeAt);
  return { tool: s.call.name, resultInPrompt, parsed, exact, divergeAt, divergence, loop, field, want: want.slice(divergeAt, divergeAt + SNIPPET_CHARS), wrote: s.text.slice(divergeAt, divergeAt + SNIPPET_CHARS) };
}

function group(calls: readonly RehearsalCallProbe[]): RehearsalProbeGroup {
  return {
    calls: calls.length,
    parsed: calls.filter((c) => c.parsed).length,
    exact: calls.filter((c) => c.exact).length,
    copiedFromElsewhere: calls.filter((c) => c.divergence === 'copied from elsewhere').length,
    notInPrompt: calls.filter((c) => c.divergence === 'not in the prompt').length,
    loops: calls.filter((c) => c.loop).length,
  };
}

export async function probeRehearsals(
  model: Qwen3Model,
  tok: Tokenizer,
  domain: RolloutDomain,
  tasks: readonly Task[],
  o: { maxRehearseTokens: number; rehearsePrompt?: RehearsePromptOptions; maxContext?: number },
): Promise<RehearsalProbe> {
  // The policy alone (free decoding, unless asked otherwise): the probe looks for where its rehearsals break.
  const rehearsePrompt: RehearsePromptOptions = { decoding: 'free', ...o.rehearsePrompt, excludeSameCall: false };
  const r = await evalRehearsalFidelity(model, tok, null, domain, tasks, { maxRehearseTokens: o.maxRehearseTokens, rehearsePrompt, maxContext: o.maxContext, keepPromptText: true });
  const calls = r.steps.map((s) => classifyStep(s, s.promptText ?? ''));
  const byTool: RehearsalProbe['byTool'] = {};
  for (const tool of [...new Set(calls.map((c) => c.tool))].sort())
    byTool[tool] = { inPrompt: group(calls.filter((c) => c.tool === tool && c.resultInPrompt)), notInPrompt: group(calls.filter((c) => c.tool === tool && !c.resultInPrompt)) };
  const fields = new Map<string, number>();
  for (const c of calls) if (c.field) fields.set(`${c.tool} ${c.field}`, (fields.get(`${c.tool} ${c.field}`) ?? 0) + 1);
  const byField = Object.fromEntries([...fields].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1)));
  return {
    tasks: tasks.length,
    maxRehearseTokens: o.maxRehearseTokens,
    rehearsePrompt,
    resultInPrompt: group(calls.filter((c) => c.resultInPrompt)),
    resultNotInPrompt: group(calls.filter((c) => !c.resultInPrompt)),
    byTool,
    byField,
    calls,
  };
}
