// The fields of an observation, as rehearsal fidelity counts them (src/rollout/fidelity.ts) and as the page's
// observation view shows them (./observation-diff.ts). One flattening for both, in the method layer, so the
// field F1 a student reads beside the fields is the one training and evaluation measure.
// - canonical: JSON text for equality (keys sorted; null-valued keys dropped, because the retail records
//   treat an absent optional field and a null one as the same thing).
// - leaves: objects by key, arrays by index; an empty object/array is itself a leaf (so {} vs {"a":1} is
//   not a perfect match). Keys are JSON-quoted so paths cannot collide.

/** Parsed JSON (what tool results and rehearsed results are). */
export type JsonValue = null | boolean | number | string | JsonValue[] | { [k: string]: JsonValue };

function dropNulls(v: JsonValue): JsonValue {
  if (Array.isArray(v)) return v.map(dropNulls);
  if (v !== null && typeof v === 'object') {
    const o: { [k: string]: JsonValue } = {};
    for (const [k, x] of Object.entries(v)) if (x !== null) o[k] = dropNulls(x);
    return o;
  }
  return v;
}

/** Canonical text of a JSON value for equality: sorted keys, no whitespace, null-valued keys dropped. */
export function canonical(v: JsonValue): string {
  const c = (x: JsonValue): string => {
    if (Array.isArray(x)) return '[' + x.map(c).join(',') + ']';
    if (x !== null && typeof x === 'object') {
      return '{' + Object.keys(x).sort().map((k) => JSON.stringify(k) + ':' + c(x[k])).join(',') + '}';
    }
    // -0 and 0 are the same amount.
    return typeof x === 'number' && x === 0 ? '0' : JSON.stringify(x);
  };
  return c(dropNulls(v));
}

/** One leaf: where it is (as a path string and as keys/indices) and its canonical value text. */
export interface Leaf {
  /** `$."result"."items"[0]`: the path the F1 counts by. */
  path: string;
  /** The same path as keys and array indices, for a viewer to lay it out. */
  at: (string | number)[];
  /** Canonical text of the value; `[]` / `{}` for an empty container. */
  value: string;
}

export function leaves(v: JsonValue, path = '$', at: (string | number)[] = [], out: Leaf[] = []): Leaf[] {
  if (Array.isArray(v)) {
    if (v.length === 0) out.push({ path, at, value: '[]' });
    v.forEach((x, i) => leaves(x, `${path}[${i}]`, [...at, i], out));
  } else if (v !== null && typeof v === 'object') {
    const keys = Object.keys(v).filter((k) => v[k] !== null);
    if (keys.length === 0) out.push({ path, at, value: '{}' });
    for (const k of keys) leaves(v[k], path + '.' + JSON.stringify(k), [...at, k], out);
  } else {
    out.push({ path, at, value: canonical(v) });
  }
  return out;
}

/** Leaves as "path=value" strings: the units field-level F1 counts. */
export function flattenLeaves(v: JsonValue): string[] {
  return leaves(v).map((l) => `${l.path}=${l.value}`);
}

/** Multiset F1 between two leaf lists; two empty lists agree perfectly. */
export function leafF1(pred: readonly string[], real: readonly string[]): number {
  if (pred.length === 0 && real.length === 0) return 1;
  const counts = new Map<string, number>();
  for (const s of real) counts.set(s, (counts.get(s) ?? 0) + 1);
  let hit = 0;
  for (const s of pred) {
    const n = counts.get(s) ?? 0;
    if (n > 0) {
      hit++;
      counts.set(s, n - 1);
    }
  }
  if (hit === 0) return 0;
  const p = hit / pred.length;
  const r = hit / real.length;
  return (2 * p * r) / (p + r);
}

/** Is this observation JSON an error ({"error": …}) rather than a result? */
export function isErrorJson(v: JsonValue): boolean {
  return v !== null && typeof v === 'object' && !Array.isArray(v) && 'error' in v;
}
