// URL state: untrusted query strings become valid settings; a round trip keeps every value.
import { describe, expect, it } from 'vitest';
import { AGGREGATIONS } from '../../src/train/batch';
import { DEFAULT_AGGREGATION } from '../../src/method/run-config';
import { LOSS_AGGREGATIONS } from '../../src/worker-protocol';
import { DEFAULTS, labRange, parseSettings, settingsQuery } from '../../src/ui/settings.svelte';

describe('lab URL settings', () => {
  it('round-trips non-default values and keeps defaults out of the URL', () => {
    const s = { ...DEFAULTS, task: 'train-0-3', stepMode: 'real' as const, mode: 'per-role' as const, seed: 42, k: 8, groups: 'pooled' as const, lr: 3e-4, request: 'a & b=c', ttsN: 0 };
    const q = settingsQuery(s);
    expect(q).not.toContain('maxNew');
    // Each setting under its own URL key: the stepper's mode under mode, the run's under tmode.
    expect(q).toContain('mode=real');
    expect(q).toContain('tmode=per-role');
    expect(q).toContain('grouping=pooled');
    expect(parseSettings(q)).toEqual(s);
    expect(settingsQuery(DEFAULTS)).toBe('');
  });

  it("the stepper's user and a run's user are two settings, under user and tuser", () => {
    expect([DEFAULTS.stepUser, DEFAULTS.user]).toEqual(['off', 'off']);
    expect(parseSettings('?user=scripted')).toMatchObject({ stepUser: 'scripted', user: 'off' });
    expect(parseSettings('?tuser=scripted')).toMatchObject({ stepUser: 'off', user: 'scripted' });
    expect(parseSettings('?tuser=model').user).toBe('off');
    expect(settingsQuery({ ...DEFAULTS, user: 'scripted' })).toBe('?tuser=scripted');
  });

  it('the world is part of the URL state: mini by default (kept out of the URL), retail when chosen', () => {
    expect(DEFAULTS.world).toBe('mini');
    expect(settingsQuery({ ...DEFAULTS, world: 'retail' })).toBe('?world=retail');
    expect(parseSettings('?world=retail').world).toBe('retail');
    expect(parseSettings('?world=atlantis').world).toBe('mini');
    // Budgets: 0 means measured; a user's number is kept.
    expect(DEFAULTS.maxRehearseTokens).toBe(0);
    expect(parseSettings('?reh=300&maxNew=40')).toMatchObject({ maxRehearseTokens: 300, maxActTokens: 40 });
  });

  it('clamps and rejects bad values instead of trusting them', () => {
    const s = parseSettings('?seed=-5&k=999&mode=%3Cscript%3E&task=..%2F..%2Fx%20y&temp=NaN&backend=cuda&maxNew=1e9');
    expect(s.seed).toBe(0);
    expect(s.k).toBe(16);
    expect(s.stepMode).toBe(DEFAULTS.stepMode);
    expect(s.task).toBe('');
    expect(s.temp).toBe(DEFAULTS.temp);
    expect(s.backend).toBe('');
    expect(s.maxActTokens).toBe(1); // parseInt('1e9') = 1
  });

  it('the GRPO options beyond the lesson defaults: off by default, kept when set, clamped when bad', () => {
    expect(DEFAULTS).toMatchObject({ updateEpochs: 1, taskSampling: 'uniform', topP: 1 });
    const s = { ...DEFAULTS, updateEpochs: 2, taskSampling: 'signal' as const, topP: 0.8 };
    expect(settingsQuery(s)).toBe('?epochs=2&tsamp=signal&topP=0.8');
    expect(parseSettings(settingsQuery(s))).toEqual(s);
    expect(parseSettings('?epochs=0&tsamp=hardest&topP=7')).toMatchObject({ updateEpochs: 1, taskSampling: 'uniform', topP: 1 });
    expect(parseSettings('?topP=0')).toMatchObject({ topP: 0.01 });
    expect(DEFAULTS.reward).toBe('auto');
    expect(settingsQuery({ ...DEFAULTS, reward: 'checklist' })).toBe('?reward=checklist');
    expect(parseSettings('?reward=checklist').reward).toBe('checklist');
    expect(parseSettings('?reward=judge').reward).toBe('auto');
    // The loss aggregation: the update's own list, the update's default, kept in the URL when set.
    expect(LOSS_AGGREGATIONS).toEqual(AGGREGATIONS);
    expect(DEFAULTS.lossAggregation).toBe(DEFAULT_AGGREGATION);
    expect(settingsQuery({ ...DEFAULTS, lossAggregation: 'token-mean' })).toBe('?lossAgg=token-mean');
    expect(parseSettings('?lossAgg=seq-mean-token-sum').lossAggregation).toBe('seq-mean-token-sum');
    expect(parseSettings('?lossAgg=sum').lossAggregation).toBe(DEFAULT_AGGREGATION);
    // The greedy member: off by default, 'true' in the URL when on, anything else read as the default.
    expect(DEFAULTS.greedyMember).toBe(false);
    expect(settingsQuery({ ...DEFAULTS, greedyMember: true })).toBe('?greedy=true');
    expect(parseSettings('?greedy=true').greedyMember).toBe(true);
    expect(parseSettings('?greedy=yes').greedyMember).toBe(false);
  });

  it("a control's bounds are the ones its URL value is clamped to (the table's lab range)", () => {
    for (const [name, key] of [['k', 'k'], ['promptsPerStep', 'prompts'], ['rank', 'rank'], ['evalTasks', 'evalTasks'], ['updateEpochs', 'epochs']] as const) {
      const r = labRange(name);
      expect(parseSettings(`?${key}=100000`)[name], name).toBe(r.max);
      expect(parseSettings(`?${key}=-3`)[name], name).toBe(r.min);
    }
    expect(labRange('topP')).toEqual({ min: 0.01, max: 1 });
  });
});
