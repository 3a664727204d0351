/**
 * Pure helpers for drawing a shiro turn: the same text the kernel's live view and static HTML show
 * (shiro_kernel/render.py, shiro_kernel/widgets.py). No DOM and no JupyterLab imports, so node's
 * test runner checks them directly.
 */

// with its extension: node's test runner loads lib/ as ES modules, which name files whole
import { INumber, numbersLine, numbersOf } from './marks.js';

export const TURN_MIME = 'application/vnd.shiro.turn+json';
export const BAR_WIDTH = 40;

export type TaskStatus = 'pending' | 'in_progress' | 'done' | 'blocked';

export interface ITask {
  content: string;
  status: TaskStatus | string;
  note?: string | null;
}

export interface ITextEntry {
  type: 'text';
  text: string;
}

/** What a tool call displayed (a figure, a DataFrame's HTML...), as the kernel captured it. */
export interface IOutput {
  data: Record<string, unknown>;
  metadata?: Record<string, unknown>;
}

export interface IToolEntry {
  type: 'tool';
  callId?: string;
  name: string;
  args: string;
  status: 'running' | 'ok' | 'error' | string;
  seconds?: number | null;
  output?: string;
  /** the call's arguments in full (the code, the command), line breaks kept */
  code?: string;
  outputs?: IOutput[];
  /** what a notebook_edit / notebook_insert / notebook_delete call did to the document */
  change?: ICellChange;
}

/** A cell change as the bundle keeps it (a tool entry's `change`). */
export interface ICellChange {
  kind: 'edit' | 'insert' | 'delete';
  /** the cell's index (0-based, as notebook_read numbers cells) */
  cell: number;
  added: number;
  removed: number;
  /** a unified diff, made by the kernel from the model's text: drawn as text only */
  diff: string;
  status: 'accepted' | 'applied' | 'rejected' | 'conflict' | 'missing' | 'editing' | string;
}

export interface INoticeEntry {
  type: 'notice';
  kind?: string;
  text: string;
}

export type Entry = ITextEntry | IToolEntry | INoticeEntry;

export interface ITurn {
  version: number;
  sessionId?: string;
  entries: Entry[];
  tasks?: ITask[];
  usage?: {
    inputTokens: number;
    outputTokens: number;
    cachedInputTokens?: number;
    costUsd?: number | null;
    /** the server sent no usage: the counts are the estimate (characters / 4) */
    estimated?: boolean;
  };
  /** the answer's numbers, looked up in the turn's outputs (./marks.ts) */
  numbers?: INumber[];
  end?: { reason: string; error?: string | null };
  contextPercent?: number;
  resume?: string;
}

export const MARKERS: Record<string, string> = {
  pending: '[ ]',
  in_progress: '[~]',
  done: '[x]',
  blocked: '[!]'
};

/** `tasks ####.... 1/4  1 blocked` (40 wide); '' with no tasks. */
export function taskBar(tasks: ITask[] | undefined): string {
  if (!tasks || tasks.length === 0) {
    return '';
  }
  const total = tasks.length;
  const done = tasks.filter(t => t.status === 'done').length;
  const blocked = tasks.filter(t => t.status === 'blocked').length;
  // the seed rounds half up (Math.round), and so does the kernel's bar: both views draw the same one
  const filled = Math.round((done / total) * BAR_WIDTH);
  const bar = `tasks ${'#'.repeat(filled)}${'.'.repeat(BAR_WIDTH - filled)} ${done}/${total}`;
  return blocked ? `${bar}  ${blocked} blocked` : bar;
}

export function marker(status: string): string {
  return MARKERS[status] ?? '[?]';
}

export function duration(seconds: number | null | undefined): string {
  if (seconds === null || seconds === undefined) {
    return '';
  }
  return seconds < 1 ? `${(seconds * 1000).toFixed(0)} ms` : `${seconds.toFixed(1)} s`;
}

const TOOL_MARKS: Record<string, string> = { running: '…', ok: '✓', error: '✗' };

/** The tool row's one line: `✓ python(df.x.mean()) · ok · 4 ms`. */
export function toolLine(entry: IToolEntry): string {
  const bits = [entry.status];
  const d = duration(entry.seconds);
  if (d) {
    bits.push(d);
  }
  const mark = TOOL_MARKS[entry.status] ?? '•';
  return `${mark} ${entry.name}(${entry.args}) · ${bits.join(' · ')}`;
}

/**
 * The line shown under a failed row: the first line of the error, whole when it is a refusal (it says
 * how to allow the call), else cut at 160 characters — as the kernel's Markdown and HTML do.
 */
export function errorLine(entry: IToolEntry): string {
  if (entry.status !== 'error' || !entry.output) {
    return '';
  }
  const first = entry.output.split('\n').map(l => l.trim()).find(l => l) ?? '';
  if (first.startsWith('Error: not approved') || first.length <= 160) {
    return first;
  }
  return first.slice(0, 157) + '...';
}

/** The outputs worth drawing: a data object with at least one MIME type. */
export function drawableOutputs(entry: IToolEntry): IOutput[] {
  return (entry.outputs ?? []).filter(
    o => o && typeof o === 'object' && o.data && typeof o.data === 'object' && Object.keys(o.data).length > 0
  );
}

function thousands(n: number): string {
  return String(Math.trunc(n)).replace(/\B(?=(\d{3})+(?!\d))/g, ',');
}

/**
 * `⚠ 2 numbers not found in this turn's outputs · 3,856 in (3,712 cached) · 1 out tokens · $0.0003 ·
 * context 12% · resume: %shiro -r 0193ab2c`, as the kernel's footer (shiro_kernel/ui/render.py).
 */
export function footer(turn: ITurn): string {
  const parts: string[] = [];
  const missing = numbersLine(numbersOf(turn.numbers));
  if (missing) {
    parts.push(missing);
  }
  if (turn.usage) {
    const cached = turn.usage.cachedInputTokens;
    const ofIt = typeof cached === 'number' && cached > 0 ? ` (${thousands(cached)} cached)` : '';
    const mark = turn.usage.estimated === true ? '~' : '';
    const said = turn.usage.estimated === true ? ' (estimated: the server sent no usage)' : '';
    parts.push(
      `${mark}${thousands(turn.usage.inputTokens)} in${ofIt} · ${mark}${thousands(turn.usage.outputTokens)} out tokens${said}`
    );
    if (turn.usage.costUsd !== null && turn.usage.costUsd !== undefined) {
      parts.push(`$${turn.usage.costUsd.toFixed(4)}`);
    }
  }
  if (typeof turn.contextPercent === 'number') {
    parts.push(`context ${turn.contextPercent}%`);
  }
  if (turn.resume) {
    parts.push(`resume: ${turn.resume}`);
  }
  return parts.join(' · ');
}

/** Is this value a turn bundle we can draw? */
export function isTurn(value: unknown): value is ITurn {
  return (
    typeof value === 'object' &&
    value !== null &&
    Array.isArray((value as ITurn).entries)
  );
}

/**
 * Prompt history walking, as the seed's prompt does it: the first Up keeps the draft, Down past the
 * newest entry gives the draft back. `entries` are oldest first.
 */
export class HistoryWalker {
  private index: number;
  private draft = '';

  constructor(private entries: string[]) {
    this.index = entries.length;
  }

  setEntries(entries: string[]): void {
    this.entries = entries;
    this.index = entries.length;
  }

  /** The text to show after Up, or null when there is nothing older. */
  up(current: string): string | null {
    if (this.index === 0 || this.entries.length === 0) {
      return null;
    }
    if (this.index === this.entries.length) {
      this.draft = current;
    }
    this.index -= 1;
    return this.entries[this.index];
  }

  /** The text to show after Down, or null when already at the draft. */
  down(): string | null {
    if (this.index >= this.entries.length) {
      return null;
    }
    this.index += 1;
    return this.index === this.entries.length ? this.draft : this.entries[this.index];
  }
}

/** The cell the prompt box inserts: `%%shiro` then the prompt. */
export function shiroCell(prompt: string): string {
  return `%%shiro\n${prompt.trim()}`;
}

/** Parse the kernel's printed history (a JSON list of strings, or of {prompt} objects). */
export function parseHistory(stdout: string): string[] {
  const line = stdout.trim().split('\n').pop() ?? '';
  try {
    const value = JSON.parse(line);
    if (!Array.isArray(value)) {
      return [];
    }
    return value
      .map(v => (typeof v === 'string' ? v : v && typeof v.prompt === 'string' ? v.prompt : ''))
      .filter(v => v);
  } catch {
    return [];
  }
}

/** Is this a change the renderer can draw as a compact row? (A malformed one falls back to the tool row.) */
export function isCellChange(value: unknown): value is ICellChange {
  const c = value as ICellChange;
  return (
    typeof value === 'object' &&
    value !== null &&
    ['edit', 'insert', 'delete'].includes(c.kind) &&
    Number.isInteger(c.cell) &&
    typeof c.status === 'string'
  );
}

const DONE_VERB: Record<string, string> = { edit: 'edited', insert: 'inserted', delete: 'deleted' };
const NOT_DONE: Record<string, string> = { edit: 'edit of', delete: 'delete of' };

/**
 * Where an insert that did not happen would have gone: the kernel keeps the cell it was to follow
 * (`after`), -1 for the top, -2 for below the asking cell (propose_cell).
 */
function notInserted(cell: number): string {
  return cell === -1 ? 'insert at the top' : cell < -1 ? 'insert below this cell' : `insert after cell ${cell}`;
}
const CHANGE_MARKS: Record<string, string> = { accepted: '✓', applied: '✓', pending: '…', running: '…' };

function count(n: unknown): number {
  return typeof n === 'number' && Number.isFinite(n) ? Math.max(0, Math.trunc(n)) : 0;
}

/**
 * A change's compact row: `✓ edited cell 3: +2 −1` when it is in the document (accepted, or applied
 * under approval = "auto"), else `✗ edit of cell 3: +2 −1 · rejected` (conflict, missing, editing...);
 * an insert not made says where it was to go: `✗ insert after cell 1: +1 −0 · rejected`.
 */
export function changeLine(change: ICellChange): string {
  const counts = `+${count(change.added)} −${count(change.removed)}`;
  const done = change.status === 'accepted' || change.status === 'applied';
  const mark = CHANGE_MARKS[change.status] ?? '✗';
  if (done) {
    return `${mark} ${DONE_VERB[change.kind]} cell ${change.cell}: ${counts}`;
  }
  const what = change.kind === 'insert' ? notInserted(change.cell) : `${NOT_DONE[change.kind]} cell ${change.cell}`;
  return `${mark} ${what}: ${counts} · ${change.status}`;
}
