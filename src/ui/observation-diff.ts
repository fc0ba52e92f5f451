// The rehearsed and the real observation as two columns of formatted JSON, aligned line by line, each field
// marked with how it counts in rehearsal fidelity. The fields are fidelity's own leaves
// (src/method/observation-fields.ts): the lines are rebuilt from them, so a field the view marks as agreeing is
// exactly a leaf field F1 counts as a hit, and a null-valued key (which fidelity counts as absent) is not shown.
import { canonical, flattenLeaves, isErrorJson, leafF1, leaves, type JsonValue, type Leaf } from '../method/observation-fields';

/** One line of formatted JSON. */
export interface JsonLine {
  /** Alignment key: the same line of the other observation has the same id. */
  id: string;
  depth: number;
  /** `"status":` for an object member, null for an array element or the root. */
  key: string | null;
  /** `{`, `[`, `}`, `]`, or a leaf's value as JSON. */
  text: string;
  comma: boolean;
  /** The fidelity leaf a value line shows (null on structure lines). */
  leaf: Leaf | null;
}

/** How a field counts: agrees, differs in value, only in the rehearsal, only in the real observation. */
export type Mark = 'same' | 'differs' | 'rehearsed-only' | 'real-only';

export interface DiffRow {
  rehearsed: JsonLine | null;
  real: JsonLine | null;
  /** null on structure lines (braces and brackets), which fidelity does not count. */
  mark: Mark | null;
}

export interface ObservationDiff {
  rows: DiffRow[];
  exact: boolean;
  f1: number;
  errorAgree: boolean;
  rehearsedError: boolean;
  realError: boolean;
  /** Fields (leaves) of each side, and how the paths of both sides pair up. */
  counts: { rehearsed: number; real: number; same: number; differs: number; rehearsedOnly: number; realOnly: number };
}

type Node = { kind: 'leaf'; leaf: Leaf } | { kind: 'obj' | 'arr'; children: Map<string | number, Node> };
type Container = Extract<Node, { children: unknown }>;

/** The tree of a JSON value's fidelity leaves (their paths), children in the leaves' order. */
function tree(v: JsonValue): Node {
  const ls = leaves(v);
  if (ls.length === 1 && ls[0].at.length === 0) return { kind: 'leaf', leaf: ls[0] };
  const root: Container = { kind: typeof ls[0].at[0] === 'number' ? 'arr' : 'obj', children: new Map() };
  for (const l of ls) {
    let n = root;
    l.at.forEach((seg, i) => {
      if (i === l.at.length - 1) return void n.children.set(seg, { kind: 'leaf', leaf: l });
      let c = n.children.get(seg);
      if (!c) n.children.set(seg, (c = { kind: typeof l.at[i + 1] === 'number' ? 'arr' : 'obj', children: new Map() }));
      n = c as Container;
    });
  }
  return root;
}

/**
 * The rehearsal's object keys in the real observation's order (keys only it has stay where they were, after the
 * shared ones before them). Key order does not count in fidelity, and so every field both have lands on one row.
 */
function orderLike(a: Node, b: Node): Node {
  if (a.kind === 'leaf' || b.kind !== a.kind) return a;
  const kids = [...a.children];
  if (a.kind === 'obj') {
    const rank = new Map([...b.children.keys()].map((k, i) => [k, i]));
    const shared = kids.filter(([k]) => rank.has(k)).sort(([x], [y]) => rank.get(x)! - rank.get(y)!);
    let s = 0;
    for (let i = 0; i < kids.length; i++) if (rank.has(kids[i][0])) kids[i] = shared[s++];
  }
  return { kind: a.kind, children: new Map(kids.map(([k, c]) => [k, b.children.has(k) ? orderLike(c, b.children.get(k)!) : c])) };
}

function print(root: Node): JsonLine[] {
  const out: JsonLine[] = [];
  const go = (n: Node, path: string, depth: number, key: string | null, comma: boolean) => {
    if (n.kind === 'leaf') {
      out.push({ id: `leaf ${n.leaf.path}`, depth, key, text: n.leaf.value, comma, leaf: n.leaf });
      return;
    }
    const [o, c] = n.kind === 'obj' ? ['{', '}'] : ['[', ']'];
    out.push({ id: `open${o} ${path}`, depth, key, text: o, comma: false, leaf: null });
    const kids = [...n.children];
    kids.forEach(([seg, child], i) => {
      const p = typeof seg === 'number' ? `${path}[${seg}]` : `${path}.${JSON.stringify(seg)}`;
      go(child, p, depth + 1, typeof seg === 'number' ? null : `${JSON.stringify(seg)}:`, i < kids.length - 1);
    });
    out.push({ id: `close${c} ${path}`, depth, key: null, text: c, comma, leaf: null });
  };
  go(root, '$', 0, null, false);
  return out;
}

/** The JSON's lines, rebuilt from its fidelity leaves. */
export function jsonLines(v: JsonValue): JsonLine[] {
  return print(tree(v));
}

/**
 * Pairs the lines of both observations: a real line is paired with the rehearsed line of the same id when that
 * one has not been passed yet; the rehearsed lines skipped on the way are shown alone, before it. With the
 * rehearsal's keys in the real order, the shared lines come in the same order on both sides, so all pair.
 */
function align(a: readonly JsonLine[], b: readonly JsonLine[]): [JsonLine | null, JsonLine | null][] {
  const at = new Map(a.map((l, i) => [l.id, i]));
  const rows: [JsonLine | null, JsonLine | null][] = [];
  let i = 0;
  for (const r of b) {
    const j = at.get(r.id);
    if (j === undefined || j < i) {
      rows.push([null, r]);
      continue;
    }
    for (; i < j; i++) rows.push([a[i], null]);
    rows.push([a[j], r]);
    i = j + 1;
  }
  for (; i < a.length; i++) rows.push([a[i], null]);
  return rows;
}

export function diffObservations(rehearsed: JsonValue, real: JsonValue): ObservationDiff {
  const tb = tree(real);
  const a = print(orderLike(tree(rehearsed), tb));
  const b = print(tb);
  const valueOf = (ls: JsonLine[]) => new Map(ls.flatMap((l) => (l.leaf ? [[l.leaf.path, l.leaf.value] as const] : [])));
  const va = valueOf(a);
  const vb = valueOf(b);
  // A field's mark is decided by its path on both sides, not by where the alignment put it, so it always says
  // how the field counts in F1.
  const mark = (l: JsonLine, other: Map<string, string>, alone: Mark): Mark => {
    const o = other.get(l.leaf!.path);
    return o === undefined ? alone : o === l.leaf!.value ? 'same' : 'differs';
  };
  const rows = align(a, b).map(([x, y]): DiffRow => {
    const l = y ?? x!;
    if (!l.leaf) return { rehearsed: x, real: y, mark: null };
    return { rehearsed: x, real: y, mark: y ? mark(y, va, 'real-only') : mark(x!, vb, 'rehearsed-only') };
  });
  let same = 0;
  let differs = 0;
  for (const [p, v] of va) if (vb.has(p)) (vb.get(p) === v ? same++ : differs++);
  return {
    rows,
    exact: canonical(rehearsed) === canonical(real),
    f1: leafF1(flattenLeaves(rehearsed), flattenLeaves(real)),
    errorAgree: isErrorJson(rehearsed) === isErrorJson(real),
    rehearsedError: isErrorJson(rehearsed),
    realError: isErrorJson(real),
    counts: { rehearsed: va.size, real: vb.size, same, differs, rehearsedOnly: va.size - same - differs, realOnly: vb.size - same - differs },
  };
}

/** An observation's JSON text (the protocol's serialised form), or null when it is not JSON. */
export function parseObservationText(text: string): JsonValue | null {
  try {
    return JSON.parse(text) as JsonValue;
  } catch {
    return null;
  }
}
