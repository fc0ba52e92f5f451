// The checkpoint's schema of run.json's config, derived from the run settings' table (src/method/run-config.ts):
// each recorded row becomes a field at its path, typed by its kind; a row every run.json has is required, the
// others optional (older runs lack them and read as the default). Unknown keys pass through, so that a run
// written by a newer version with extra settings still opens.
import { z } from 'zod';
import { RUN_SETTINGS, type RunSetting, type RunSettingsTable } from '../method/run-config';
import type { Aggregation as TrainAggregation } from '../train/batch';
import type { LoraTarget } from '../model/lora';
import type { Aggregation, RunValues } from '../method/run-config';

// The table restates two enumerations of layers below the page; these fail to compile when they drift apart.
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const aggregationsAgree: Same<Aggregation, TrainAggregation> = true;
const targetsAgree: Same<RunValues['loraTargets'][number], LoraTarget> = true;
void aggregationsAgree;
void targetsAgree;

function fieldOf(row: RunSetting): z.ZodType {
  const k = row.kind;
  switch (k.type) {
    case 'bool':
      return z.boolean();
    case 'enum':
      // A recorded value may be one the row's own choices map to (the grouping a mode forces).
      return z.enum((row.name === 'groups' ? [...k.values, 'standard'] : k.values) as [string, ...string[]]);
    case 'list':
      return z.array(z.enum(k.values as [string, ...string[]]));
    case 'int':
      return z.number().int().min(k.min).max(k.max);
    case 'number': {
      const n = z.number().finite();
      const low = k.above ? n.gt(k.min) : n.min(k.min);
      return k.max !== undefined ? low.max(k.max) : low;
    }
  }
}

interface Node {
  fields: Map<string, Node | z.ZodType>;
  required: boolean;
}

/** run.json's config schema of a table (strict on what a run reads back: a wrong type once hung a resume). */
export function configSchema(table: RunSettingsTable = RUN_SETTINGS): z.ZodType<Record<string, unknown>> {
  const root: Node = { fields: new Map(), required: true };
  for (const row of table) {
    if (!row.record) continue;
    const path = (row.record.at ?? row.name).split('.');
    const required = row.record.when === 'required';
    let node = root;
    for (const key of path.slice(0, -1)) {
      let next = node.fields.get(key) as Node | undefined;
      if (!next) node.fields.set(key, (next = { fields: new Map(), required: false }));
      // A group is required when any of its fields is (limits, lora).
      next.required ||= required;
      node = next;
    }
    const f = fieldOf(row);
    node.fields.set(path[path.length - 1], required ? f : f.optional());
  }
  const build = (n: Node): z.ZodType<Record<string, unknown>> =>
    z.looseObject(Object.fromEntries([...n.fields].map(([k, v]) => [k, 'fields' in v ? (v.required ? build(v) : build(v).optional()) : v])));
  return build(root);
}
