// DecodeStream gives a generation's text as its ids come, decoding only the newest ones: after every push its text
// must be exactly the tokenizer's decode of every id so far (what generate() returned when it decoded the whole
// output on every token). Tried on the bundled policies' tokenizers and the real Qwen3 one with random ids over the
// whole vocabulary (single bytes that split characters, stray continuation bytes, byte-order marks mid-stream and at
// the start, special tokens between), and on the cases that break a naive piecewise decode.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { DecodeStream, Tokenizer } from '../../src/model/tokenizer';
import { QWEN3_TOKENIZER_DIR } from '../fixtures/tiny-model';

const DIRS = { mini: 'models/default', retail: 'models/retail', qwen3: QWEN3_TOKENIZER_DIR } as const;
const files = (dir: string) => [JSON.parse(readFileSync(join(dir, 'tokenizer.json'), 'utf8')), JSON.parse(readFileSync(join(dir, 'tokenizer_config.json'), 'utf8'))];

/** The id of the byte-level token for one byte (GPT-2's byte-to-character table). */
function byteId(vocab: Record<string, number>, b: number): number {
  const printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
  let ch = b;
  if (!printable) {
    let n = 0;
    for (let x = 0; x < b; x++) if (!((x >= 0x21 && x <= 0x7e) || (x >= 0xa1 && x <= 0xac) || (x >= 0xae && x <= 0xff))) n++;
    ch = 256 + n;
  }
  const id = vocab[String.fromCodePoint(ch)];
  if (id === undefined) throw new Error(`no token for byte ${b}`);
  return id;
}

function streamMatches(tok: Tokenizer, ids: readonly number[]): void {
  const s = new DecodeStream(tok);
  ids.forEach((id, i) => {
    const got = s.push(id);
    expect(got, `after ${i + 1} of ${JSON.stringify(ids)}`).toBe(tok.decode(ids.slice(0, i + 1)));
    expect(s.text).toBe(got);
  });
}

describe.each(Object.entries(DIRS))('DecodeStream on the %s tokenizer', (_, dir) => {
  const [json, config] = files(dir);
  const tok = Tokenizer.fromJSON(json, config);
  const vocab = json.model.vocab as Record<string, number>;
  const b = (x: number) => byteId(vocab, x);
  const special = tok.specialIds;

  it('decodes piece by piece (a byte-level decoder without clean-up)', () => {
    expect(tok.byteLevelDecode).toBe(true);
  });

  it('equals the whole decode after every push, for random ids over the whole vocabulary', () => {
    const id = fc.oneof(
      { weight: 6, arbitrary: fc.integer({ min: 0, max: tok.size - 1 }) },
      { weight: 3, arbitrary: fc.integer({ min: 0x80, max: 0xff }).map(b) },
      { weight: 1, arbitrary: fc.constantFrom(...special) },
    );
    fc.assert(fc.property(fc.array(id, { maxLength: 40 }), (ids) => streamMatches(tok, ids)), { numRuns: 300, seed: 46 });
  });

  it('equals it on the cases a naive piecewise decode gets wrong', () => {
    const enc = (t: string) => tok.encode(t);
    const zhong = [0xe4, 0xb8, 0xad].map(b); // 中, one byte per token
    const bom = [0xef, 0xbb, 0xbf].map(b);
    const cases: number[][] = [
      zhong,
      [...enc('a'), ...zhong, ...enc('b')],
      [...bom, ...enc('x')], // a byte-order mark at the start (dropped by the whole decode)
      [...enc('x'), ...bom, ...enc('y')], // and in the middle (kept)
      [...enc('x'), ...bom.slice(0, 2), ...enc('y'), bom[2]],
      [0x80, 0xbf, 0xad].map(b).concat(enc('ok')), // stray continuation bytes
      [...enc('x'), zhong[0], special[0], zhong[1], zhong[2], ...enc('y')], // a special token cutting a character
      [special[0], ...bom, ...enc('z')], // a byte-order mark right after a special token
      [...enc('{"ok": true, "result": {"name": "desk lamp €"}}')],
    ];
    for (const ids of cases) streamMatches(tok, ids);
  });
});

describe('DecodeStream on a tokenizer whose decode looks across tokens', () => {
  it('decodes everything on every push', () => {
    const [json, config] = files(DIRS.mini);
    const tok = Tokenizer.fromJSON(json, { ...config, clean_up_tokenization_spaces: true });
    expect(tok.byteLevelDecode).toBe(false);
    streamMatches(tok, tok.encode('Hello , world . It is  here ! '));
  });
});
