// The observation view's field diff: its lines are the JSON, its marks are fidelity's own count.
import { describe, expect, it } from 'vitest';
import { diffObservations, jsonLines, parseObservationText, type DiffRow } from '../../src/ui/observation-diff';
import { compareObservations } from '../../src/rollout/fidelity';
import type { Observation } from '../../src/env/domain';
import type { JsonValue } from '../../src/method/observation-fields';

const real: JsonValue = { result: { order_id: '#W1', status: 'pending', items: [{ item_id: '1', price: 10.5 }, { item_id: '2', price: 3 }], cancel_reason: null } };
// One wrong value (status), one field left out (items[1].price), one invented (note).
const rehearsed: JsonValue = { result: { order_id: '#W1', status: 'cancelled', items: [{ item_id: '1', price: 10.5 }, { item_id: '2' }], note: 'x' } };

/** A line as the page prints it: indentation, key, text, comma. */
const print = (l: DiffRow['real']) => (l ? '  '.repeat(l.depth) + (l.key ? l.key + ' ' : '') + l.text + (l.comma ? ',' : '') : '');
const obs = (v: JsonValue): Observation => ('error' in (v as object) ? { ok: false, name: 't', error: (v as { error: string }).error, code: 'tool' } : { ok: true, name: 't', result: (v as { result: JsonValue }).result });

describe('observation diff', () => {
  it('prints the JSON formatted, one field a line, and the lines parse back to the same value (null keys aside)', () => {
    const lines = jsonLines(real).map(print);
    expect(lines).toEqual([
      '{',
      '  "result": {',
      '    "order_id": "#W1",',
      '    "status": "pending",',
      '    "items": [',
      '      {',
      '        "item_id": "1",',
      '        "price": 10.5',
      '      },',
      '      {',
      '        "item_id": "2",',
      '        "price": 3',
      '      }',
      '    ]',
      '  }',
      '}',
    ]);
    const { cancel_reason: _, ...shown } = (real as { result: Record<string, JsonValue> }).result;
    expect(JSON.parse(lines.join('\n'))).toEqual({ result: shown });
    // Empty containers and bare values are one line each.
    expect(jsonLines({ result: [] }).map(print)).toEqual(['{', '  "result": []', '}']);
    expect(jsonLines({ result: {} }).map(print)).toEqual(['{', '  "result": {}', '}']);
    expect(jsonLines('yusuf_rossi_9620').map(print)).toEqual(['"yusuf_rossi_9620"']);
  });

  it('marks each field as fidelity counts it, aligned row by row', () => {
    const d = diffObservations(rehearsed, real);
    const marked = d.rows.filter((r) => r.mark).map((r) => [r.mark, (r.real ?? r.rehearsed)!.leaf!.path]);
    expect(marked).toEqual([
      ['same', '$."result"."order_id"'],
      ['differs', '$."result"."status"'],
      ['same', '$."result"."items"[0]."item_id"'],
      ['same', '$."result"."items"[0]."price"'],
      ['same', '$."result"."items"[1]."item_id"'],
      ['real-only', '$."result"."items"[1]."price"'],
      ['rehearsed-only', '$."result"."note"'],
    ]);
    // Paired rows show both values on one row; a one-sided field leaves the other side empty.
    const status = d.rows.find((r) => r.mark === 'differs')!;
    expect([status.rehearsed?.text, status.real?.text]).toEqual(['"cancelled"', '"pending"']);
    expect(d.rows.find((r) => r.mark === 'real-only')!.rehearsed).toBeNull();
    expect(d.rows.find((r) => r.mark === 'rehearsed-only')!.real).toBeNull();
    // Every line of both sides is shown once, in order.
    expect(d.rows.flatMap((r) => (r.real ? [r.real.id] : []))).toEqual(jsonLines(real).map((l) => l.id));
    expect(d.rows.flatMap((r) => (r.rehearsed ? [r.rehearsed.id] : []))).toEqual(jsonLines(rehearsed).map((l) => l.id));
    expect(d.counts).toEqual({ rehearsed: 6, real: 6, same: 4, differs: 1, rehearsedOnly: 1, realOnly: 1 });
  });

  it('its numbers are the fidelity measurement itself, and its counts make the field F1', () => {
    const cases: [JsonValue, JsonValue][] = [
      [rehearsed, real],
      [real, real],
      [{ error: 'Order not found' }, real],
      [{ error: 'User not found' }, { error: 'Order not found' }],
      [{ result: { items: [] } }, { result: { items: [{ a: 1 }] } }],
      [{ result: { b: 2, a: 1 } }, { result: { a: 1, b: 2, c: null } }],
    ];
    for (const [x, y] of cases) {
      const d = diffObservations(x, y);
      const f = compareObservations(obs(x), obs(y));
      expect({ exact: d.exact, f1: d.f1, errorAgree: d.errorAgree, rehearsedError: d.rehearsedError, realError: d.realError }).toEqual(f);
      const { rehearsed: na, real: nb, same } = d.counts;
      expect(d.f1).toBeCloseTo(na + nb === 0 ? 1 : (2 * same) / (na + nb), 12);
      expect(d.rows.filter((r) => r.mark === 'same').length).toBe(same);
    }
  });

  it('an error against a result: nothing pairs, every field is one-sided', () => {
    const d = diffObservations({ error: 'Order not found' }, real);
    expect(d.errorAgree).toBe(false);
    expect([d.rehearsedError, d.realError]).toEqual([true, false]);
    expect(d.rows.filter((r) => r.mark).every((r) => (r.mark === 'rehearsed-only' ? r.real === null : r.mark === 'real-only' && r.rehearsed === null))).toBe(true);
    expect(d.counts.same + d.counts.differs).toBe(0);
    expect(d.f1).toBe(0);
  });

  it('keys written in another order (which fidelity ignores) are shown in the real order, each field on one row', () => {
    const d = diffObservations({ result: { c: 3, b: 2, x: 0, a: 1 } }, { result: { a: 1, b: 2, c: 3 } });
    expect(d.rows.map((r) => [r.rehearsed?.key ?? null, r.real?.key ?? null, r.mark])).toEqual([
      [null, null, null],
      ['"result":', '"result":', null],
      ['"a":', '"a":', 'same'],
      ['"b":', '"b":', 'same'],
      ['"x":', null, 'rehearsed-only'],
      ['"c":', '"c":', 'same'],
      [null, null, null],
      [null, null, null],
    ]);
    // Arrays are positional: their order is kept, and counts.
    const arr = diffObservations({ result: [2, 1] }, { result: [1, 2] });
    expect(arr.rows.filter((r) => r.mark).map((r) => r.mark)).toEqual(['differs', 'differs']);
  });

  it('reads the protocol text, and refuses what is not JSON', () => {
    expect(parseObservationText('{"result":{"a":1}}')).toEqual({ result: { a: 1 } });
    expect(parseObservationText('{"result":')).toBeNull();
  });
});
