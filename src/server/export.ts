// Dataset export for distributed trainers: tasks in the row layout of verl's RL datasets
// (RLHFDataset: data_source, prompt, ability, reward_model, extra_info; agent_name for the agent loop),
// rollouts of the lab's rollouts.jsonl in a flat, documented schema, and verl's tool-config YAML. Parquet
// is written by parquet-wasm (Apache Arrow's Rust implementation) from apache-arrow tables, with explicit
// column types so every file has the same schema; JSONL carries the same row objects.
//
// Task row (one per task):
//   data_source  string            "envace/<world>"
//   prompt       list<{role, content}>  the Act prompt's system message (the domain policy) and the user messages;
//                                   the tools come from the tool config (verl renders them into the system turn)
//   ability      string            "agent"
//   agent_name   string            "tool_agent" (verl's multi-turn agent loop) or "envace_agent" (integrations/verl)
//   reward_model {style: "rule", ground_truth: task id}  (the server holds the reward; see envace_verl/reward.py)
//   extra_info   {split, index, task_id, world, family, facts: list<string>,
//                 tools_kwargs: {<tool>: {create_kwargs: {task_id}}} for every tool,
//                 tools_json, reference_actions_json, checklist_json}   (JSON text: their arguments vary per tool)
// Rollout row (one per line of rollouts.jsonl):
//   data_source, task_id, rollout_id, prompt_id, step (int32), mode, end, reward (float64), turns (int32),
//   messages: list<{role, content}> (the Act system prompt, then the conversation as the policy saw it),
//   steps_json (the lab's steps), fidelity_exact (float64, mean exact-match of rehearsed calls; null without any).
import { Field, Float64, Int32, List, Struct, Table, Utf8, tableToIPC, vectorFromArray, type DataType } from 'apache-arrow';
import { Compression, Table as WasmTable, WriterPropertiesBuilder, writeParquet } from 'parquet-wasm';
import type { Domain, Task, ToolDefinition } from '../env/domain';

export interface TaskRow {
  data_source: string;
  prompt: { role: string; content: string }[];
  ability: string;
  agent_name: string;
  reward_model: { style: string; ground_truth: string };
  extra_info: {
    split: string;
    index: number;
    task_id: string;
    world: string;
    family: string | null;
    facts: string[];
    tools_kwargs: Record<string, { create_kwargs: { task_id: string } }>;
    tools_json: string;
    reference_actions_json: string;
    checklist_json: string;
  };
}

export interface RolloutRow {
  data_source: string;
  task_id: string;
  rollout_id: string;
  prompt_id: string;
  step: number;
  mode: string;
  end: string;
  reward: number;
  turns: number;
  messages: { role: string; content: string }[];
  steps_json: string;
  fidelity_exact: number | null;
}

const str = () => new Utf8();
const field = (name: string, type: DataType, nullable = false) => new Field(name, type, nullable);
const messageList = () => new List(field('item', new Struct([field('role', str()), field('content', str())])));

function taskType(toolNames: readonly string[]): Struct {
  const kw = new Struct(toolNames.map((n) => field(n, new Struct([field('create_kwargs', new Struct([field('task_id', str())]))]))));
  return new Struct([
    field('data_source', str()),
    field('prompt', messageList()),
    field('ability', str()),
    field('agent_name', str()),
    field('reward_model', new Struct([field('style', str()), field('ground_truth', str())])),
    field(
      'extra_info',
      new Struct([
        field('split', str()), field('index', new Int32()), field('task_id', str()), field('world', str()), field('family', str(), true),
        field('facts', new List(field('item', str()))), field('tools_kwargs', kw),
        field('tools_json', str()), field('reference_actions_json', str()), field('checklist_json', str()),
      ]),
    ),
  ]);
}

function rolloutType(): Struct {
  return new Struct([
    field('data_source', str()), field('task_id', str()), field('rollout_id', str()), field('prompt_id', str()), field('step', new Int32()),
    field('mode', str()), field('end', str()), field('reward', new Float64()), field('turns', new Int32()), field('messages', messageList()),
    field('steps_json', str()), field('fidelity_exact', new Float64(), true),
  ]);
}

export function taskRows(domain: Domain, world: string, tasks: readonly Task[], agentName = 'tool_agent'): TaskRow[] {
  const tools: ToolDefinition[] = domain.definitions();
  const names = tools.map((t) => t.function.name);
  const toolsJson = JSON.stringify(tools);
  return tasks.map((t, index) => ({
    data_source: `envace/${world}`,
    prompt: [{ role: 'system', content: domain.policy }, ...t.userMessages.map((content) => ({ role: 'user', content }))],
    ability: 'agent',
    agent_name: agentName,
    reward_model: { style: 'rule', ground_truth: t.id },
    extra_info: {
      split: t.split ?? 'train',
      index,
      task_id: t.id,
      world,
      family: t.family ?? null,
      facts: [...t.facts],
      tools_kwargs: Object.fromEntries(names.map((n) => [n, { create_kwargs: { task_id: t.id } }])),
      tools_json: toolsJson,
      reference_actions_json: JSON.stringify(t.referenceActions),
      checklist_json: JSON.stringify(t.checklist),
    },
  }));
}

/** A line of the lab's rollouts.jsonl (src/rl/run.ts) as a rollout row. */
export function rolloutRow(domain: Domain, world: string, line: Record<string, unknown>): RolloutRow {
  const fid = Array.isArray(line.fidelity) ? (line.fidelity as { exact?: unknown }[]) : [];
  const exact: number[] = fid.map((f) => (f.exact ? 1 : 0));
  const msgs = Array.isArray(line.messages) ? (line.messages as { role?: unknown; content?: unknown }[]) : [];
  return {
    data_source: `envace/${world}`,
    task_id: String(line.taskId ?? ''),
    rollout_id: String(line.rolloutId ?? ''),
    prompt_id: String(line.promptId ?? ''),
    step: Number.isInteger(line.step) ? (line.step as number) : 0,
    mode: String(line.mode ?? ''),
    end: String(line.end ?? ''),
    reward: typeof line.reward === 'number' ? line.reward : Number.NaN,
    turns: Number.isInteger(line.turns) ? (line.turns as number) : 0,
    messages: [{ role: 'system', content: domain.policy }, ...msgs.map((m) => ({ role: String(m.role), content: String(m.content) }))],
    steps_json: JSON.stringify(line.steps ?? []),
    fidelity_exact: exact.length ? exact.reduce((a, b) => a + b, 0) / exact.length : null,
  };
}

function toParquet(rows: readonly object[], type: Struct): Uint8Array {
  const vec = vectorFromArray(rows as never[], type);
  const table = new Table(Object.fromEntries(type.children.map((f, i) => [f.name, vec.getChildAt(i)!])));
  const wasm = WasmTable.fromIPCStream(tableToIPC(table, 'stream'));
  const props = new WriterPropertiesBuilder().setCompression(Compression.SNAPPY).setCreatedBy('envace-lab export (parquet-wasm)').build();
  return writeParquet(wasm, props);
}

export function taskParquet(domain: Domain, rows: readonly TaskRow[]): Uint8Array {
  return toParquet(rows, taskType(domain.definitions().map((t) => t.function.name)));
}

export function rolloutParquet(rows: readonly RolloutRow[]): Uint8Array {
  return toParquet(rows, rolloutType());
}

export function jsonl(rows: readonly object[]): string {
  return rows.map((r) => JSON.stringify(r) + '\n').join('');
}

// ---- verl tool config (YAML). A small emitter for JSON data: block mappings and sequences, every scalar as
// a JSON string/number/boolean/null (JSON scalars are valid YAML flow scalars).
function yaml(v: unknown, indent: string): string {
  if (Array.isArray(v)) {
    if (v.length === 0) return ' []';
    return v.map((x) => `\n${indent}-` + (x !== null && typeof x === 'object' && !Array.isArray(x) && Object.keys(x).length ? yaml(x, indent + '  ').replace(/^\n\s+/, ' ') : yaml(x, indent + '  '))).join('');
  }
  if (v !== null && typeof v === 'object') {
    const entries = Object.entries(v as Record<string, unknown>);
    if (entries.length === 0) return ' {}';
    return entries.map(([k, x]) => `\n${indent}${JSON.stringify(k)}:` + yaml(x, indent + '  ')).join('');
  }
  return ' ' + (JSON.stringify(v) ?? 'null');
}

export interface ToolConfigOptions {
  mode: 'real' | 'simulate';
  baseUrl: string;
  simulatorUrl?: string;
  simulatorModel?: string;
}

export function toolConfigYaml(domain: Domain, o: ToolConfigOptions): string {
  const config: Record<string, unknown> = { type: 'native', base_url: o.baseUrl, mode: o.mode };
  if (o.mode === 'simulate') Object.assign(config, { simulator_url: o.simulatorUrl ?? 'http://127.0.0.1:8000', simulator_model: o.simulatorModel ?? 'Qwen/Qwen3-8B', max_rehearse_tokens: 512, temperature: 1.0 });
  const tools = domain.definitions().map((d) => ({ class_name: 'envace_verl.tool.EnvaceTool', config, tool_schema: d }));
  return `# verl tool config for the EnvACE Lab ${domain.name} world (${o.mode} mode), written by npm run export -- --format tool-config\n# Every tool is envace_verl.tool.EnvaceTool; put integrations/verl on PYTHONPATH.\ntools:${yaml(tools, '  ')}\n`;
}
