// The policy worker: owns the GPUDevice (or the CPU backend) and the model, so the page never blocks.
// The Lab is the PolicyApi of src/worker-protocol.ts, exposed through comlink as it is.
import * as Comlink from 'comlink';
import { Lab } from './lab/lab';

Comlink.expose(new Lab());
