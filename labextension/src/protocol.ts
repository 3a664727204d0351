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
  /** only these cells (the kernel checks what a review changed); null: every cell */
  ids: string[] | null;
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

/**
 * A message from the kernel. `to`: the client id (kernel connection) of the one front end that serves it, when
 * the kernel names one: several windows on one notebook hear every message, and only that one acts.
 */
export type Incoming =
  | { kind: 'request'; request: Request; to: string | null }
  | { kind: 'cancel'; id: number; to: string | null }
  | { kind: 'invalid'; id: number | null; error: string; to: string | null };

/** Does a message addressed `to` concern the front end whose client id is `client`? (null: every one) */
export function addressedTo(to: string | null, client: string): boolean {
  return to === null || to === client;
}

/** `skipped`: a cell that would start a shiro turn, which a turn's run never runs (see `isShiroCell`). */
export type RunStatus = 'ok' | 'error' | 'missing' | 'not-code' | 'not-run' | 'skipped';

const SHIRO_CELL = /^\s*%%?shiro\b|run_(?:line|cell)_magic\(\s*['"]shiro['"]/m;

/**
 * Would running this cell start a shiro turn (a `%shiro` or `%%shiro` line, or the magic called by name)? The
 * agent's run never runs one: a turn must not start inside the turn that asked for the run.
 */
export function isShiroCell(source: string): boolean {
  return SHIRO_CELL.test(source);
}

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
    return { kind: 'invalid', id: null, error: 'the message is not an object', to: null };
  }
  const id = Number.isInteger(data.id) ? (data.id as number) : null;
  const to = typeof data.to === 'string' ? data.to : null;
  const invalid = (at: number | null, error: string): Incoming => ({ kind: 'invalid', id: at, error, to });
  if (data.type === 'cancel') {
    return id === null ? invalid(null, 'cancel needs an integer id') : { kind: 'cancel', id, to };
  }
  if (data.type !== 'request') {
    return invalid(id, `unknown message type ${JSON.stringify(data.type)}`);
  }
  if (id === null) {
    return invalid(null, 'a request needs an integer id');
  }
  const strings = (value: unknown): value is string[] => Array.isArray(value) && value.every(x => typeof x === 'string');
  if (data.op === 'read') {
    if (data.ids !== undefined && data.ids !== null && !strings(data.ids)) {
      return invalid(id, 'read takes ids, a list of cell ids, or none');
    }
    return { kind: 'request', request: { type: 'request', id, op: 'read', ids: (data.ids as string[]) ?? null }, to };
  }
  if (data.op === 'run') {
    if (!strings(data.ids)) {
      return invalid(id, 'run needs ids, a list of cell ids');
    }
    return { kind: 'request', request: { type: 'request', id, op: 'run', ids: data.ids }, to };
  }
  if (data.op === 'review') {
    if (!Array.isArray(data.changes) || data.changes.length === 0) {
      return invalid(id, 'review needs changes, a non-empty list');
    }
    const changes: Change[] = [];
    for (let k = 0; k < data.changes.length; k++) {
      const change = parseChange(data.changes[k], k);
      if (typeof change === 'string') {
        return invalid(id, change);
      }
      changes.push(change);
    }
    return {
      kind: 'request',
      to,
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
  return invalid(id, `unknown op ${JSON.stringify(data.op)}`);
}

/** The reply to a request. */
export function okReply(id: number, fields: Record<string, unknown>): Record<string, unknown> {
  return { type: 'reply', id, ok: true, ...fields };
}

export function errorReply(id: number, error: string): Record<string, unknown> {
  return { type: 'reply', id, ok: false, error };
}

/**
 * The answer to the kernel's open. `client`: this window's kernel connection (the `session` of the messages it
 * sends), which the kernel names in `to` when this front end is to serve a request.
 */
export function hello(path: string, panel: string, client: string): Record<string, unknown> {
  // withdraws: a cancelled review is answered with what the user decided before it (docs/notebook-protocol.md)
  return { type: 'hello', protocol: PROTOCOL, path, panel, client, version: VERSION, withdraws: true };
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
