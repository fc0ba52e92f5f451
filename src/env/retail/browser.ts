// Browser (and worker) loading of the retail database: fetch the text, keep it for the variant order
// (see registerVariantOrder), build the shared base. With Vite, the URL can come from
// `import dbUrl from '<root>/data/tau2-retail/db.json?url'`.

import type { BaseData } from '../store';
import { RetailDataError, retailBase } from './types';

export async function retailBaseFromUrl(url: string, init?: RequestInit): Promise<BaseData> {
  const res = await fetch(url, init);
  if (!res.ok) throw new RetailDataError(`retail db: HTTP ${res.status} for ${url}`);
  const text = await res.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    throw new RetailDataError(`retail db: not valid JSON (${(e as Error).message})`);
  }
  return retailBase(json, text);
}
