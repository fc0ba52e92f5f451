// Issue 48: switching worlds left the other world's things on the page: the lesson describing the mini policy's
// habit, the previous model's "Try the policy" output, the budget text naming the other world.
import { describe, expect, it } from 'vitest';
import { lessonPolicyNote, lessonSteps, policyStory } from '../../src/ui/lesson';
import { budgetOf, clearWorldOwned, WORLD_OWNED } from '../../src/ui/world';
import type { BudgetInfo } from '../../src/worker-protocol';

const budget = (world: string): BudgetInfo => ({ world } as BudgetInfo);

describe('switching worlds', () => {
  it("clears every result that belongs to the other world, and nothing else", () => {
    const state = { rollout: {}, group: {}, tts: {}, budget: budget('mini'), tried: { text: 'hi' }, train: { world: 'mini' }, model: { label: 'm' } };
    clearWorldOwned(state);
    expect(state).toEqual({ rollout: null, group: null, tts: null, budget: null, tried: null, train: { world: 'mini' }, model: { label: 'm' } });
    expect([...WORLD_OWNED].sort()).toEqual(['budget', 'group', 'rollout', 'tried', 'tts']);
  });

  it('a budget measured in the other world is not shown', () => {
    expect(budgetOf(budget('mini'), 'retail')).toBeNull();
    expect(budgetOf(budget('retail'), 'retail')).toEqual(budget('retail'));
    expect(budgetOf(budget('mini'), undefined)).toBeNull();
    expect(budgetOf(null, 'mini')).toBeNull();
  });

  it("the lesson's training step tells the loaded policy's story, not the other world's or the other policy's", () => {
    const step3 = (bundled: 'mini' | 'retail' | null, policy?: string) => lessonSteps({ stepperRollouts: [], groups: [], runs: [], tts: null, bundled, policy })[2].what;
    expect(step3('mini')).toContain('the best this recipe makes');
    expect(step3('mini')).toContain(policyStory('mini'));
    expect(step3('mini')).not.toContain('leaves out what a lookup found');
    // The careless policy is the mini world's opt-in lesson policy: its own story, not the bundled one's.
    expect(step3('mini', 'careless')).toContain('leaves out what a lookup found');
    expect(step3('mini', 'careless')).toContain(lessonPolicyNote('careless'));
    expect(step3('mini', 'careless')).not.toContain('the best this recipe makes');
    // So is the conversation policy, with its story.
    expect(step3('mini', 'conversation')).toContain(lessonPolicyNote('conversation'));
    expect(step3('mini', 'conversation')).toContain('scripted τ² user');
    expect(step3('mini', 'conversation')).not.toContain('leaves out what a lookup found');
    // The retail world's conversation policy tells the retail line's story.
    expect(step3('retail', 'conversation')).toContain(lessonPolicyNote('conversation', 'retail'));
    expect(step3('retail', 'conversation')).toContain('the retail line');
    expect(step3('retail', 'conversation')).not.toContain('mini');
    for (const other of ['retail', null] as const) {
      expect(step3(other)).not.toContain('leaves out what a lookup found');
      expect(step3(other)).not.toContain('mini');
      expect(step3(other)).toContain(policyStory(other));
    }
    expect(step3('retail')).toContain('bundled retail policy');
    expect(step3(null)).not.toContain('bundled');
  });
});
