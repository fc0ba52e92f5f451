// `npm run export`: tasks in verl's RL row layout written by parquet-wasm and read back by an
// independent reader (hyparquet, a pure-JS Parquet implementation) with every row equal to the JSONL
// export; rollouts of the lab's rollouts.jsonl; the committed verl tool configs equal a fresh export.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parquetMetadata, parquetReadObjects, parquetSchema } from 'hyparquet';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { exportMain } from '../../src/cli/export';
import type { Domain } from '../../src/env/domain';
import { loadWorldDomain } from '../../src/env/retail/node';
import { formatCall } from '../../src/env/toolcall';
import { Episode } from '../../src/rollout/episode';
import { toolConfigYaml } from '../../src/server/export';
import { captureIo } from '../helpers/cli';

let dir: string;
let domain: Domain;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'envace-export-'));
  domain = loadWorldDomain('mini');
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const readParquet = async (path: string) => {
  const b = readFileSync(path);
  const file = b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength) as ArrayBuffer;
  return { rows: await parquetReadObjects({ file }), meta: parquetMetadata(file) };
};
const readJsonl = (path: string) => readFileSync(path, 'utf8').trim().split('\n').map((l) => JSON.parse(l));

async function run(args: string[]): Promise<{ code: number; out: string; err: string }> {
  const io = captureIo();
  const code = await exportMain(args, io);
  return { code, out: io.stdout(), err: io.stderr() };
}

describe('npm run export', () => {
  it('names the agent loop of the rows: verl\'s tool_agent by default, envace_agent on request, nothing else', async () => {
    const jl = join(dir, 'agent.jsonl');
    expect((await run(['--split', 'test', '--format', 'jsonl', '--count', '2', '--out', jl])).code).toBe(0);
    expect(readJsonl(jl).map((r) => r.agent_name)).toEqual(['tool_agent', 'tool_agent']);
    expect((await run(['--split', 'test', '--format', 'jsonl', '--count', '2', '--agent-loop', 'envace_agent', '--out', jl])).code).toBe(0);
    expect(readJsonl(jl).map((r) => r.agent_name)).toEqual(['envace_agent', 'envace_agent']);
    const bad = await run(['--split', 'test', '--format', 'jsonl', '--agent-loop', 'mine', '--out', jl]);
    expect(bad.code).toBe(2);
    expect(bad.err).toMatch(/--agent-loop must be one of tool_agent, envace_agent/);
  });

  it('writes train tasks as Parquet that an independent reader reads back row for row', async () => {
    const pq = join(dir, 'train.parquet');
    const jl = join(dir, 'train.jsonl');
    expect((await run(['--split', 'train', '--format', 'parquet', '--count', '30', '--out', pq])).code).toBe(0);
    expect((await run(['--split', 'train', '--format', 'jsonl', '--count', '30', '--out', jl])).code).toBe(0);
    const { rows, meta } = await readParquet(pq);
    const want = readJsonl(jl);
    expect(rows.length).toBe(30);
    expect(rows).toEqual(want);
    // The layout verl's RLHFDataset reads, with the same tasks the server serves.
    const tasks = domain.tasks.generate({ split: 'train', count: 30, seed: 0 });
    expect(rows.map((r: any) => r.extra_info.task_id)).toEqual(tasks.map((t) => t.id));
    const r0 = rows[0] as any;
    expect(Object.keys(r0)).toEqual(['data_source', 'prompt', 'ability', 'agent_name', 'reward_model', 'extra_info']);
    expect(r0.prompt[0]).toEqual({ role: 'system', content: domain.policy });
    expect(r0.prompt.slice(1).map((m: any) => m.content)).toEqual(tasks[0].userMessages);
    expect(JSON.parse(r0.extra_info.reference_actions_json)).toEqual(tasks[0].referenceActions);
    expect(JSON.parse(r0.extra_info.checklist_json)).toEqual(tasks[0].checklist);
    expect(JSON.parse(r0.extra_info.tools_json)).toEqual(domain.definitions());
    expect(Object.keys(r0.extra_info.tools_kwargs).length).toBe(15);
    expect(r0.extra_info.tools_kwargs.get_order_details).toEqual({ create_kwargs: { task_id: tasks[0].id } });
    // Nested columns are standard Parquet LIST / struct groups (what pyarrow and datasets read).
    const prompt = parquetSchema(meta).children.find((c) => c.element.name === 'prompt')!;
    expect(prompt.element.converted_type).toBe('LIST');
    expect(meta.created_by).toMatch(/parquet-wasm/);
  });

  it('writes the test split with the server\'s test seed', async () => {
    const jl = join(dir, 'test.jsonl');
    expect((await run(['--split', 'test', '--format', 'jsonl', '--count', '5', '--task-seed', '3', '--out', jl])).code).toBe(0);
    expect(readJsonl(jl).map((r) => r.extra_info.task_id)).toEqual(domain.tasks.generate({ split: 'test', count: 5, seed: 4 }).map((t) => t.id));
  });

  it('exports the lab\'s rollouts.jsonl in the documented schema', async () => {
    const tasks = domain.tasks.generate({ split: 'train', count: 3, seed: 0 });
    const lines = tasks.map((task, i) => {
      const ep = new Episode(`${i}:${task.id}`, `${i}:${task.id}:0`, task, 'real', domain.createEnv(), [], 30);
      for (const c of task.referenceActions) ep.applyAct(formatCall(c));
      ep.applyAct('Done. ' + task.facts.join(' '));
      // As src/rl/run.ts appends them.
      return JSON.stringify({ step: i, promptId: ep.promptId, rolloutId: ep.rolloutId, taskId: task.id, mode: 'rehearse', end: ep.end, reward: i / 2, turns: ep.turns, steps: ep.steps, messages: ep.messages, fidelity: i === 0 ? [] : [{ turn: 0, call: 'x', exact: true, f1: 1, errorAgree: true }, { turn: 1, call: 'y', exact: false, f1: 0.5, errorAgree: true }], rehearseFailure: null });
    });
    const src = join(dir, 'rollouts.jsonl');
    writeFileSync(src, lines.join('\n') + '\n');
    const pq = join(dir, 'rollouts.parquet');
    const jl = join(dir, 'rollouts-out.jsonl');
    expect((await run(['--rollouts', src, '--format', 'parquet', '--out', pq])).code).toBe(0);
    expect((await run(['--rollouts', src, '--format', 'jsonl', '--out', jl])).code).toBe(0);
    const { rows } = await readParquet(pq);
    expect(rows).toEqual(readJsonl(jl));
    const r = rows as any[];
    expect(r.map((x) => x.fidelity_exact)).toEqual([null, 0.5, 0.5]);
    expect(r[1].messages[0]).toEqual({ role: 'system', content: domain.policy });
    expect(r[1].messages.length).toBe(1 + JSON.parse(lines[1]).messages.length);
    expect(JSON.parse(r[2].steps_json)).toEqual(JSON.parse(lines[2]).steps);
  });

  it('keeps the committed verl tool configs equal to a fresh export', () => {
    const cfg = resolve(__dirname, '../../integrations/verl/config');
    expect(readFileSync(join(cfg, 'envace_mini_tools_real.yaml'), 'utf8')).toBe(toolConfigYaml(domain, { mode: 'real', baseUrl: 'http://127.0.0.1:8765' }));
    expect(readFileSync(join(cfg, 'envace_mini_tools_simulate.yaml'), 'utf8')).toBe(toolConfigYaml(domain, { mode: 'simulate', baseUrl: 'http://127.0.0.1:8765' }));
  });

  it('fails with a usage error on bad flags', async () => {
    expect((await run(['--split', 'train'])).code).toBe(2);
    expect((await run(['--format', 'parquet'])).code).toBe(2);
    expect((await run(['--format', 'csv', '--split', 'train'])).code).toBe(2);
  });
});
