// The bundled policies' model cards are generated from their folders' records (`npm run pretrain -- --card`),
// never edited by hand: regenerating each card from the committed records gives the committed bytes. A fix to
// what a card says goes into the records or research/pretrain/card*.ts, then the card is regenerated.
import { copyFileSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { pretrainCli } from '../../research/pretrain/cli';
import { captureIo } from '../helpers/cli';

const ROOT = resolve(import.meta.dirname, '../..');

describe('committed model cards', () => {
  for (const folder of ['models/default', 'models/retail']) {
    it(`${folder}/README.md is what its records generate`, async () => {
      const committed = readFileSync(join(ROOT, folder, 'README.md'), 'utf8');
      const commit = /^- Code: commit (\w+)\.$/m.exec(committed)?.[1];
      expect(commit, 'the card names the commit its code ran at').toBeDefined();
      // The records only (the card reads JSON files); the weights stay where they are.
      const dir = mkdtempSync(join(tmpdir(), 'card-'));
      try {
        for (const n of readdirSync(join(ROOT, folder)).filter((n) => n.endsWith('.json'))) copyFileSync(join(ROOT, folder, n), join(dir, n));
        expect(await pretrainCli(['--card', '--out', dir, '--commit', commit!], captureIo())).toBe(0);
        expect(readFileSync(join(dir, 'README.md'), 'utf8')).toBe(committed);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });
  }
});
