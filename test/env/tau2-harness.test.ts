// τ²-bench's reward against the lab's, conversation by conversation (issue 47, item 5). scripts/tau2-harness.sh
// ran τ²-bench's own CLI on its retail tasks with the lab's policy as the agent and the lab's model user as
// the user (docs/tau2-harness.md); each conversation of τ²'s results file is replayed here through the lab's
// verifier (src/env/reward.ts realReward: the agent's calls replayed on a fresh database against the replayed
// reference actions, facts in the agent's messages, 0 when the conversation did not end with a stop), and
// the reward must be τ²'s. Where the harness also wrote τ²'s own components without the termination gate
// (integrations/tau2/components.py), the database and facts verdicts must agree one by one too.
//
// No Python runs here: the committed record is checked on every run, and a fresh run with
//   TAU2_RESULTS=runs/tau2/results.json npx vitest run test/env/tau2-harness.test.ts
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { Step } from '../../src/env/domain';
import { loadRetailBase } from '../../src/env/retail/node';
import { retailDomain } from '../../src/env/retail/index';
import { realReward } from '../../src/env/reward';
import { loadTau2Tasks } from '../../src/env/tau2';

const ROOT = resolve(__dirname, '../..');
const RECORD = join(ROOT, 'research/records/2026-12-05-tau2-harness/results.json');
const file = process.env.TAU2_RESULTS ? resolve(process.env.TAU2_RESULTS) : RECORD;

interface Tau2Message {
  role: 'assistant' | 'user' | 'tool' | 'system';
  content?: string | null;
  tool_calls?: { name: string; arguments: Record<string, unknown> }[] | null;
}
interface Tau2Simulation {
  id: string;
  task_id: string;
  termination_reason: string;
  reward_info: { reward: number; db_check?: { db_reward: number } | null; communicate_checks?: { info: string; met: boolean }[] | null } | null;
  messages: Tau2Message[];
}
interface Component {
  simulation_id: string;
  db: number;
  communicate: number;
  missing_facts: string[];
}

/** The agent's side of a τ² conversation as lab steps: each text message a reply, each tool call a call. */
export function agentSteps(messages: readonly Tau2Message[], execute: (c: { name: string; arguments: Record<string, unknown> }) => Step & { kind: 'call' }): Step[] {
  return messages.flatMap((m): Step[] => {
    if (m.role !== 'assistant') return [];
    const out: Step[] = [];
    if (typeof m.content === 'string' && m.content.trim() !== '') out.push({ kind: 'reply', text: m.content });
    for (const c of m.tool_calls ?? []) out.push(execute({ name: c.name, arguments: c.arguments }));
    return out;
  });
}

describe.skipIf(!existsSync(file))(`τ²-bench's results against the lab's verifier (${file.startsWith(ROOT) ? file.slice(ROOT.length + 1) : file})`, () => {
  const results = JSON.parse(readFileSync(file, 'utf8')) as { tasks: unknown[]; simulations: Tau2Simulation[] };
  const domain = retailDomain(loadRetailBase(), 'retail');
  const tasks = new Map(loadTau2Tasks(results.tasks).map((t) => [t.id, t]));
  const compFile = join(dirname(file), 'components.json');
  const components = existsSync(compFile) ? new Map((JSON.parse(readFileSync(compFile, 'utf8')) as Component[]).map((c) => [c.simulation_id, c])) : null;

  const lab = results.simulations.map((s) => {
    const task = tasks.get(s.task_id)!;
    const env = domain.createEnv();
    const steps = agentSteps(s.messages, (call) => ({ kind: 'call', call, observation: env.execute(call) }));
    const terminated = !['agent_stop', 'user_stop'].includes(s.termination_reason);
    // The retail domain's realReward is this function over its environments (src/env/retail/index.ts).
    return { s, task, steps, reward: realReward(domain.createEnv, task, steps, { terminated }).reward, verdict: realReward(domain.createEnv, task, steps) };
  });

  it('holds at least 20 conversations on distinct τ² retail tasks, all of them tasks of the file', () => {
    expect(results.simulations.length).toBeGreaterThanOrEqual(20);
    expect(new Set(results.simulations.map((s) => s.task_id)).size).toBe(results.simulations.length);
    for (const s of results.simulations) expect(tasks.has(s.task_id), s.task_id).toBe(true);
  });

  it("gives every conversation τ²'s reward", () => {
    for (const { s, reward } of lab) expect(reward, `task ${s.task_id} (${s.termination_reason})`).toBe(s.reward_info?.reward ?? 0);
  });

  it.skipIf(!components)("agrees with τ²'s own database and facts verdicts on every conversation, termination aside", () => {
    for (const { s, verdict } of lab) {
      const c = components!.get(s.id)!;
      expect(c, `components of ${s.id}`).toBeDefined();
      expect(verdict.db, `task ${s.task_id}: database`).toBe(c.db);
      expect(verdict.communicate, `task ${s.task_id}: facts`).toBe(c.communicate);
      expect(verdict.missingFacts, `task ${s.task_id}: missing facts`).toEqual(c.missing_facts);
    }
  });
});
