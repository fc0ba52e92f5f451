// Validation of untrusted tool arguments against the JSON-schema subset in domain.ts. It walks only the
// schema (never the value's prototype chain), rejects unknown keys (including "__proto__" and
// "constructor", which JSON.parse creates as own properties), and reports the first problem as a short
// message the policy can read. Depth is bounded by the schema, so hostile nesting cannot recurse deeply.

import type { JsonSchema } from './domain';

/** Default cap on any string argument when the schema gives none (ids and addresses are short). */
export const DEFAULT_MAX_STRING = 1000;
export const DEFAULT_MAX_ITEMS = 50;

function typeName(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  if (typeof v === 'number') return Number.isInteger(v) ? 'integer' : 'number';
  return typeof v;
}

function check(schema: JsonSchema, v: unknown, path: string): string | null {
  const at = path || 'arguments';
  switch (schema.type) {
    case 'string': {
      if (typeof v !== 'string') return `${at} must be a string, got ${typeName(v)}`;
      const max = schema.maxLength ?? DEFAULT_MAX_STRING;
      if (v.length > max) return `${at} is too long (${v.length} > ${max} characters)`;
      if (schema.enum && !schema.enum.includes(v)) return `${at} must be one of ${schema.enum.join(', ')}`;
      return null;
    }
    case 'number':
      return typeof v === 'number' && Number.isFinite(v) ? null : `${at} must be a number, got ${typeName(v)}`;
    case 'integer':
      return Number.isInteger(v) ? null : `${at} must be an integer, got ${typeName(v)}`;
    case 'boolean':
      return typeof v === 'boolean' ? null : `${at} must be a boolean, got ${typeName(v)}`;
    case 'array': {
      if (!Array.isArray(v)) return `${at} must be an array, got ${typeName(v)}`;
      const max = schema.maxItems ?? DEFAULT_MAX_ITEMS;
      if (v.length > max) return `${at} has too many items (${v.length} > ${max})`;
      if (schema.items) {
        for (let i = 0; i < v.length; i++) {
          const e = check(schema.items, v[i], `${at}[${i}]`);
          if (e) return e;
        }
      }
      return null;
    }
    case 'object': {
      if (v === null || typeof v !== 'object' || Array.isArray(v)) return `${at} must be an object, got ${typeName(v)}`;
      const props = schema.properties ?? {};
      const o = v as Record<string, unknown>;
      for (const k of Object.keys(o)) {
        if (!Object.hasOwn(props, k)) return `unexpected argument '${k.length > 64 ? k.slice(0, 64) + '…' : k}'${path ? ' in ' + path : ''}`;
      }
      for (const k of schema.required ?? []) {
        if (!Object.hasOwn(o, k)) return `missing required argument '${k}'${path ? ' in ' + path : ''}`;
      }
      for (const k of Object.keys(props)) {
        if (Object.hasOwn(o, k)) {
          const e = check(props[k], o[k], path ? `${path}.${k}` : k);
          if (e) return e;
        }
      }
      return null;
    }
  }
}

/** null when v satisfies the schema, else a one-line description of the first violation. */
export function validate(schema: JsonSchema, v: unknown): string | null {
  return check(schema, v, '');
}
