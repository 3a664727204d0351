/**
 * The notebook channel's messages (docs/notebook-protocol.md), pure: what the kernel may send and how it
 * is checked, which panel answers a kernel's open, whether a change may be applied to a cell as it is
 * now, and the ledger of a review's decisions. No DOM and no JupyterLab imports: node's test runner
 * checks all of it; ./channel.ts and ./review.ts do the rest.
 */

export const TARGET = 'shiro.notebook';
export const PROTOCOL = 1;
/** The extension's version, said in `hello` (test/protocol.test.mjs checks it against package.json). */
export const VERSION = '0.1.0';
export const CLOSED_NOTE = 'the notebook was closed';

export interface IEditChange {
  kind: 'edit';
  id: string;
  source: string;
  expect: string;
}

export interface IInsertChange {
  kind: 'insert';
  after: string | null;
  source: string;
  cell_type: 'code' | 'markdown' | 'raw';
}

export interface IDeleteChange {
  kind: 'delete';
  id: string;
  expect: string;
}

export type Change = IEditChange | IInsertChange | IDeleteChange;

export type ChangeStatus = 'accepted' | 'rejected' | 'conflict' | 'missing' | 'editing';

export interface IChangeResult {
  status: ChangeStatus;
  id: string | null;
  index: number | null;
  note?: string;
}

export interface IReadRequest {
  type: 'request';
  id: number;
  op: 'read';
}

export interface IReviewRequest {
  type: 'request';
  id: number;
  op: 'review';
  changes: Change[];
  review: boolean;
  turn: string | null;
  title: string;
}

export interface IRunRequest {
  type: 'request';
  id: number;
  op: 'run';
  ids: string[];
}

export type Request = IReadRequest | IReviewRequest | IRunRequest;

export type Incoming =
  | { kind: 'request'; request: Request }
  | { kind: 'cancel'; id: number }
  | { kind: 'invalid'; id: number | null; error: string };

export type RunStatus = 'ok' | 'error' | 'missing' | 'not-code' | 'not-run';

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

const CELL_TYPES = ['code', 'markdown', 'raw'];

/** One change as the kernel sent it, or the sentence saying what is wrong with it. */
export function parseChange(value: unknown, k: number): Change | string {
  if (!isObject(value)) {
    return `change ${k} is not an object`;
  }
  const str = (key: string): boolean => typeof value[key] === 'string';
  if (value.kind === 'edit') {
    if (!str('id') || !str('source') || !str('expect')) {
      return `change ${k} (edit) needs string id, source and expect`;
    }
    return { kind: 'edit', id: value.id as string, source: value.source as string, expect: value.expect as string };
  }
  if (value.kind === 'insert') {
    const after = value.after ?? null;
    const cellType = value.cell_type ?? 'code';
    if ((after !== null && typeof after !== 'string') || !str('source') || !CELL_TYPES.includes(cellType as string)) {
      return `change ${k} (insert) needs after (a cell id or null), a string source and a cell_type of code, markdown or raw`;
    }
    return { kind: 'insert', after, source: value.source as string, cell_type: cellType as IInsertChange['cell_type'] };
  }
  if (value.kind === 'delete') {
    if (!str('id') || !str('expect')) {
      return `change ${k} (delete) needs string id and expect`;
    }
    return { kind: 'delete', id: value.id as string, expect: value.expect as string };
  }
  return `change ${k} has an unknown kind ${JSON.stringify(value.kind)}`;
}

/** A comm message from the kernel: a request, a cancel, or what is wrong with it (and its id, to reply). */
export function parseMessage(data: unknown): Incoming {
  if (!isObject(data)) {
    return { kind: 'invalid', id: null, error: 'the message is not an object' };
  }
  const id = Number.isInteger(data.id) ? (data.id as number) : null;
  if (data.type === 'cancel') {
    return id === null ? { kind: 'invalid', id: null, error: 'cancel needs an integer id' } : { kind: 'cancel', id };
  }
  if (data.type !== 'request') {
    return { kind: 'invalid', id, error: `unknown message type ${JSON.stringify(data.type)}` };
  }
  if (id === null) {
    return { kind: 'invalid', id: null, error: 'a request needs an integer id' };
  }
  if (data.op === 'read') {
    return { kind: 'request', request: { type: 'request', id, op: 'read' } };
  }
  if (data.op === 'run') {
    const ids = data.ids;
    if (!Array.isArray(ids) || !ids.every(x => typeof x === 'string')) {
      return { kind: 'invalid', id, error: 'run needs ids, a list of cell ids' };
    }
    return { kind: 'request', request: { type: 'request', id, op: 'run', ids: ids as string[] } };
  }
  if (data.op === 'review') {
    if (!Array.isArray(data.changes) || data.changes.length === 0) {
      return { kind: 'invalid', id, error: 'review needs changes, a non-empty list' };
    }
    const changes: Change[] = [];
    for (let k = 0; k < data.changes.length; k++) {
      const change = parseChange(data.changes[k], k);
      if (typeof change === 'string') {
        return { kind: 'invalid', id, error: change };
      }
      changes.push(change);
    }
    return {
      kind: 'request',
      request: {
        type: 'request',
        id,
        op: 'review',
        changes,
        review: data.review !== false, // nothing changes before Accept unless the kernel says so
        turn: typeof data.turn === 'string' ? data.turn : null,
        title: typeof data.title === 'string' ? data.title : ''
      }
    };
  }
  return { kind: 'invalid', id, error: `unknown op ${JSON.stringify(data.op)}` };
}

/** The reply to a request. */
export function okReply(id: number, fields: Record<string, unknown>): Record<string, unknown> {
  return { type: 'reply', id, ok: true, ...fields };
}

export function errorReply(id: number, error: string): Record<string, unknown> {
  return { type: 'reply', id, ok: false, error };
}

export function hello(path: string, panel: string): Record<string, unknown> {
  // withdraws: a cancelled review is answered with what the user decided before it (docs/notebook-protocol.md)
  return { type: 'hello', protocol: PROTOCOL, path, panel, version: VERSION, withdraws: true };
}

function normalise(path: string): string[] {
  return path
    .replace(/\\/g, '/')
    .split('/')
    .filter(part => part !== '' && part !== '.');
}

/**
 * How many trailing path parts `kernelPath` and `panelPath` share when one is a tail of the other (the
 * kernel knows an absolute path, the panel a server-relative one), else 0.
 */
export function tailMatch(kernelPath: string, panelPath: string): number {
  const k = normalise(kernelPath);
  const p = normalise(panelPath);
  const n = Math.min(k.length, p.length);
  if (n === 0) {
    return 0;
  }
  for (let d = 1; d <= n; d++) {
    if (k[k.length - d] !== p[p.length - d]) {
      return 0;
    }
  }
  return n;
}

/**
 * Which of a kernel's panels answers its open: the one whose path matches the kernel's by the longest
 * tail (the first such when views of one document tie), or, when the kernel knows no path, the only
 * panel of that kernel. null: nobody answers.
 */
export function chooseAnswerer<K>(kernelPath: string | null, panels: Array<{ key: K; path: string }>): K | null {
  if (kernelPath === null || kernelPath === undefined) {
    return panels.length === 1 ? panels[0].key : null;
  }
  let best: K | null = null;
  let bestLength = 0;
  for (const panel of panels) {
    const length = tailMatch(kernelPath, panel.path);
    if (length > bestLength) {
      best = panel.key;
      bestLength = length;
    }
  }
  return best;
}

/** A cell as it is now, for the checks a change must pass (null: no such cell). */
export interface ICellNow {
  source: string;
  editing: boolean;
}

/**
 * May this change be applied to the document as it is now? `target` is the edited or deleted cell, or
 * the cell an insert goes after (for an insert at the top, `after: null`, it is not looked at).
 */
export function checkChange(change: Change, target: ICellNow | null): 'ok' | 'missing' | 'conflict' | 'editing' {
  if (change.kind === 'insert') {
    return change.after === null || target ? 'ok' : 'missing';
  }
  if (!target) {
    return 'missing';
  }
  if (target.source !== change.expect) {
    return 'conflict';
  }
  return target.editing ? 'editing' : 'ok';
}

/** The decisions of one review: each change decided once; the reply goes when all are. */
export class Ledger {
  private readonly decided: Array<IChangeResult | null>;

  constructor(readonly size: number) {
    this.decided = new Array(size).fill(null);
  }

  /** Record change k's result; false when it was decided already (the first decision stands). */
  decide(k: number, result: IChangeResult): boolean {
    if (k < 0 || k >= this.size || this.decided[k] !== null) {
      return false;
    }
    this.decided[k] = result;
    return true;
  }

  isDecided(k: number): boolean {
    return this.decided[k] !== null;
  }

  pending(): number[] {
    return this.decided.flatMap((r, k) => (r === null ? [k] : []));
  }

  get done(): boolean {
    return this.decided.every(r => r !== null);
  }

  results(): IChangeResult[] {
    return this.decided.map(r => r ?? { status: 'rejected', id: null, index: null });
  }

  /** What is decided so far, in order: null for a change not decided. */
  sofar(): Array<IChangeResult | null> {
    return [...this.decided];
  }
}
