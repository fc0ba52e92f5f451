// node --import tsx research/scripts/item-probe.ts [--model DIR] [--count N] [--split train|test] [--out FILE] (--help lists every flag)
// Does the mini policy pick the variant the user asks for, and state what the change costs? On the scripted
// expert's episodes of N item-change tasks (exchanges and item modifications of the mini world; seed 1, the
// split of `npm run eval` or the lesson's training stream), two turns, each with the expert's history before it:
//   - the item call: the policy writes it greedily; counted are the calls that parse, the right order, the
//     right old items, the right new items (the variant matched by its options: the skill tier 3 lacks) and the
//     whole call as the reference; and, teacher-forced, the mean probability of the reference's new item ids
//     given the call up to them, after the history as it is and after the request alone;
//   - the reply after the real result: does the greedy reply state the price difference (the task's fact)?
import { writeFile } from 'node:fs/promises';
import { relative } from 'node:path';
import { checkOutput, enumFlag, HELP_FLAG, helpText, intFlag, isEntry, openBackend, openModel, parseFlags, processIo, runCli, strFlag, WRITE_COMMITTED_FLAG, type CliIo, type FlagSpec } from '../../src/cli/args';
import { loadWorldDomain } from '../../src/env/retail/node';
import { rowsFromEpisode } from '../../src/env/rows';
import { parse } from '../../src/env/toolcall';
import { generate, GREEDY } from '../../src/model/generate';
import { logprobs } from '../../src/model/score';
import { buildActPrompt } from '../../src/rollout/act-prompt';
import { recordCommand, recordPath } from '../../src/util/record-path';

export const ITEM_PROBE_USAGE = 'usage: node --import tsx research/scripts/item-probe.ts [--model DIR] [--count N] [--split train|test] [--out FILE]';

export const ITEM_PROBE_FLAGS: FlagSpec = {
  model: { type: 'string', arg: 'DIR', help: 'model folder (config.json, model.safetensors, tokenizer)', default: "the mini world's bundled policy (models/default)" },
  count: { type: 'string', arg: 'N', help: 'item-change tasks (exchanges, item modifications) to probe, 1..10000', default: '60' },
  split: { type: 'string', arg: 'S', help: 'test (the held-out split of npm run eval) or train (the lesson\'s training stream), seed 1', default: 'test' },
  out: { type: 'string', arg: 'FILE', help: 'also write the JSON record here', default: 'stdout only' },
  'write-committed': WRITE_COMMITTED_FLAG,
  help: HELP_FLAG,
};

const ITEM_TOOLS = ['exchange_delivered_order_items', 'modify_pending_order_items'];
const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);

export async function itemProbeCli(argv: readonly string[], io: CliIo = processIo): Promise<number> {
  return runCli(io, ITEM_PROBE_USAGE, () => main(argv, io));
}

async function main(argv: readonly string[], io: CliIo): Promise<void> {
  const values = parseFlags(argv, ITEM_PROBE_FLAGS);
  if (values.help) return void io.out(helpText(ITEM_PROBE_USAGE, ITEM_PROBE_FLAGS));
  const split = enumFlag(values, 'split', ['train', 'test'] as const, 'test');
  const count = intFlag(values, 'count', 60, 1, 10_000);
  const model = strFlag(values, 'model');
  const outNamed = strFlag(values, 'out');
  // A committed record (docs/…, models/…) is rewritten only with --write-committed.
  const out = outNamed === undefined ? undefined : checkOutput(outNamed, '--out', values);
  const domain = loadWorldDomain('mini');
  const tasks = domain.tasks
    .generate({ split, count: 30 * count, seed: 1 })
    .filter((t) => t.family === 'exchange' || t.family === 'modify_items')
    .slice(0, count);
  const backend = await openBackend('cpu-fast');
  const policy = await openModel(model, backend, { world: 'mini' });
  const tok = policy.tokenizer;
  const defs = domain.definitions();
  const n = { tasks: 0, twoItems: 0, parsed: 0, order: 0, oldItems: 0, newItems: 0, newItemsOneItem: 0, oneItem: 0, whole: 0, replyStatesDiff: 0 };
  let pNew = 0;
  let pNewBare = 0;
  let tooLong = 0;
  const examples: { task: string; want: unknown; got: string; perTokenP: { history: string; requestAlone: string }; reply: string; fact: string }[] = [];
  // log P of the new ids' tokens: prompt and call are encoded as the policy sees them (a prompt ends at a
  // special token, so the call's tokens are its own), and the tokens that spell the ids are found by offset.
  const idsLogprob = async (prompt: string, target: string): Promise<{ total: number; pieces: string[] }> => {
    const head = tok.encode(prompt);
    const call = tok.encode(target);
    const from = target.indexOf('"new_item_ids": [') + '"new_item_ids": ['.length;
    const to = target.indexOf(']', from);
    const [lp] = await logprobs(policy.model, [{ tokens: [...head, ...call], start: head.length }], { adapter: null });
    let at = 0, total = 0;
    const pieces: string[] = [];
    call.forEach((id, i) => {
      const piece = tok.decode([id]);
      if (at + piece.length > from && at < to) {
        total += lp[i];
        pieces.push(`${piece}:${Math.exp(lp[i]).toFixed(2)}`);
      }
      at += piece.length;
    });
    return { total, pieces };
  };
  try {
    for (const task of tasks) {
      const rows = rowsFromEpisode(task, domain.expert(task, domain.createEnv()).steps);
      const at = rows.findIndex((r) => r.role === 'act' && ITEM_TOOLS.some((t) => r.target.includes(`"${t}"`)));
      const reply = rows.slice(at + 1).find((r) => r.role === 'act');
      const ref = task.referenceActions.find((a) => ITEM_TOOLS.includes(a.name));
      if (at < 0 || !reply || !ref) continue;
      const row = rows[at];
      // A history with two product records can pass the context (2,048 tokens): such a task cannot be solved.
      if (tok.encode(buildActPrompt(domain.policy, defs, reply.messages)).length + 96 > policy.model.config.maxPositionEmbeddings) {
        tooLong++;
        continue;
      }
      const want = ref.arguments as { order_id: string; item_ids: string[]; new_item_ids: string[] };
      n.tasks++;
      const one = want.new_item_ids.length === 1;
      if (one) n.oneItem++;
      else n.twoItems++;
      const prompt = buildActPrompt(domain.policy, defs, row.messages);
      const [gen] = await generate(policy.model, tok, [{ prompt, maxNewTokens: 128, sampling: GREEDY }]);
      const call = parse(gen.text).calls[0];
      if (call) {
        n.parsed++;
        const a = call.arguments as Record<string, unknown>;
        if (a.order_id === want.order_id) n.order++;
        if (same(a.item_ids, want.item_ids)) n.oldItems++;
        if (same(a.new_item_ids, want.new_item_ids)) {
          n.newItems++;
          if (one) n.newItemsOneItem++;
        }
        if (call.name === ref.name && same(a, ref.arguments)) n.whole++;
      }
      // Teacher-forced: P(the new ids | the call up to them), after the history as it is and after the request
      // alone (the form of pretraining's --change-call-drills: is the catalogue known by heart, whatever the
      // full history does with it?).
      const bare = `<|im_start|>user\n${task.userMessages.join('\n')}<|im_end|>\n<|im_start|>assistant\n`;
      const inHistory = await idsLogprob(prompt, row.target);
      const afterRequest = await idsLogprob(bare, row.target);
      pNew += Math.exp(inHistory.total);
      pNewBare += Math.exp(afterRequest.total);
      const fact = task.facts[0];
      const [r] = await generate(policy.model, tok, [{ prompt: buildActPrompt(domain.policy, defs, reply.messages), maxNewTokens: 96, sampling: GREEDY }]);
      if (fact && r.text.includes(fact)) n.replyStatesDiff++;
      if (examples.length < 6) examples.push({ task: task.id, want: want.new_item_ids, got: gen.text, perTokenP: { history: inHistory.pieces.join(' '), requestAlone: afterRequest.pieces.join(' ') }, reply: r.text, fact });
    }
  } finally {
    policy.model.free();
    backend.dispose();
  }
  const record = {
    command: recordCommand(`node --import tsx research/scripts/item-probe.ts ${argv.join(' ')}`).trim(),
    model: recordPath(policy.dir),
    split,
    counts: n,
    tooLongForTheContext: tooLong,
    meanPNewItems: n.tasks ? pNew / n.tasks : 0,
    meanPNewItemsAfterTheRequestAlone: n.tasks ? pNewBare / n.tasks : 0,
    examples,
  };
  const text = JSON.stringify(record, null, 1) + '\n';
  if (out) await writeFile(out, text);
  io.out(text);
}

if (isEntry(import.meta.url)) process.exitCode = await itemProbeCli(process.argv.slice(2));
