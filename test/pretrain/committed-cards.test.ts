// The bundled policies' model cards and their full records (dated entries under research/notebook/) are
// generated from their folders' records (`npm run pretrain -- --card`), never edited by hand: regenerating each
// from the committed records gives the committed bytes. A fix to what a card says goes into the records or
// research/pretrain/card*.ts, then the card is regenerated. A card holds issue 49's limits: at most 120 lines,
// prose lines of at most 120 characters.
import { copyFileSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CARD_LINES, CARD_WIDTH, proseLines } from '../../research/pretrain/card';
import { pretrainCli } from '../../research/pretrain/cli';
import { captureIo } from '../helpers/cli';

const ROOT = resolve(import.meta.dirname, '../..');

describe('committed model cards', () => {
  for (const folder of ['models/default', 'models/careless', 'models/retail']) {
    it(`${folder}/README.md is what its records generate`, async () => {
      const committed = readFileSync(join(ROOT, folder, 'README.md'), 'utf8');
      const commit = /^- Code: commit (\w+)\.$/m.exec(committed)?.[1];
      expect(commit, 'the card names the commit its code ran at').toBeDefined();
      expect(committed.split('\n').length).toBeLessThanOrEqual(CARD_LINES);
      for (const l of proseLines(committed)) expect(l.length, l).toBeLessThanOrEqual(CARD_WIDTH);
      const record = /\]\(\.\.\/\.\.\/(research\/notebook\/(\d{4}-\d\d-\d\d)-[\w-]+\.md)\)/.exec(committed);
      expect(record, 'the card links its dated record in the research notebook').not.toBeNull();
      // The records only (the card reads JSON files); the weights stay where they are.
      const dir = mkdtempSync(join(tmpdir(), 'card-'));
      try {
        for (const n of readdirSync(join(ROOT, folder)).filter((n) => n.endsWith('.json'))) copyFileSync(join(ROOT, folder, n), join(dir, n));
        expect(await pretrainCli(['--card', '--out', dir, '--commit', commit!, '--date', record![2], '--notebook', dir], captureIo())).toBe(0);
        expect(readFileSync(join(dir, 'README.md'), 'utf8')).toBe(committed);
        expect(readFileSync(join(dir, record![1].split('/').pop()!), 'utf8')).toBe(readFileSync(join(ROOT, record![1]), 'utf8'));
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });
  }

  // A conversation policy's card (research/pretrain/card-conversation.ts) links its research record, not a notebook entry.
  for (const folder of ['models/conversation', 'models/conversation-retail']) {
    it(`${folder}/README.md is what its records generate`, async () => {
      const committed = readFileSync(join(ROOT, folder, 'README.md'), 'utf8');
      const commit = /^- Code: commit (\w+)\.$/m.exec(committed)?.[1];
      const date = / --date (\d{4}-\d\d-\d\d) /.exec(committed)?.[1];
      expect(commit && date, 'the card names its commit and date').toBeTruthy();
      expect(committed.split('\n').length).toBeLessThanOrEqual(CARD_LINES);
      for (const l of proseLines(committed)) expect(l.length, l).toBeLessThanOrEqual(CARD_WIDTH);
      const dir = mkdtempSync(join(tmpdir(), 'card-'));
      try {
        for (const n of readdirSync(join(ROOT, folder)).filter((n) => n.endsWith('.json'))) copyFileSync(join(ROOT, folder, n), join(dir, n));
        expect(await pretrainCli(['--card', '--out', dir, '--commit', commit!, '--date', date!], captureIo())).toBe(0);
        expect(readFileSync(join(dir, 'README.md'), 'utf8')).toBe(committed);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });
  }
});
