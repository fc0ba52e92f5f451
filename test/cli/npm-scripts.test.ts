// npm runs `pre<name>` scripts as hooks: without `ignore-scripts` in .npmrc, `npm run train` would first run the
// whole `pretrain` script (20+ minutes, overwriting models/default). This guards the CLI names the README documents.
import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';

describe('npm scripts', () => {
  it('npm run train does not run pretrain as a pre-hook', () => {
    const out = execFileSync('npm', ['run', 'train', '--', '--help'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
    expect(out).toContain('> envace-lab@0.1.0 train');
    expect(out).not.toContain('> envace-lab@0.1.0 pretrain');
    expect(out).toContain('usage: npm run train');
  });
});
