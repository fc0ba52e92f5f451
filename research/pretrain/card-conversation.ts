// The model card of a conversation policy (a folder whose last stage trained on --conversation-tasks rows and that
// keeps its conversation evaluations): what it is, the stages that made it (lineage.json: the earlier stages'
// commands and the records that hold them; pretrain.json: the last stage's full record), its figures with the
// scripted τ² user (the eval CLI's JSON, copied into the folder), its limits, licence and how to reproduce it. Like
// the other cards (card.ts) it is written from the folder's records by `npm run pretrain -- --card`, never by hand;
// the search that chose the recipe is in the research record it links (lineage.json `record`).
import type { ConversationReport } from '../../src/eval/conversation-eval';
import { bundledFolder, CONVERSATION_POLICY } from '../../src/env/retail/worlds';
import { CARD_LICENCE, modelTable, worldOf, wrap, type CardInputs } from './card';

/** One earlier stage: its command as run, and the research record (a repository path) that holds its record. */
export interface LineageStage {
  command: string;
  record: string;
  /** What became of the stage when it did not simply end (stopped early, a snapshot kept). */
  note?: string;
}

export interface ConversationCardInputs {
  run: CardInputs['run'];
  /** The earlier stages, oldest first, and the research record of the last stage (the recipe's search). */
  lineage: { start: string; stages: LineageStage[]; record: string };
  /** `npm run eval -- --user scripted --tasks test --count 100` (greedy): conversation.json. */
  greedy: { conversation: ConversationReport };
  /** The same with --samples 4 at temperature 1 (pass^k): conversation-k4.json. */
  sampled?: { conversation: ConversationReport };
  /** `--user model --user-fidelity`: user-fidelity.json. */
  fidelity?: { userFidelity: { turns: number; infoAndDecision: number; info: number; decision: number; stop: number } };
  /** The same tasks as one message (no user): onemsg.json. */
  oneMessage?: { success: number; tasks: number };
  commit: string;
  machine: string;
}

const pct = (x: number) => `${(100 * x).toFixed(1)} %`;

export function conversationCard(i: ConversationCardInputs, date: string): string {
  const { run } = i;
  const world = worldOf(run);
  const folder = `models/${bundledFolder(world, CONVERSATION_POLICY)}`;
  const g = i.greedy.conversation;
  const out: string[] = [];
  const para = (t: string, first = '') => out.push(...wrap(t, first));
  out.push(`# EnvACE Lab ${world} conversation policy (Qwen3 architecture, ${(run.params / 1e6).toFixed(2)} M parameters, trained from scratch)`, '');
  para(`A lesson policy of the lab's **${world}** world for conversations, loaded on request (the lab's model panel, which then steps rollouts with the scripted τ² user; or \`--model ${folder}\`): one tiny Qwen3-architecture model that holds a τ²-bench-style conversation — asks who the user is, looks up what the request needs, states a write's details and waits for the user's explicit yes before making it — that rehearses the environment, and that can play the user (the user role). With the scripted user it solves **${pct(g.success)}** of ${g.tasks} held-out tasks (greedy).`);
  out.push('');
  out.push('## Model', '', ...modelTable(run), '');
  out.push('## How it was made', '');
  para(`${i.lineage.stages.length + 1} stages from ${i.lineage.start}, each continuing from the weights its \`--init\` names: the stage before it, unless its note says otherwise. The one-message rows stay in every stage's mix beside the conversation expert's Act and Rehearse rows with the scripted user and the user-role rows. The last stage (${run.spec.steps} steps, ${(run.trainSeconds / 60).toFixed(1)} min at ${Math.round(run.tokensPerSecond)} tokens/s on ${i.machine}; ${run.data.tokens.total.toLocaleString('en-US')} tokens encoded, ${(run.data.rows.conversationAct ?? 0).toLocaleString('en-US')} conversation Act rows):`);
  out.push('', '```\n' + run.command + '\n```', '');
  para('The earlier stages, oldest first, each after a comment naming its record (an `--init` names a folder as the machine that trained it named it):');
  out.push('', '```\n' + i.lineage.stages.map((s, k) => `# ${k + 1}. ${s.record}${s.note ? ` (${s.note})` : ''}\n${s.command}`).join('\n') + '\n```', '');
  para(`The search that chose the last stage's recipe, its control runs and every evaluation: [${i.lineage.record.replace(/\/README\.md$/, '')}](../../${i.lineage.record}).`, '- ');
  out.push(`- Code: commit ${i.commit}.`, '');
  out.push('## Figures', '');
  const cmd = (extra: string) => `npm run eval -- --world ${world} ${extra}--tasks test --count ${g.tasks} --threads 1 --model ${folder}`;
  out.push('```\n' + [cmd('--user scripted '), ...(i.sampled ? [cmd('--user scripted --samples 4 ')] : []), ...(i.fidelity ? [cmd('--user model --user-fidelity ')] : []), ...(i.oneMessage ? [cmd('--fidelity-tokens 0 ')] : [])].join('\n') + '\n```', '');
  out.push('| with the scripted τ² user, held-out tasks | value |\n|---|---|');
  out.push(`| **success**, greedy (the database and every fact, no write before its yes) | **${pct(g.success)}** |`);
  out.push(`| success without the confirmation rule | ${pct(g.successWithoutRule)} |`);
  out.push(`| writes made (greedy) / of them without the user's yes to their details | ${g.writes} / ${g.unconfirmed.writes} |`);
  const tiers = Object.entries(g.byTier ?? {});
  if (tiers.length) out.push(`| solved per tier | ${tiers.map(([t, v]) => `${t} ${Math.round(v.success * v.tasks)} of ${v.tasks}`).join(', ')} |`);
  out.push(`| ends: the user's stop / the ${run.config.maxPositionEmbeddings}-token context / the turn cap | ${g.ends['user-stop'] ?? 0} / ${g.ends.context ?? 0} / ${g.ends['max-turns'] ?? 0} |`);
  out.push(`| agent turns per conversation | ${g.turns.agent.toFixed(1)} |`);
  if (i.sampled) out.push(`| pass^1 … pass^${i.sampled.conversation.passK.length}, ${i.sampled.conversation.samples} samples per task at temperature ${i.sampled.conversation.temperature} | ${i.sampled.conversation.passK.map((x) => x.toFixed(3)).join(' / ')} |`);
  if (i.fidelity) {
    const f = i.fidelity.userFidelity;
    out.push(`| as the user: the scripted user's information and decision, of ${f.turns} user turns | ${pct(f.infoAndDecision)} (information ${pct(f.info)}, decision ${pct(f.decision)}, stop ${pct(f.stop)}) |`);
  }
  if (i.oneMessage) out.push(`| the same tasks as one message (no user), success | ${pct(i.oneMessage.success)} |`);
  out.push('');
  out.push('## Limitations', '');
  para('Trained on one domain\'s scripted expert and scripted user: it knows their phrasing, nothing else; a person or another user simulator that words things differently is out of its distribution.', '- ');
  para('Most of what it solves is tier 1 (a lookup told to the user); writes that need items matched by their options (tier 3) are almost never right, and some writes are still made before the yes.', '- ');
  para(`A conversation that repeats its lookups runs out of the ${run.config.maxPositionEmbeddings}-token context (the ends above).`, '- ');
  out.push('');
  out.push('## Licence', '');
  para(CARD_LICENCE);
  out.push('');
  out.push('## Reproduce', '');
  para('The same seed on the same backend gives the same model.safetensors bytes: rerun each stage\'s command in order, each `--init` naming the previous stage\'s `--out`.', '- ');
  para('This card, from the folder\'s JSON records:', '- ');
  out.push('', '```\n' + `npm run pretrain -- --card --out ${folder} --commit ${i.commit} --date ${date} --write-committed` + '\n```', '');
  return out.join('\n');
}
