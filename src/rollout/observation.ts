// One representation of a tool's answer, whoever produced it (the real environment or the Rehearse role),
// so that Act sees real and rehearsed observations in exactly the same text form and fidelity compares
// like with like.
//
// - A successful result is a JSON value: a record (object), a list, or a string (user ids, "4.0",
//   "Transfer successful"). A tool that returns JSON *text* (e.g. list_all_product_types) is held as the
//   parsed object, because that is what a simulator naturally writes.
// - A failure is an error message. Inside <execution_result> it is written {"error": "<message>"}; in the
//   Act context it is the tool message "Error: <message>" (the τ²-bench convention).

export type JsonValue = null | boolean | number | string | JsonValue[] | { [k: string]: JsonValue };

export type Observation = { error: false; value: JsonValue } | { error: true; message: string };

export const ok = (value: JsonValue): Observation => ({ error: false, value });
export const fail = (message: string): Observation => ({ error: true, message });

/** The JSON written inside <execution_result> for this observation. */
export function observationJson(o: Observation): JsonValue {
  return o.error ? { error: o.message } : o.value;
}

/** Reads the JSON of an <execution_result>: an object whose only key is a string "error" is a failure. */
export function observationFromJson(v: JsonValue): Observation {
  if (v !== null && typeof v === 'object' && !Array.isArray(v)) {
    const keys = Object.keys(v);
    if (keys.length === 1 && keys[0] === 'error' && typeof v.error === 'string') return fail(v.error);
  }
  return ok(v);
}

/**
 * A real tool's text output as an observation: JSON object/array text is parsed; any other string
 * (including numeric-looking "4.0", whose exact digits matter) stays a string.
 */
export function observationFromToolText(text: string, isError: boolean): Observation {
  if (isError) return fail(text.startsWith('Error: ') ? text.slice(7) : text);
  const t = text.trimStart();
  if (t.startsWith('{') || t.startsWith('[')) {
    try {
      return ok(JSON.parse(text) as JsonValue);
    } catch {
      // Not JSON after all: keep the text.
    }
  }
  return ok(text);
}

/** The tool message Act sees. Compact JSON, since context is the scarce resource of a small policy. */
export function observationText(o: Observation): string {
  if (o.error) return 'Error: ' + o.message;
  return typeof o.value === 'string' ? o.value : JSON.stringify(o.value);
}
