// `npm run train` as a child process for the kill-and-resume test: the real CLI (trainCli) on the same
// calculate-only retail domain as the in-process CLI tests. With KILL_AT_WRITE=n the process SIGKILLs
// itself half-way through its n-th file write (a checkpoint file or a JSONL line), leaving the torn bytes
// on disk, exactly as a kill at that instant would. The reward favours each group's first rollout, so that
// the random-weight policy's adapters actually move (as in test/rl/run.test.ts).
import { trainCli } from '../../src/cli/train';
import { nodeFileOps, type FileOps } from '../../src/util/atomic-file';
import { calculateOnlyDomain } from '../helpers/cli';

const killAt = Number(process.env.KILL_AT_WRITE ?? 0);
let writes = 0;
const ops: FileOps = {
  async write(h, bytes) {
    if (killAt > 0 && ++writes === killAt) {
      await nodeFileOps.write(h, bytes.subarray(0, bytes.length >> 1));
      process.kill(process.pid, 'SIGKILL');
      await new Promise(() => {});
    }
    await nodeFileOps.write(h, bytes);
  },
};

process.exitCode = await trainCli(process.argv.slice(2), undefined, { domain: calculateOnlyDomain, storeOps: ops, reward: (ep) => (ep.rolloutId.endsWith(':0') ? 1 : 0) });
