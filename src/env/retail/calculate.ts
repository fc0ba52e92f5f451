// The `calculate` tool: upstream checks the character set and then evaluates the text as a Python
// expression, rounds float(value) to 2 decimals and returns str(). This is an interpreter of exactly that
// arithmetic subset (ints are arbitrary precision, `/` is true division, `//` floors, `**` is power and
// binds tighter than a unary sign on its left, `()` is the empty tuple), with the Python 3.11 exception
// texts. Nothing is evaluated by the host language.
//
// Known approximations (documented, none reachable from 2-decimal money arithmetic): true division of
// ints beyond 2^53 is not correctly rounded; an int power whose result would exceed 2^20000 is refused with
// "int too large to convert to float" (Python would compute it first, possibly for minutes); syntax
// errors other than the ones below are all "invalid syntax".

import { ToolError } from '../domain';
import { pyFloatRepr, pyRound2 } from '../json';

type Val = { t: 'int'; v: bigint } | { t: 'float'; v: number } | { t: 'tuple' };

const ALLOWED = /^[0-9+\-*/(). ]*$/;
const MAX_INT_BITS = 20000;

const syntax = (msg: string, line = 1) => new ToolError(`${msg} (<string>, line ${line})`);

type Tok = { k: 'num'; text: string } | { k: 'op'; text: string };

function tokenize(src: string): Tok[] {
  const toks: Tok[] = [];
  const open: number[] = [];
  let i = 0;
  while (i < src.length) {
    const c = src[i];
    if (c === ' ') {
      i++;
    } else if ((c >= '0' && c <= '9') || c === '.') {
      let j = i;
      while (j < src.length && src[j] >= '0' && src[j] <= '9') j++;
      let isFloat = false;
      if (src[j] === '.') {
        isFloat = true;
        j++;
        while (j < src.length && src[j] >= '0' && src[j] <= '9') j++;
      }
      const text = src.slice(i, j);
      if (text === '.') throw syntax('invalid syntax');
      if (!isFloat && text.length > 1 && text[0] === '0' && /[1-9]/.test(text)) {
        throw syntax('leading zeros in decimal integer literals are not permitted; use an 0o prefix for octal integers');
      }
      toks.push({ k: 'num', text });
      i = j;
    } else if (c === '*' || c === '/') {
      const two = src[i + 1] === c;
      toks.push({ k: 'op', text: two ? c + c : c });
      i += two ? 2 : 1;
    } else {
      if (c === '(') open.push(i);
      if (c === ')' && open.pop() === undefined) throw syntax("unmatched ')'");
      toks.push({ k: 'op', text: c });
      i++;
    }
  }
  if (open.length) throw syntax("'(' was never closed");
  return toks;
}

const typeOf = (a: Val) => (a.t === 'tuple' ? 'tuple' : a.t);

function toFloat(a: Val): number {
  if (a.t === 'float') return a.v;
  if (a.t === 'int') {
    const f = Number(a.v);
    if (!Number.isFinite(f)) throw new ToolError('int too large to convert to float');
    return f;
  }
  throw new ToolError("float() argument must be a string or a real number, not 'tuple'");
}

function bitLength(v: bigint): number {
  return (v < 0n ? -v : v).toString(2).length;
}

function floorDivFloat(a: number, b: number): number {
  // CPython's float_floor_div: divmod via fmod, then snap the quotient.
  const mod = a % b;
  let div = (a - mod) / b;
  if (mod !== 0 && b < 0 !== mod < 0) div -= 1;
  if (div === 0) return Math.sign(a / b) < 0 || Object.is(a / b, -0) ? -0 : 0;
  let fl = Math.floor(div);
  if (div - fl > 0.5) fl += 1;
  return fl;
}

function binop(op: string, a: Val, b: Val): Val {
  if (a.t === 'tuple' || b.t === 'tuple') {
    if (op === '+' && a.t === 'tuple' && b.t === 'tuple') return a;
    if (op === '+' && a.t === 'tuple') throw new ToolError(`can only concatenate tuple (not "${typeOf(b)}") to tuple`);
    if (op === '*') {
      const other = a.t === 'tuple' ? b : a;
      if (other.t === 'int') return { t: 'tuple' };
      if (other.t === 'float') throw new ToolError("can't multiply sequence by non-int of type 'float'");
      throw new ToolError("can't multiply sequence by non-int of type 'tuple'");
    }
    throw new ToolError(`unsupported operand type(s) for ${op}: '${typeOf(a)}' and '${typeOf(b)}'`);
  }
  if (a.t === 'int' && b.t === 'int') {
    const x = a.v;
    const y = b.v;
    switch (op) {
      case '+':
        return { t: 'int', v: x + y };
      case '-':
        return { t: 'int', v: x - y };
      case '*':
        if (bitLength(x) + bitLength(y) > MAX_INT_BITS) throw new ToolError('int too large to convert to float');
        return { t: 'int', v: x * y };
      case '/': {
        if (y === 0n) throw new ToolError('division by zero');
        const fx = Number(x);
        const fy = Number(y);
        const q = fx / fy;
        if (!Number.isFinite(q) || !Number.isFinite(fx) || !Number.isFinite(fy)) {
          throw new ToolError('integer division result too large for a float');
        }
        return { t: 'float', v: q };
      }
      case '//': {
        if (y === 0n) throw new ToolError('integer division or modulo by zero');
        let q = x / y;
        if (x % y !== 0n && x < 0n !== y < 0n) q -= 1n;
        return { t: 'int', v: q };
      }
      case '**': {
        if (y < 0n) {
          if (x === 0n) throw new ToolError('0.0 cannot be raised to a negative power');
          return floatPow(toFloat(a), toFloat(b));
        }
        const absx = x < 0n ? -x : x;
        if (absx > 1n && Number(y) * (bitLength(x) - 1) > MAX_INT_BITS) {
          throw new ToolError('int too large to convert to float');
        }
        return { t: 'int', v: absx <= 1n && y > 64n ? (x ** (y % 2n === 0n ? 2n : 1n)) : x ** y };
      }
    }
  }
  const x = toFloat(a);
  const y = toFloat(b);
  switch (op) {
    case '+':
      return { t: 'float', v: x + y };
    case '-':
      return { t: 'float', v: x - y };
    case '*':
      return { t: 'float', v: x * y };
    case '/':
      if (y === 0) throw new ToolError('float division by zero');
      return { t: 'float', v: x / y };
    case '//':
      if (y === 0) throw new ToolError('float floor division by zero');
      return { t: 'float', v: floorDivFloat(x, y) };
    default:
      return floatPow(x, y);
  }
}

function floatPow(x: number, y: number): Val {
  if (x === 0 && y < 0) throw new ToolError('0.0 cannot be raised to a negative power');
  if (x < 0 && Number.isFinite(y) && !Number.isInteger(y)) {
    // Python returns a complex number here, which float() then refuses.
    throw new ToolError("float() argument must be a string or a real number, not 'complex'");
  }
  const r = x ** y;
  if (!Number.isFinite(r) && Number.isFinite(x) && Number.isFinite(y)) {
    throw new ToolError("(34, 'Numerical result out of range')");
  }
  return { t: 'float', v: r };
}

function unary(op: string, a: Val): Val {
  if (a.t === 'tuple') throw new ToolError(`bad operand type for unary ${op}: 'tuple'`);
  if (op === '+') return a;
  return a.t === 'int' ? { t: 'int', v: -a.v } : { t: 'float', v: -a.v };
}

type Node =
  | { k: 'lit'; v: Val }
  | { k: 'bin'; op: string; a: Node; b: Node }
  | { k: 'un'; op: string; a: Node }
  | { k: 'call'; f: Node; arg: Node | null };

/** Builds the whole tree first: Python reports a syntax error before evaluating anything. */
class Parser {
  private i = 0;
  private depth = 0;
  constructor(private readonly toks: Tok[]) {}

  private peek(): Tok | undefined {
    return this.toks[this.i];
  }
  private isOp(text: string): boolean {
    const t = this.peek();
    return t !== undefined && t.k === 'op' && t.text === text;
  }
  private nest(): void {
    if (++this.depth > 200) throw new ToolError('too many nested parentheses');
  }

  parseAll(): Node {
    if (this.toks.length === 0) throw syntax('invalid syntax', 0);
    const v = this.expr();
    if (this.i < this.toks.length) throw syntax('invalid syntax');
    return v;
  }

  private expr(): Node {
    let v = this.term();
    while (this.isOp('+') || this.isOp('-')) {
      const op = this.toks[this.i++].text;
      v = { k: 'bin', op, a: v, b: this.term() };
    }
    return v;
  }

  private term(): Node {
    let v = this.factor();
    while (this.isOp('*') || this.isOp('/') || this.isOp('//')) {
      const op = this.toks[this.i++].text;
      v = { k: 'bin', op, a: v, b: this.factor() };
    }
    return v;
  }

  private factor(): Node {
    if (this.isOp('+') || this.isOp('-')) {
      const op = this.toks[this.i++].text;
      this.nest();
      const a = this.factor();
      this.depth--;
      return { k: 'un', op, a };
    }
    return this.power();
  }

  private power(): Node {
    let base = this.atom();
    // `(…)` after a value is a call in Python: valid syntax, a TypeError when evaluated.
    while (this.isOp('(')) {
      this.i++;
      this.nest();
      const arg = this.isOp(')') ? null : this.expr();
      this.depth--;
      if (!this.isOp(')')) throw syntax('invalid syntax');
      this.i++;
      base = { k: 'call', f: base, arg };
    }
    if (this.isOp('**')) {
      this.i++;
      return { k: 'bin', op: '**', a: base, b: this.factor() };
    }
    return base;
  }

  private atom(): Node {
    const t = this.peek();
    if (!t) throw syntax('invalid syntax');
    if (t.k === 'num') {
      this.i++;
      return { k: 'lit', v: t.text.includes('.') ? { t: 'float', v: Number(t.text) } : { t: 'int', v: BigInt(t.text) } };
    }
    if (t.text === '(') {
      this.i++;
      if (this.isOp(')')) {
        this.i++;
        return { k: 'lit', v: { t: 'tuple' } };
      }
      this.nest();
      const v = this.expr();
      this.depth--;
      if (!this.isOp(')')) {
        const n = this.peek();
        throw syntax(n && (n.k === 'num' || n.text === '(') ? 'invalid syntax. Perhaps you forgot a comma?' : 'invalid syntax');
      }
      this.i++;
      return v;
    }
    throw syntax('invalid syntax');
  }
}

function evaluate(n: Node): Val {
  switch (n.k) {
    case 'lit':
      return n.v;
    case 'un':
      return unary(n.op, evaluate(n.a));
    case 'bin': {
      const a = evaluate(n.a);
      return binop(n.op, a, evaluate(n.b));
    }
    case 'call': {
      const f = evaluate(n.f);
      if (n.arg) evaluate(n.arg);
      throw new ToolError(`'${typeOf(f)}' object is not callable`);
    }
  }
}

/** The tool body: returns str(round(float(eval(expression)), 2)) as upstream does. */
export function calculate(expression: string): string {
  if (!ALLOWED.test(expression)) throw new ToolError('Invalid characters in expression');
  const v = evaluate(new Parser(tokenize(expression)).parseAll());
  return pyFloatRepr(pyRound2(toFloat(v)));
}
