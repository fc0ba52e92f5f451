// The serve commands' access settings, shared by the environment server (serve.ts) and the OpenAI-compatible
// model endpoint (serve-openai.ts): the same flags, the same token rules, the same guard (src/server/guard.ts).
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { IoError } from '../util/atomic-file';
import { ArgError, strFlag, type FlagSpec, type FlagValues } from './args';

export const AUTH_FLAGS: FlagSpec = {
  'allowed-hosts': { type: 'string', arg: 'A,B', help: 'host names clients may use besides localhost, 127.0.0.1, ::1 (and this machine\'s names when bound beyond loopback); * allows any', default: 'none' },
  'token-file': { type: 'string', arg: 'F', help: 'file holding the bearer token every request must carry (Authorization: Bearer T); ENVACE_TOKEN also sets it', default: 'none; required with a non-loopback --host' },
  token: { type: 'string', arg: 'T', help: 'the bearer token itself (visible to other users in ps: prefer --token-file)', default: 'none' },
};

/** --allowed-hosts as a list (absent: none beyond the loopback names). */
export const allowedHostsOf = (v: FlagValues): string[] | undefined => strFlag(v, 'allowed-hosts')?.split(',').map((h) => h.trim()).filter(Boolean);

/** The bearer token from --token or --token-file (not both), else ENVACE_TOKEN (which clients read too). */
export function tokenOf(v: FlagValues): string | undefined {
  const flag = strFlag(v, 'token');
  const file = strFlag(v, 'token-file');
  if (flag !== undefined && file !== undefined) throw new ArgError('give the token one way: --token or --token-file');
  let t = flag ?? (file === undefined ? process.env.ENVACE_TOKEN || undefined : undefined);
  if (file !== undefined) {
    try {
      t = readFileSync(resolve(file), 'utf8').trim();
    } catch (e) {
      throw new IoError(resolve(file), 'read', (e as NodeJS.ErrnoException).code, (e as Error).message);
    }
  }
  if (t !== undefined && (t.length < 16 || /\s/.test(t))) throw new ArgError('the token must be at least 16 characters, without spaces (e.g. openssl rand -hex 32)');
  return t;
}

