// JSON helpers shared by every domain: canonical serialisation + hashing (database equality), a
// Python-compatible writer (byte parity with τ²-bench traces), Python float formatting and rounding,
// and deep freezing. Pure functions, no Node or DOM APIs, so they run in the browser and in workers.

export type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

/**
 * JS objects list integer-like keys ("1151293680") first, in numeric order, whatever the source order.
 * Maps keyed by such ids (product variants) would then serialise in a different order from upstream's;
 * a loader that knows the source order registers it here, and the writers below follow it.
 */
const keyOrders = new WeakMap<object, readonly string[]>();

export function registerKeyOrder(obj: object, keys: readonly string[]): void {
  keyOrders.set(obj, keys);
}

export function orderedKeys(o: object): string[] {
  const k = keyOrders.get(o);
  return k ? [...k] : Object.keys(o);
}

/** Compact JSON (no whitespace) in source key order: what observations look like to the policy. */
export function compactJson(v: unknown): string {
  if (v === null || v === undefined) return 'null';
  if (typeof v === 'object') {
    if (Array.isArray(v)) return '[' + v.map(compactJson).join(',') + ']';
    const o = v as Record<string, unknown>;
    return '{' + orderedKeys(o).map((k) => JSON.stringify(k) + ':' + compactJson(o[k])).join(',') + '}';
  }
  if (typeof v === 'number') return Number.isFinite(v) ? String(v) : 'null';
  return JSON.stringify(v) ?? 'null';
}

/**
 * Canonical JSON: object keys sorted by code unit, no whitespace, absent vs null kept distinct by the caller.
 * Iterative (an explicit stack), so untrusted values nested thousands deep cannot overflow the call stack.
 */
export function canonicalJson(v: unknown): string {
  const out: string[] = [];
  // Work items: a value still to write, or literal text (brackets, commas, keys) already decided.
  const stack: ({ v: unknown } | string)[] = [{ v }];
  while (stack.length) {
    const item = stack.pop()!;
    if (typeof item === 'string') {
      out.push(item);
      continue;
    }
    const x = item.v;
    if (x === null || x === undefined) {
      out.push('null');
      continue;
    }
    switch (typeof x) {
      case 'number':
        // -0 and 0 compare equal in every domain rule, so they must hash the same.
        out.push(Number.isFinite(x) ? String(x === 0 ? 0 : x) : 'null');
        break;
      case 'boolean':
        out.push(x ? 'true' : 'false');
        break;
      case 'string':
        out.push(JSON.stringify(x));
        break;
      case 'object': {
        if (Array.isArray(x)) {
          out.push('[');
          stack.push(']');
          for (let i = x.length - 1; i >= 0; i--) {
            stack.push({ v: x[i] });
            if (i > 0) stack.push(',');
          }
          break;
        }
        const o = x as Record<string, unknown>;
        const keys = Object.keys(o).sort();
        out.push('{');
        stack.push('}');
        for (let i = keys.length - 1; i >= 0; i--) {
          stack.push({ v: o[keys[i]] });
          stack.push((i > 0 ? ',' : '') + JSON.stringify(keys[i]) + ':');
        }
        break;
      }
      default:
        out.push('null');
    }
  }
  return out.join('');
}

/**
 * 64-bit non-cryptographic hash of a string, as 16 hex digits: two independent 32-bit multiply-xorshift
 * lanes over UTF-16 code units. Database equality only needs collision resistance against accidents,
 * and this stays synchronous (crypto.subtle is async) and fast on megabytes of records.
 */
export function hash64(s: string, seed = 0): string {
  let h1 = 0xdeadbeef ^ seed;
  let h2 = 0x41c6ce57 ^ seed;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    h1 = Math.imul(h1 ^ c, 2654435761);
    h2 = Math.imul(h2 ^ c, 1597334677);
  }
  h1 = Math.imul(h1 ^ (h1 >>> 16), 2246822507) ^ Math.imul(h2 ^ (h2 >>> 13), 3266489909);
  h2 = Math.imul(h2 ^ (h2 >>> 16), 2246822507) ^ Math.imul(h1 ^ (h1 >>> 13), 3266489909);
  h1 ^= s.length;
  return (h1 >>> 0).toString(16).padStart(8, '0') + (h2 >>> 0).toString(16).padStart(8, '0');
}

/** Recursively freezes plain data so shared records cannot be corrupted through a returned reference. */
export function deepFreeze<T>(v: T): T {
  if (v !== null && typeof v === 'object' && !Object.isFrozen(v)) {
    Object.freeze(v);
    for (const k of Object.keys(v)) deepFreeze((v as Record<string, unknown>)[k]);
  }
  return v;
}

/** A mutable deep copy of plain JSON data (records are frozen; tools edit copies). */
export function cloneJson<T>(v: T): T {
  return structuredClone(v) as T;
}

/**
 * Python's round(x, 2) on a double. toFixed picks the larger candidate on an exact tie, Python picks the
 * even one; an exact binary tie at 2 decimals means x·100 = k + 1/2 exactly, i.e. x·8 is an odd integer.
 */
export function pyRound2(x: number): number {
  if (!Number.isFinite(x) || Math.abs(x) >= 1e15) return x;
  const x8 = x * 8;
  if (Number.isInteger(x8) && Math.abs(x8) % 2 === 1) {
    const lo = Math.floor(x * 100);
    const k = lo % 2 === 0 ? lo : lo + 1;
    return k / 100;
  }
  const r = Number(x.toFixed(2));
  // Python keeps the sign of a value that rounds to zero (round(-0.001, 2) == -0.0).
  return r === 0 && (x < 0 || Object.is(x, -0)) ? -0 : r;
}

/** Python's repr(float): shortest round-trip digits, always a '.' or exponent, exponent form below 1e-4 or from 1e16. */
export function pyFloatRepr(x: number): string {
  if (Number.isNaN(x)) return 'nan';
  if (x === Infinity) return 'inf';
  if (x === -Infinity) return '-inf';
  if (x === 0) return Object.is(x, -0) ? '-0.0' : '0.0';
  const [mant, expStr] = x.toExponential().split('e');
  const exp = Number(expStr);
  if (exp < -4 || exp >= 16) {
    // Python writes 1e+16, 1.5e-05: explicit sign, at least two exponent digits.
    const sign = exp < 0 ? '-' : '+';
    return mant + 'e' + sign + String(Math.abs(exp)).padStart(2, '0');
  }
  const s = String(x);
  return s.includes('.') ? s : s + '.0';
}

/** A Python str that json.dumps(ensure_ascii=True) would write. */
function pyString(s: string): string {
  let out = '"';
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c === 0x22) out += '\\"';
    else if (c === 0x5c) out += '\\\\';
    else if (c === 0x0a) out += '\\n';
    else if (c === 0x0d) out += '\\r';
    else if (c === 0x09) out += '\\t';
    else if (c === 0x08) out += '\\b';
    else if (c === 0x0c) out += '\\f';
    else if (c < 0x20 || c > 0x7e) out += '\\u' + c.toString(16).padStart(4, '0');
    else out += s[i];
  }
  return out + '"';
}

/**
 * json.dumps as Python writes it (", " and ": " separators, ensure_ascii, insertion key order). JS has
 * one number type, so fields that the upstream models type as float are named in floatKeys and always
 * written with a decimal point (51.0); every other number is written as an int when it is integral.
 */
export function pyJson(v: unknown, floatKeys: ReadonlySet<string> = new Set(), key = ''): string {
  if (v === null || v === undefined) return 'null';
  switch (typeof v) {
    case 'number':
      if (floatKeys.has(key) || !Number.isInteger(v)) {
        if (Number.isNaN(v)) return 'NaN';
        if (!Number.isFinite(v)) return v > 0 ? 'Infinity' : '-Infinity';
        return pyFloatRepr(v);
      }
      return String(v);
    case 'boolean':
      return v ? 'true' : 'false';
    case 'string':
      return pyString(v);
    case 'object': {
      if (Array.isArray(v)) return '[' + v.map((x) => pyJson(x, floatKeys, key)).join(', ') + ']';
      const o = v as Record<string, unknown>;
      return '{' + orderedKeys(o).map((k) => pyString(k) + ': ' + pyJson(o[k], floatKeys, k)).join(', ') + '}';
    }
    default:
      return 'null';
  }
}
