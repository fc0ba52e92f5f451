// The stepper's rows (src/ui/stepper-rows.ts): a one-message episode is its Act turns; a conversation puts each
// user turn before the Act turn that answered it, the greeting first and the user's stop last, in the order said.
import { describe, expect, it } from 'vitest';
import { stepperRows, stopText } from '../../src/ui/stepper-rows';
import type { ConversationView, TurnView, UserTurnView } from '../../src/worker-protocol';

const turn = (index: number, reply: string | null = null): TurnView => ({ index, act: { source: 'policy', prompt: '', promptTokens: 0, text: `t${index}`, tokens: [], ms: 0 }, calls: [], reply });
const user = (before: number, text: string, opening = false, confirms = false): UserTurnView => ({ before, text, opening, confirms });
const conv = (userTurns: UserTurnView[], stop: string | null = null): ConversationView => ({ user: 'scripted', greeting: 'Hi!', userTurns, stop, unconfirmed: [] });
/** A row as a short word: g (greeting), u:text, a:index, s:token. */
const shape = (rows: ReturnType<typeof stepperRows>) => rows.map((r) => (r.kind === 'greeting' ? 'g' : r.kind === 'user' ? `u:${r.turn.text}` : r.kind === 'act' ? `a:${r.turn.index}` : `s:${r.token}`));

describe('stepperRows', () => {
  it('a one-message episode: its Act turns, nothing else', () => {
    expect(shape(stepperRows({ turns: [turn(0), turn(1, 'done')] }))).toEqual(['a:0', 'a:1']);
  });

  it('a conversation: greeting, opening, then each user turn before the Act turn that answers it, the stop last', () => {
    const turns = [turn(0, 'your email?'), turn(1), turn(2, 'cancel #1, yes?'), turn(3), turn(4, 'done')];
    const c = conv([user(0, 'cancel my order', true), user(1, 'a@b.c'), user(3, 'yes', false, true)], '###STOP###');
    expect(shape(stepperRows({ turns, conversation: c }))).toEqual(['g', 'u:cancel my order', 'a:0', 'u:a@b.c', 'a:1', 'a:2', 'u:yes', 'a:3', 'a:4', 's:###STOP###']);
  });

  it('a user turn the agent has not answered yet comes after the last Act turn; no stop while the call goes on', () => {
    const c = conv([user(0, 'hello', true), user(1, 'my email is a@b.c')]);
    expect(shape(stepperRows({ turns: [turn(0, 'your email?')], conversation: c }))).toEqual(['g', 'u:hello', 'a:0', 'u:my email is a@b.c']);
    // Before the first Act turn: the greeting and the opening alone.
    expect(shape(stepperRows({ turns: [], conversation: conv([user(0, 'hello', true)]) }))).toEqual(['g', 'u:hello']);
  });

  it('keeps the order of user turns given out of order, and keeps two turns before the same Act turn in order', () => {
    const c = conv([user(1, 'second'), user(0, 'first', true), user(1, 'third')]);
    expect(shape(stepperRows({ turns: [turn(0), turn(1)], conversation: c }))).toEqual(['g', 'u:first', 'a:0', 'u:second', 'u:third', 'a:1']);
  });
});

describe('stopText', () => {
  it("says each of τ²'s stop tokens in words, and an unknown one with its token", () => {
    expect(stopText('###STOP###')).toBe('the user ends the call');
    expect(stopText('###TRANSFER###')).toMatch(/^the user ends the call: transferred/);
    expect(stopText('###OUT-OF-SCOPE###')).toMatch(/out of scope/);
    expect(stopText('###BYE###')).toBe('the user ends the call (###BYE###)');
  });
});
