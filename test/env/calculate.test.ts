// `calculate` follows Python: eval of the arithmetic subset, float(), round(x, 2), str(). Expected values
// below were produced by CPython 3.11 (the exception texts too).

import { describe, expect, it } from 'vitest';
import { calculate } from '../../src/env/retail/calculate';
import { pyFloatRepr, pyRound2 } from '../../src/env/json';
import { expectError, expectOk, fresh } from './helpers';

const ok: [string, string][] = [
  ['2+2', '4.0'],
  ['1/3', '0.33'],
  ['0.125*1', '0.12'],
  ['0.375*1', '0.38'],
  ['269.16 + 249.01 - 272.33 - 262.47', '-16.63'],
  ['3131.1 + 4777.75 + 367.38', '8276.23'],
  ['-2**2', '-4.0'],
  ['2**-1', '0.5'],
  ['2**3**2', '512.0'],
  ['7//-2', '-4.0'],
  ['-7.5//2', '-4.0'],
  ['0//-1.0', '-0.0'],
  ['-0.001', '-0.0'],
  ['-0', '0.0'],
  ['00', '0.0'],
  ['01.5', '1.5'],
  ['  1 + 1', '2.0'],
  ['1.', '1.0'],
  ['.5', '0.5'],
  ['10**16', '1e+16'],
  ['10**15 + 0.5', '1000000000000000.5'],
  ['0**0', '1.0'],
  ['(((1)))', '1.0'],
  ['2**1000 // 2**999', '2.0'],
];

const err: [string, string][] = [
  ['1e308', 'Invalid characters in expression'],
  ['1,000', 'Invalid characters in expression'],
  ['5 % 2', 'Invalid characters in expression'],
  ['1\t+1', 'Invalid characters in expression'],
  ['1/0', 'division by zero'],
  ['1.0/0', 'float division by zero'],
  ['1//0', 'integer division or modulo by zero'],
  ['1.0//0', 'float floor division by zero'],
  ['0**-1', '0.0 cannot be raised to a negative power'],
  ['', 'invalid syntax (<string>, line 0)'],
  ['   ', 'invalid syntax (<string>, line 0)'],
  ['01', 'leading zeros in decimal integer literals are not permitted; use an 0o prefix for octal integers (<string>, line 1)'],
  ['1+', 'invalid syntax (<string>, line 1)'],
  ['(1', "'(' was never closed (<string>, line 1)"],
  ['1)', "unmatched ')' (<string>, line 1)"],
  ['1..2', 'invalid syntax (<string>, line 1)'],
  ['5 5', 'invalid syntax (<string>, line 1)'],
  ['(1 2)', 'invalid syntax. Perhaps you forgot a comma? (<string>, line 1)'],
  ['()', "float() argument must be a string or a real number, not 'tuple'"],
  ['()+1', 'can only concatenate tuple (not "int") to tuple'],
  ['1+()', "unsupported operand type(s) for +: 'int' and 'tuple'"],
  ['()*1.5', "can't multiply sequence by non-int of type 'float'"],
  ['-()', "bad operand type for unary -: 'tuple'"],
  ['(1)(2)', "'int' object is not callable"],
  ['(-8)**(1/3)', "float() argument must be a string or a real number, not 'complex'"],
  ['10.0**400', "(34, 'Numerical result out of range')"],
  ['2**10000*1.0', 'int too large to convert to float'],
  ['1/0 + (', "'(' was never closed (<string>, line 1)"],
];

describe('calculate', () => {
  it.each(ok)('%s -> %s', (e, want) => {
    expect(calculate(e)).toBe(want);
  });
  it.each(err)('%s fails with %s', (e, msg) => {
    expect(() => calculate(e)).toThrow(msg);
    expect(() => calculate(e)).toThrow(new RegExp('^' + msg.replace(/[.*+?^${}()|[\]\\]/g, '\\$&') + '$'));
  });
  it('is a tool with the same texts and no state change', () => {
    const env = fresh();
    expect(expectOk(env, 'calculate', { expression: '135.24 - 153.23' })).toBe('-17.99');
    expectError(env, 'calculate', { expression: 'import os' }, 'Invalid characters in expression');
  });
  it('refuses huge powers instead of hanging', () => {
    // A hang would hit the test timeout; no wall-clock assertion in a unit test.
    expect(() => calculate('9**9**9')).toThrow('int too large to convert to float');
  });
});

describe('Python float helpers', () => {
  it('round half to even on exact binary ties only', () => {
    expect(pyRound2(0.125)).toBe(0.12);
    expect(pyRound2(0.375)).toBe(0.38);
    expect(pyRound2(2.675)).toBe(2.67); // 2.675 is below the tie in binary
    expect(pyRound2(1.005)).toBe(1); // same
    expect(pyRound2(-0.125)).toBe(-0.12);
    expect(Object.is(pyRound2(-0.001), -0)).toBe(true);
  });
  it('repr like Python', () => {
    expect(pyFloatRepr(51)).toBe('51.0');
    expect(pyFloatRepr(1e16)).toBe('1e+16');
    expect(pyFloatRepr(1.5e-5)).toBe('1.5e-05');
    expect(pyFloatRepr(0.0001)).toBe('0.0001');
    expect(pyFloatRepr(36.12999999999999)).toBe('36.12999999999999');
    expect(pyFloatRepr(-Infinity)).toBe('-inf');
  });
});
