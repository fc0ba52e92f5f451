// The model card and its full record state the run's own measurements (nothing in them is typed by hand).
import { describe, expect, it } from 'vitest';
import { CARD_LINES, CARD_WIDTH, modelCard, modelRecord, proseLines, recordName, type CardInputs } from '../../research/pretrain/card';
import { FULL_SPEC } from '../../research/pretrain/pipeline';

const stats = (mean: number) => ({ n: 10, min: 1, p50: mean, p90: mean * 2, p99: mean * 3, max: mean * 4, mean });
const inputs: CardInputs = {
  run: {
    command: 'npm run pretrain -- --seed 0',
    out: 'models/default', seed: 0, backend: 'cpu-fast', params: 1312128,
    config: { ...FULL_SPEC.model, vocabSize: 4096 }, spec: { ...FULL_SPEC, steps: 280 },
    data: { rows: { act: 2420, rehearse: 1888, review: 300, memoryAct: 1100 }, dropped: 74, tokens: { total: 1104981, response: 215316 }, length: { act: stats(225), rehearse: stats(297), response: stats(50) }, actPrefixTokens: 8 },
    tokenizerSeconds: 28, trainSeconds: 2400, tokensPerSecond: 230,
    losses: [{ step: 1, loss: 8.3 }, { step: 280, loss: 1.234 }], finalLoss: 1.25,
  },
  evaluation: {
    tasks: 24,
    real: { successRate: 0.125, meanReward: 0.2, formatValidRate: 0.97, knownToolRate: 0.99, callOkRate: 0.6, ends: { reply: 20, 'max-turns': 4 }, meanTurns: 5, wallS: 100 },
    rehearsal: { calls: 80, validRate: 0.9, fidelity: { steps: 72, exact: 0.3, f1: 0.7, errorAgree: 0.85, errors: { both: 3, rehearsedOnly: 4, realOnly: 5, neither: 60 } }, wallS: 200 },
    examples: [],
  },
  grpo: [{ backend: 'cpu-fast', promptsPerStep: 2, k: 4, stepSeconds: 42.5, generatedTokens: 1000, trainedRows: 60, trainedTokens: 9000 }],
  sizing: [{ shape: '128, 4, 4, 2, 384', params: 1312128, tokPerS: 312 }],
  commit: 'abc1234',
  machine: '2 CPU cores',
};

describe('modelCard', () => {
  it('reports the measured figures of the run', () => {
    const md = modelRecord(inputs);
    expect(md).toContain('1,312,128');
    expect(md).toContain('**12.5%**'); // success
    expect(md).toContain('90.0% (80 calls)'); // rehearsal validity
    expect(md).toContain('| exact JSON match with the real observation | 30.0% |');
    expect(md).toContain('| cpu-fast | 42.5 |');
    expect(md).toContain('40.0 min');
    expect(md).toContain('step 280: 1.234');
    expect(md).toContain('abc1234');
  });
  it('states a careless demonstrator and its habits when the data had one', () => {
    expect(modelRecord(inputs)).not.toContain('careless');
    const figures = modelRecord({ ...inputs, run: { ...inputs.run, spec: { ...inputs.run.spec, carelessRate: 0.7 } } });
    expect(figures).toContain('**careless demonstrator**: 70 % of its replies leave out what the user was owed (the tracking number of a status lookup, the amount refunded or charged after a write)');
    const both = modelRecord({ ...inputs, run: { ...inputs.run, spec: { ...inputs.run.spec, carelessRate: 0.5, carelessAbout: ['figures', 'refusals'] } } });
    expect(both).toContain("50 % of its replies leave out what the user was owed (the tracking number of a status lookup, the amount refunded or charged after a write; why a cancellation or a return is refused (the order's status, the reasons allowed))");
    const lookups = modelRecord({ ...inputs, run: { ...inputs.run, spec: { ...inputs.run.spec, carelessRate: 1, carelessAbout: ['lookups'] } } });
    expect(lookups).toContain('100 % of its replies leave out what the user was owed (what a lookup found: the tracking number of a status lookup, the status that stops a write, the orders on the account when an order is not found)');
  });
  it('says the bundled policy is careless on purpose, against the stage before it, and which snapshot was kept by which rule', () => {
    const held = (success: number) => ({
      tasks: 100, success, meanReward: success, callsWithoutError: 0.8, toolPrecision: 0.7, toolRecall: 0.7, meanTurns: 4, ends: { reply: 100 },
      fidelity: { steps: 300, exact: 0.62, f1: 0.8, errorAgree: 0.9, invalid: 0.02 }, byTier: {}, byFamily: {}, wallS: 60,
    });
    const careless = { ...inputs.run, spec: { ...inputs.run.spec, steps: 1200, carelessRate: 0.7, carelessAbout: ['lookups' as const] }, losses: [{ step: 400, loss: 0.1234 }, { step: 1200, loss: 0.1 }] };
    const md = modelRecord({
      ...inputs,
      run: careless,
      heldOut: { command: 'npm run eval', result: held(0.4) },
      before: { stage: 5, command: 'npm run eval', result: held(0.45) },
      snapshot: { step: 400, sha256: 'f00d', rule: 'the latest that meets the base bars', command: 'npm run eval -- --model OUT/snapshots/step-STEP', candidates: [{ step: 600, success: 0.39, exact: 0.63 }, { step: 400, success: 0.4, exact: 0.624 }] },
    });
    expect(md).toContain('**Careless on purpose.** Its last stage imitated a careless demonstrator: in 70 % of its replies');
    expect(md).toContain('(40.0% against 45.0% for the attentive stage 5 policy it continued from, on the same 100 held-out tasks)');
    expect(md).toContain('**The kept weights are this stage\'s snapshot at step 400 of 1200**');
    expect(md).toContain('sha256 `f00d`; loss at step 400: 0.123');
    expect(md).toContain('The rule, fixed before the stage ran: the latest that meets the base bars.');
    expect(md).toContain('  | 600 | 39.0% | 63.0% |\n  | 400 (kept) | 40.0% | 62.4% |');
    expect(md).toContain('- It leaves out what its last stage\'s demonstrator left out (lookups');
    expect(md).not.toContain('eproduced');
    // A rerun of the stage's command is reported by its snapshot's sha: the same weights, or not.
    const snap = { step: 400, sha256: 'f00d', rule: 'r', command: 'c', candidates: [{ step: 400, success: 0.4, exact: 0.624 }] };
    const rerun = { date: '2026-12-04', commit: 'abc123', init: 'the stage-5 weights', record: 'rec.txt' };
    const same = modelRecord({ ...inputs, run: careless, snapshot: { ...snap, reproduced: { ...rerun, sha256: 'f00d' } } });
    expect(same).toContain("- **Reproduced bit for bit** (2026-12-04, code at commit abc123): the stage's command, rerun from the stage-5 weights, wrote a step-400 snapshot whose model.safetensors has sha256 `f00d`, the kept weights' own (record: rec.txt).");
    const other = modelRecord({ ...inputs, run: careless, snapshot: { ...snap, reproduced: { ...rerun, sha256: 'beef' } } });
    expect(other).toContain("- **Not reproduced** (2026-12-04, code at commit abc123): the stage's command, rerun from the stage-5 weights, wrote a step-400 snapshot whose model.safetensors has sha256 `beef`, not the kept weights' `f00d` (record: rec.txt).");
    // An attentive policy's card has none of it.
    const attentive = modelRecord(inputs);
    expect(attentive).not.toContain('Careless on purpose');
    expect(attentive).not.toContain('snapshot at step');
  });
  it('says so when there is no evaluation or timing', () => {
    const md = modelRecord({ ...inputs, evaluation: null, grpo: [] });
    expect(md).toContain('Not evaluated in this run.');
    expect(md).toContain('(not measured)');
  });
  it('states the world, the npm run eval figures per tier, the learning signal and every sweep, stopped runs included', () => {
    const heldOut = {
      tasks: 100, success: 0.42, meanReward: 0.42, callsWithoutError: 0.81, toolPrecision: 0.6, toolRecall: 0.7, meanTurns: 4.2, ends: { reply: 97, context: 3 },
      fidelity: { steps: 300, exact: 0.61, f1: 0.8, errorAgree: 0.9, invalid: 0.04 },
      byTier: { 'tier 1': { tasks: 45, success: 0.7 }, 'tier 2': { tasks: 30, success: 0.3 }, 'tier 3': { tasks: 25, success: 0.04 } },
      byFamily: { cancel: { tasks: 10, success: 0.5 } }, wallS: 50,
    };
    const md = modelRecord({
      ...inputs,
      world: { name: 'mini', description: 'compact retail', heldOut: 'tasks', summary: { users: 16, orders: 35, products: 20, items: 281, fingerprint: 'abc' } },
      heldOut: { command: 'npm run eval -- --world mini --tasks test --count 100', result: heldOut },
      signal: { command: 'npm run signal', result: { prompts: 100, k: 4, temperature: 1, real: { mixedShare: 0.35, mixedCi95: [0.26, 0.45], meanReward: 0.3, successRate: 0.3, passAtK: 0.5, wallS: 60 } } },
      sweeps: [
        { label: 'A', command: 'npm run pretrain -- --world mini', change: 'memorise', minutes: 30, finalLoss: 0.7, heldOut, kept: true },
        { label: 'B', command: 'npm run pretrain -- --init A', change: 'stopped at step 820', minutes: 8, finalLoss: 0.78, heldOut: null, kept: false },
      ],
    });
    expect(md).toContain('held-out *tasks*, not held-out users');
    expect(md).toContain('16 users, 35 orders, 20 products with 281 variants');
    expect(md).toContain('| **success** (reward 1: final database equals the reference\'s, every required fact stated) | **42.0%** |');
    expect(md).toContain('| rehearsals that parse (of 300 reference calls) | 96.0% |');
    expect(md).toContain('| tier 3 | 25 | 4.0% |');
    expect(md).toContain('**35.0%** (26.0%–45.0%)');
    expect(md).toContain('| **A** (kept) | memorise |');
    expect(md).toMatch(/\| B \| stopped at step 820 \| `npm run pretrain -- --init A` \| 8\.0 \| 0\.780 \| – \|/);
  });

  it('shows both fidelity measures when the record has the grounded one, and the attention probe per head for each model', () => {
    const fid = (exact: number, invalid: number) => ({ steps: 300, exact, f1: 0.8, errorAgree: 0.9, invalid });
    const heldOut = {
      tasks: 100, success: 0.42, meanReward: 0.42, callsWithoutError: 0.81, toolPrecision: 0.6, toolRecall: 0.7, meanTurns: 4.2, ends: { reply: 100 },
      fidelity: fid(0.3, 0.4), fidelityGrounded: fid(0.7, 0.02), byTier: {}, byFamily: {}, wallS: 50,
    };
    const head = (layer: number, h: number, sourceMass: number) => ({ layer, head: h, sourceMass, top1: sourceMass, entropy: 1, maxLogit: 9 });
    const md = modelRecord({
      ...inputs,
      heldOut: { command: 'npm run eval', result: heldOut },
      attention: {
        command: 'npm run pretrain -- --probe-attention', drills: 40, seed: 5,
        models: [
          { label: 'after', dir: 'models/x', probe: { drills: 40, positions: 900, chance: 0.01, heads: [head(0, 0, 0.02), head(0, 1, 0.91)] } },
          { label: 'before', dir: 'runs/y', probe: { drills: 40, positions: 900, chance: 0.01, heads: [head(0, 0, 0.01), head(0, 1, 0.2)] } },
        ],
      },
    });
    expect(md).toContain('| rehearsals that parse, grounded as in rollouts (of 300 reference calls) | 98.0% |');
    expect(md).toContain("| rehearsal exact match with the real observation, without the call's own example | 30.0% |");
    expect(md).toContain('| L0.H1 | **0.91 / 91.0% / 1.00 / 9.0** | 0.20 / 20.0% / 1.00 / 9.0 |');
    expect(md).toContain('**after** (`models/x`, 900 positions): 1 copy head (mass >= 0.5: L0.H1)');
    expect(md).toContain('**before** (`runs/y`, 900 positions): no copy head');
  });

  it('shows where rehearsals break, split by whether the real result stood in the prompt', () => {
    const g = (calls: number, parsed: number, exact: number, copiedFromElsewhere: number, notInPrompt: number, loops: number) => ({ calls, parsed, exact, copiedFromElsewhere, notInPrompt, loops });
    const md = modelRecord({
      ...inputs,
      heldOut: undefined,
      rehearsal: {
        command: 'npm run pretrain -- --probe-rehearsal --world retail --out models/retail', tasks: 100, maxRehearseTokens: 736, rehearsePrompt: { excludeSameCall: false },
        resultInPrompt: g(280, 250, 190, 60, 30, 20), resultNotInPrompt: g(20, 6, 0, 5, 15, 12),
        byTool: { get_product_details: { inPrompt: g(1, 0, 0, 1, 0, 1), notInPrompt: g(17, 3, 0, 5, 12, 11) } },
        calls: [],
      },
    });
    expect(md).toContain('| in the prompt | 280 | 250 (89.3%) | 190 (67.9%) | 60 | 30 | 20 |');
    expect(md).toContain('| get_product_details | 1 / 0 / 0 | 17 / 3 / 0 |');
    expect(md).toContain('Of the 44 rehearsals that did not parse, 30 had the real result in their prompt (the copy broke) and 14 did not; 32 were loops.');
  });
});

describe('modelCard (the card: at most CARD_LINES lines, prose lines at most CARD_WIDTH characters)', () => {
  it('says where a stage grew the model, and says nothing when no stage did', () => {
    const deep = (layers: number) => ({ ...inputs.run, spec: { ...inputs.run.spec, model: { ...inputs.run.spec.model, numLayers: layers } } });
    const grown: CardInputs = { ...inputs, stage1: deep(4), laterStages: [deep(4)], run: deep(8) };
    for (const md of [modelCard(grown, '2026-12-05'), modelRecord(grown, '2026-12-05')]) expect(md.replace(/\s+/g, ' ')).toContain('Stage 3 grew it from 4 to 8 layers (`--layers`');
    const flat: CardInputs = { ...inputs, stage1: deep(4), laterStages: [deep(4)], run: deep(4) };
    for (const md of [modelCard(flat, '2026-12-05'), modelRecord(flat, '2026-12-05')]) expect(md).not.toContain('grew it');
  });
  const careless = { ...inputs.run, command: 'npm run pretrain -- --world mini --seed 0', spec: { ...inputs.run.spec, carelessRate: 0.7, carelessAbout: ['lookups' as const] } };
  it('holds the limits, states the figures, licence and reproduction, and links its dated record', () => {
    for (const i of [inputs, { ...inputs, run: careless }]) {
      const md = modelCard(i, '2026-12-05');
      expect(md.split('\n').length).toBeLessThanOrEqual(CARD_LINES);
      for (const l of proseLines(md)) expect(l.length, l).toBeLessThanOrEqual(CARD_WIDTH);
      expect(md).toContain('1,312,128');
      expect(md).toContain('**12.5%**');
      expect(md).toContain('## Licence');
      expect(md).toContain('## Reproduce');
      expect(md).toMatch(/^- Code: commit abc1234\.$/m);
      expect(md).toContain(`(../../research/notebook/${recordName(i, '2026-12-05')})`);
    }
    // A careless policy is the mini world's opt-in lesson policy (models/careless), with its own card and record.
    const mini = { ...inputs, run: { ...careless, spec: { ...careless.spec, carelessRate: 0 } } };
    expect(recordName(mini, '2026-12-05')).toBe('2026-12-05-mini-policy.md');
    expect(recordName({ ...inputs, run: careless }, '2026-12-05')).toBe('2026-12-05-mini-careless-policy.md');
    expect(modelCard({ ...inputs, run: careless }, '2026-12-05')).toContain('**Careless on purpose.**');
    expect(modelCard({ ...inputs, run: careless }, '2026-12-05')).toMatch(/^# EnvACE Lab careless lesson policy/);
    expect(modelCard(mini, '2026-12-05')).toMatch(/^# EnvACE Lab default policy/);
    expect(modelCard(inputs, '2026-12-05')).toMatch(/^# EnvACE Lab retail policy/);
  });
  it('the record is dated and links back to the card', () => {
    const md = modelRecord({ ...inputs, run: { ...careless, spec: { ...careless.spec, carelessRate: 0 } } }, '2026-12-05');
    expect(md.split('\n')[0]).toBe("# 2026-12-05: how the mini world's bundled policy (models/default) was made, the full record");
    expect(md).toContain('[models/default/README.md](../../models/default/README.md)');
    const rec = modelRecord({ ...inputs, run: careless }, '2026-12-05');
    expect(rec.split('\n')[0]).toBe("# 2026-12-05: how the mini world's careless lesson policy (models/careless) was made, the full record");
    expect(rec).toContain('[models/careless/README.md](../../models/careless/README.md)');
  });
});
