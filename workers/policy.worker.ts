// The policy worker: owns the GPUDevice (or the CPU backend) and the model, so the page never blocks.
// Its API is PolicyApi (src/worker-protocol.ts), exposed through comlink.
import * as Comlink from 'comlink';
import type { PolicyApi } from '../src/worker-protocol';
import { Lab } from './lab/lab';

const lab = new Lab();

const api: PolicyApi = {
  init: (flag, world) => lab.init(flag, world),
  budgets: async () => lab.budgets(),
  capabilities: async () => lab.capabilities(),
  inspectFiles: (files) => lab.inspectFiles(files),
  load: (req, onProgress) => lab.load(req, onProgress),
  generate: (prompt, maxNew, seed, onProgress) => lab.generate(prompt, maxNew, seed, onProgress),
  rolloutStart: (req) => lab.rolloutStart(req),
  rolloutStep: (onProgress) => lab.rolloutStep(onProgress),
  group: (req, onProgress) => lab.group(req, onProgress),
  exportAdapter: () => lab.exportAdapter(),
  importAdapter: (files) => lab.importAdapter(files),
  trainStart: (req, onPoint, onProgress, extend) => lab.trainStart(req, onPoint, onProgress, extend),
  trainPause: () => lab.trainPause(),
  trainStatus: () => lab.trainStatus(),
  trainFiles: () => lab.trainFiles(),
  trainReset: () => lab.trainReset(),
  tts: (req, onProgress) => lab.tts(req, onProgress),
  cancel: () => lab.cancel(),
};

Comlink.expose(api);
