// node --import tsx research/scripts/reason-probe.ts [--model DIR] [--count N] [--attention-tasks N] [--split train|test] [--out FILE] (--help lists every flag)
// Does the mini policy read the cancellation reason from the request? Teacher-forced on the scripted expert's
// cancel turns of N training tasks (mini world), the policy scores the call it should write against the same
// call with the other reason; P(right) is the share of the two. Three contexts: the history as it is, the
// order record shortened to its status (less distance, less distraction), and the request alone (no
// distance at all), and two controls: the history as it is but the request spelling the reason as the call
// does, so that the tokenizer cuts the same bare value token out of both; and the request alone without the
// system turn (whose cancel tool description spells both reasons, a distractor for any lookup). And the lookup
// in general: another value of the lexicon (a product name, an option) in the reason's place, against a second. It also shows how the bundled tokenizer cuts the request and the call: a value the
// tokenizer fuses with the request's wording ("…, the reason is: ordered by mistake" as one token) is not
// the token the call needs, so the policy cannot copy it, only learn the pairing token by token.
// Where it looks: on the first --attention-tasks of them (history as it is), at the position that writes the
// reason, each head's attention mass on the tokens that spell a reason in the request, and on those that
// spell one in the constant tool block (its description lists both reasons), from a plain forward over the
// checkpoint (research/pretrain/attention-probe.ts PlainQwen3, tested against the engine).
import { writeFile } from 'node:fs/promises';
import { relative } from 'node:path';
import { checkOutput, enumFlag, HELP_FLAG, helpText, intFlag, isEntry, openBackend, openModel, parseFlags, processIo, runCli, strFlag, WRITE_COMMITTED_FLAG, type CliIo, type FlagSpec } from '../../src/cli/args';
import { loadWorldDomain } from '../../src/env/retail/node';
import { rowsFromEpisode } from '../../src/env/rows';
import { logprobs } from '../../src/model/score';
import { DirSource } from '../../src/model/source-node';
import { readHostWeights } from '../../src/model/weights';
import { PlainQwen3 } from '../pretrain/attention-probe';
import { buildActPrompt } from '../../src/rollout/act-prompt';
import type { ChatMessage } from '../../src/rollout/chat';
import { Rng } from '../../src/util/rng';
import { recordCommand, recordPath } from '../../src/util/record-path';

export const REASON_PROBE_USAGE = 'usage: node --import tsx research/scripts/reason-probe.ts [--model DIR] [--count N] [--attention-tasks N] [--split train|test] [--out FILE]';

export const REASON_PROBE_FLAGS: FlagSpec = {
  model: { type: 'string', arg: 'DIR', help: 'model folder (config.json, model.safetensors, tokenizer)', default: "the mini world's bundled policy (models/default)" },
  count: { type: 'string', arg: 'N', help: 'cancel tasks to probe, 1..10000', default: '60' },
  'attention-tasks': { type: 'string', arg: 'N', help: 'of them, how many to read attention on (history as it is), 0..10000', default: '20' },
  split: { type: 'string', arg: 'S', help: 'train (the lesson\'s GRPO stream, seed 1) or test (the held-out split of npm run eval)', default: 'train' },
  out: { type: 'string', arg: 'FILE', help: 'also write the JSON record here', default: 'stdout only' },
  'write-committed': WRITE_COMMITTED_FLAG,
  help: HELP_FLAG,
};

const REASONS = ['ordered by mistake', 'no longer needed'] as const;
const sum = (xs: readonly number[]) => xs.reduce((a, x) => a + x, 0);

export async function reasonProbeCli(argv: readonly string[], io: CliIo = processIo): Promise<number> {
  return runCli(io, REASON_PROBE_USAGE, () => main(argv, io));
}

async function main(argv: readonly string[], io: CliIo): Promise<void> {
  const values = parseFlags(argv, REASON_PROBE_FLAGS);
  if (values.help) return void io.out(helpText(REASON_PROBE_USAGE, REASON_PROBE_FLAGS));
  const split = enumFlag(values, 'split', ['train', 'test'] as const, 'train');
  const count = intFlag(values, 'count', 60, 1, 10_000);
  const attentionTasks = intFlag(values, 'attention-tasks', 20, 0, 10_000);
  const model = strFlag(values, 'model');
  const outNamed = strFlag(values, 'out');
  // A committed record (docs/…, models/…) is rewritten only with --write-committed.
  const out = outNamed === undefined ? undefined : checkOutput(outNamed, '--out', values);
  const domain = loadWorldDomain('mini');
  // Training tasks of seed 1 (the lesson's GRPO stream), or the held-out split of `npm run eval` (seed 1 as well).
  const tasks = domain.tasks.generate({ split, count: 40 * count, seed: 1 }).filter((t) => t.family === 'cancel').slice(0, count);
  const backend = await openBackend('cpu-fast');
  const policy = await openModel(model, backend, { world: 'mini' });
  const tok = policy.tokenizer;
  const defs = domain.definitions();
  const others = (domain.statedValues?.() ?? []).filter((v) => !(REASONS as readonly string[]).includes(v));
  const rng = new Rng(17);
  const contexts: Record<string, { tasks: number; greedyRight: number; meanPRight: number }> = {};
  const pieces = (s: string) => tok.encode(s).map((i) => tok.decode([i]));
  let example: { request: string[]; call: string[] } | null = null;
  const plain = attentionTasks > 0 ? await readHostWeights(new DirSource(policy.dir)).then(({ config, host }) => new PlainQwen3(config, host)) : null;
  const attention = { tasks: 0, heads: [] as { layer: number; head: number; request: number; toolBlock: number }[] };
  try {
    for (const task of tasks) {
      const row = rowsFromEpisode(task, domain.expert(task, domain.createEnv()).steps).find((r) => r.role === 'act' && r.target.includes('"cancel_pending_order"'));
      const asked = REASONS.find((x) => task.userMessages.join(' ').includes(x));
      if (!row || !asked || !row.target.includes(asked)) continue;
      example ??= { request: pieces(task.userMessages.join('\n')), call: pieces(row.target) };
      const history = row.messages;
      const shortened = history.map((m): ChatMessage => (m.role === 'tool' && m.content.includes('"items"') ? { ...m, content: m.content.replace(/"address".*?"status"/s, '"status"') } : m));
      const requestOnly = history.filter((m) => m.role === 'user');
      // The control: the same history, but the request spells the reason as the call does, so the tokenizer
      // cuts out the bare value token the call needs ({"reason": "ordered by mistake"}).
      const spelled = history.map((m): ChatMessage => (m.role === 'user' ? { ...m, content: m.content.replace(asked, `{"reason": "${asked}"}`) } : m));
      if (plain && attention.tasks < attentionTasks) {
        const text = buildActPrompt(domain.policy, defs, history) + row.target.slice(0, row.target.indexOf(asked));
        const ids = tok.encode(text);
        const m = reasonMass(plain, ids, ids.map((i) => tok.decode([i])), text);
        if (m) {
          m.forEach((h, i) => {
            const a = (attention.heads[i] ??= { layer: h.layer, head: h.head, request: 0, toolBlock: 0 });
            a.request = (a.request * attention.tasks + h.request) / (attention.tasks + 1);
            a.toolBlock = (a.toolBlock * attention.tasks + h.toolBlock) / (attention.tasks + 1);
          });
          attention.tasks++;
        }
      }
      const act = (msgs: readonly ChatMessage[]) => buildActPrompt(domain.policy, defs, msgs);
      // Without the system turn, whose cancel tool description spells both reasons: is the lookup there but
      // misled by the tool block's reasons?
      const bare = `<|im_start|>user\n${requestOnly.map((m) => m.content).join('\n')}<|im_end|>\n<|im_start|>assistant\n`;
      // The lookup in general: the history as it is, but the request states another value of the lexicon in the
      // reason's place (as pretraining's --value-swaps twins do); scored against a second such value.
      const [w, w2] = [0, 1].map(() => others[rng.int(others.length)]);
      const swapped = history.map((m): ChatMessage => (m.role === 'user' ? { ...m, content: m.content.replace(asked, w) } : m));
      const other = REASONS.find((r) => r !== asked)!;
      const cases: [string, string, string, string][] = [
        ['history as it is', act(history), asked, other],
        ['order record shortened to its status', act(shortened), asked, other],
        ['the request alone', act(requestOnly), asked, other],
        ['reason spelled as in the call', act(spelled), asked, other],
        ['the request alone, without the system turn', bare, asked, other],
      ];
      if (w !== w2) cases.push(['another lexicon value in the reason\'s place (against a second one)', act(swapped), w, w2]);
      for (const [name, text, good, bad] of cases) {
        const prompt = tok.encode(text);
        const [right, wrong] = await logprobs(policy.model, [good, bad].map((r) => ({ tokens: [...prompt, ...tok.encode(row.target.replace(asked, r))], start: prompt.length })), { adapter: null });
        const p = 1 / (1 + Math.exp(sum(wrong) - sum(right)));
        const c = (contexts[name] ??= { tasks: 0, greedyRight: 0, meanPRight: 0 });
        c.meanPRight = (c.meanPRight * c.tasks + p) / (c.tasks + 1);
        c.tasks++;
        if (p > 0.5) c.greedyRight++;
      }
    }
  } finally {
    policy.model.free();
    backend.dispose();
  }
  const fused: string[] = [];
  for (let id = 0; id < tok.size; id++) {
    const t = tok.decode([id]);
    if (REASONS.some((r) => t.includes(r)) && !(REASONS as readonly string[]).includes(t)) fused.push(t);
  }
  const record = {
    command: recordCommand(`node --import tsx research/scripts/reason-probe.ts ${argv.join(' ')}`).trim(),
    model: recordPath(policy.dir), contexts, example, attentionAtTheReason: attention,
    tokensFusingAReason: { count: fused.length, shortest: fused.sort((a, b) => a.length - b.length).slice(0, 12) },
  };
  const text = JSON.stringify(record, null, 1) + '\n';
  if (out) await writeFile(out, text);
  io.out(text);
}

/**
 * Per head, the attention mass of the last position (the one that writes the reason) on the tokens that
 * spell a reason (any part of one) in the user turns and in the text before them (the tool block); null when
 * the decoded pieces do not line up with the text (multi-byte characters cut between tokens).
 */
function reasonMass(model: PlainQwen3, ids: number[], pieces: string[], text: string): { layer: number; head: number; request: number; toolBlock: number }[] | null {
  const userStart = text.indexOf('<|im_start|>user');
  if (pieces.join('') !== text || userStart < 0) return null;
  const spans: [number, number][] = [];
  for (const r of REASONS) for (let i = text.indexOf(r); i >= 0; i = text.indexOf(r, i + 1)) spans.push([i, i + r.length]);
  const where: ('request' | 'toolBlock' | null)[] = [];
  let at = 0;
  for (const p of pieces) {
    const hit = spans.find(([a, b]) => at < b && at + p.length > a);
    where.push(hit ? (hit[0] >= userStart ? 'request' : 'toolBlock') : null);
    at += p.length;
  }
  if (!where.includes('request')) return null;
  const { probs } = model.forward(ids);
  const last = ids.length - 1;
  return probs.flatMap((layer, l) =>
    layer.map((rows, h) => {
      let request = 0, toolBlock = 0;
      rows[last].forEach((p, j) => {
        if (where[j] === 'request') request += p;
        else if (where[j] === 'toolBlock') toolBlock += p;
      });
      return { layer: l, head: h, request, toolBlock };
    }),
  );
}

if (isEntry(import.meta.url)) process.exitCode = await reasonProbeCli(process.argv.slice(2));
