// Shared by the in-process CLI tests: an io that captures what a CLI writes, and the retail domain shown
// with one tool and a short policy so that prompts fit the tiny random-weight model.
import type { CliIo } from '../../src/cli/args';
import type { Domain } from '../../src/env/domain';
import { retailDomain } from '../../src/env/retail';
import { loadRetailBase } from '../../src/env/retail/node';

const retail = retailDomain(loadRetailBase());
export const calculateOnlyDomain: Domain = { ...retail, policy: 'You are a retail agent.', definitions: () => retail.definitions().filter((t) => t.function.name === 'calculate') };

export function captureIo(): CliIo & { stdout: () => string; stderr: () => string } {
  let o = '';
  let e = '';
  return { out: (s) => void (o += s), err: (s) => void (e += s), stdout: () => o, stderr: () => e };
}
