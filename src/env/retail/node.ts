// Node-only loading of the bundled retail data (the browser fetches the same files). The repo ships
// data/tau2-retail/; ../shared/data/tau2-retail (beside the clone, as in CI) is the fallback.

import { existsSync, readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { BaseData } from '../store';
import { worldDomain, type WorldName } from './index';
import { retailBase } from './types';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');

/** Absolute path of a file of the retail data folder, or null when neither copy exists. */
export function retailDataPath(file: string): string | null {
  for (const dir of [resolve(ROOT, 'data/tau2-retail'), resolve(ROOT, '../shared/data/tau2-retail')]) {
    const p = resolve(dir, file);
    if (existsSync(p)) return p;
  }
  return null;
}

let cached: BaseData | null = null;

/** The retail base database (parsed once per process; it is immutable and shared). */
export function loadRetailBase(path?: string): BaseData {
  if (!path && cached) return cached;
  const p = path ?? retailDataPath('db.json');
  if (!p) throw new Error('retail db.json not found in data/tau2-retail or ../shared/data/tau2-retail');
  const text = readFileSync(p, 'utf8');
  const base = retailBase(JSON.parse(text), text);
  if (!path) cached = base;
  return base;
}

/** The domain of a named world over the bundled retail data. */
export function loadWorldDomain(world: WorldName) {
  return worldDomain(world, loadRetailBase());
}
