// τ²-style instructions rendered from generated tasks (src/env/retail/instructions.ts): the layout and
// voice of the real task files, readable by the same loader, and the same customer the scripted user plays
// (everything the user says about itself or its orders is in them; its variation is spelled out).

import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { loadTaskFile, loadTau2Tasks } from '../../src/env/tau2';
import { retailDomain } from '../../src/env/retail/index';
import { runRetailExpertConversation } from '../../src/env/retail/expert-conversation';
import { renderInstructions, tau2TaskJson } from '../../src/env/retail/instructions';
import { retailDataPath } from '../../src/env/retail/node';
import { userProfile } from '../../src/env/retail/user-profile';
import { base } from './helpers';

const domain = retailDomain(base);
const tasks = domain.tasks.generate({ split: 'train', count: 300, seed: 9 });
const real = JSON.parse(readFileSync(retailDataPath('tasks-train.json')!, 'utf8')) as { user_scenario: { instructions: Record<string, unknown> } }[];

describe('τ² instructions of generated tasks', () => {
  it('have the keys, key order and voice of the real task files', () => {
    const realKeys = Object.keys(real[0].user_scenario.instructions);
    for (const t of tasks) {
      const ins = renderInstructions(t, 0);
      expect(Object.keys(ins)).toEqual(realKeys);
      expect(ins.domain).toBe('retail');
      expect(ins.reason_for_call).toMatch(/^(You|Your) /);
      expect(ins.known_info).toMatch(/^(You are|Your email is) /);
      expect(ins.unknown_info === null || /^You do not remember /.test(ins.unknown_info)).toBe(true);
      // Second person throughout, except what the user is to say word for word (quoted).
      expect(ins.reason_for_call.replace(/"[^"]*"/g, '')).not.toMatch(/\bI\b|\bmy\b/);
    }
  });

  it('load as τ² tasks with the same reference actions and facts', () => {
    const json = tasks.map((t) => tau2TaskJson(t, 0));
    const loaded = loadTau2Tasks(JSON.stringify(json));
    expect(loadTaskFile(JSON.stringify(json))).toEqual(loaded);
    loaded.forEach((l, i) => {
      expect(l.id).toBe(tasks[i].id);
      expect(l.referenceActions).toEqual(tasks[i].referenceActions);
      expect(l.facts).toEqual(tasks[i].facts);
      expect(l.instructions.reasonForCall).toBe(json[i].user_scenario.instructions.reason_for_call);
    });
    // The real files' own layout, key for key.
    expect(Object.keys(json[0])).toEqual(Object.keys(real[0]));
  });

  it('hold everything the scripted user says about itself and its orders', () => {
    for (const t of tasks.slice(0, 150)) {
      const ins = renderInstructions(t, 0);
      const text = Object.values(ins).join(' ').toLowerCase();
      const said = runRetailExpertConversation(t, domain.createEnv()).turns.flatMap((x) => (x.kind === 'user' ? [x.text] : [])).join(' ');
      for (const m of said.matchAll(/[\w.+-]+@[\w.-]+\w|#?W\d{7}|\b\d{5}\b/g)) expect(text, `${t.id}: ${m[0]}`).toContain(m[0].toLowerCase());
    }
  });

  it('spell out the user-side variation exactly when the profile has it', () => {
    for (const t of tasks) {
      const p = userProfile(t, 0);
      const ins = renderInstructions(t, 0);
      expect(ins.task_instructions.includes('by mistake'), t.id).toBe(p.wrongZip !== null);
      if (p.wrongZip) expect(ins.task_instructions).toContain(p.wrongZip);
      expect(ins.reason_for_call.includes('change your mind'), t.id).toBe(p.changeMind !== null);
      expect(ins.reason_for_call.includes('at the same time'), t.id).toBe(p.bothAtOnce);
      const ids = t.intent.requests.some((r) => r.kind === 'order_total' || 'orderRef' in r);
      expect(ins.task_instructions.includes('only when the agent asks'), t.id).toBe(!p.idsUpfront && ids);
      expect(ins.task_instructions.includes('order id in your first message'), t.id).toBe(p.idsUpfront && ids);
    }
  });

  it('depend on the seed only through the profile', () => {
    const t = tasks[0];
    expect(renderInstructions(t, 4)).toEqual(renderInstructions(t, 4, userProfile(t, 4)));
    const differ = tasks.filter((x) => JSON.stringify(renderInstructions(x, 0)) !== JSON.stringify(renderInstructions(x, 1)));
    expect(differ.length).toBeGreaterThan(100);
  });
});
