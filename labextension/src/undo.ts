/**
 * Undo buttons on a saved turn's tool rows (issue 35 #2). A row shows one only while the notebook's running
 * kernel can take its step back: the kernel lists those calls (`%shiro /undoable`, run silently, its answer
 * read from IOPub). A click runs `%shiro /undo CALL_ID` silently — that step and every one after it — and the
 * report (what was restored and what could not, naming each) goes under the row, as text.
 *
 * One `UndoState` per notebook panel asks for all the panel's renderings: when a turn is drawn, after a cell
 * ran, after an undo. A kernel restart or change forgets what was listed (a restarted kernel has no
 * checkpoints: no button). No kernel, no state, no button.
 *
 * The call id comes from the notebook, and first from the model (untrusted): it is sent only for a call the
 * kernel itself listed, only as a JSON string literal (which Python reads as the same string), and to the magic
 * called as a function — `run_line_magic` would expand `{…}` and `$name` in its line (IPython's `var_expand`),
 * running what an id holds.
 *
 * A live kernel runs `/undo` off its main thread (the front end answers the cell reverts only while that thread
 * is idle): the silent request shows a placeholder, then updates it in place with the report
 * (`update_display_data` with the request as parent), so the request is kept open until that update.
 *
 * Types only from JupyterLab: node's test runner loads the pure parts.
 */
import type { Kernel } from '@jupyterlab/services';

/** `%shiro` as a function: no `{…}` or `$name` in its line is expanded (none is evaluated). */
const MAGIC = 'get_ipython().find_line_magic("shiro")';

/** Lists the calls the kernel can take back now: `{"calls": [...]}`. */
export const UNDOABLE_CODE = `${MAGIC}("/undoable")`;

/** How long a click waits for the report of an undo that runs off the kernel's thread (each cell revert may
 * wait 10 s for the front end). */
export const UNDO_WAIT_MS = 120_000;

export const TAKING_BACK = 'taking back this step and those after it…';
export const NO_ANSWER = 'the kernel did not answer: nothing is known to be undone';
export const NOT_LISTED = 'not undone: the running kernel can no longer take this step back';

/** `%shiro /undo CALL_ID` as code: the line is a JSON string literal, which Python reads as the same string. */
export function undoCode(callId: string): string {
  return `${MAGIC}(${JSON.stringify('/undo ' + callId)})`;
}

/** The calls of `/undoable`'s answer (its last line that is one); none for anything else (an error, no shiro). */
export function parseUndoable(text: string): Set<string> {
  const lines = text.split('\n').reverse();
  for (const line of lines) {
    try {
      const value = JSON.parse(line);
      if (value && typeof value === 'object' && Array.isArray(value.calls)) {
        return new Set(value.calls.filter((c: unknown): c is string => typeof c === 'string'));
      }
    } catch {
      // not the answer's line
    }
  }
  return new Set();
}

/**
 * What a silent request showed, from its IOPub messages: the `text/plain` of its last display (or its stdout),
 * and whether that display waits for the update the kernel promised (it had a display id).
 */
export class Shown {
  text = '';
  private pending: string | null = null;

  get waiting(): boolean {
    return this.pending !== null;
  }

  feed(type: string, content: any): void {
    const plain = content?.data?.['text/plain'];
    const id = content?.transient?.display_id;
    if (type === 'display_data' && typeof plain === 'string') {
      this.text = plain;
      this.pending = typeof id === 'string' && id ? id : null;
    } else if (type === 'update_display_data' && typeof plain === 'string' && id === this.pending) {
      this.text = plain;
      this.pending = null;
    } else if (type === 'stream' && content?.name === 'stdout' && typeof content.text === 'string') {
      this.text += content.text;
    }
  }
}

/** Run `code` silently in `kernel`; what it showed (waiting up to `waitMs` for a promised update). '' when the
 * kernel answered nothing (it died, restarted, or the code failed). */
export async function runSilently(kernel: Kernel.IKernelConnection, code: string, waitMs = 0): Promise<string> {
  const shown = new Shown();
  let updated: (() => void) | null = null;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let future: ReturnType<Kernel.IKernelConnection['requestExecute']> | null = null;
  try {
    const request = kernel.requestExecute({ code, silent: true, store_history: false }, false); // kept open for the update
    future = request;
    request.onIOPub = msg => {
      shown.feed(msg.header.msg_type, msg.content);
      if (!shown.waiting && updated) {
        updated();
      }
    };
    await request.done;
    if (shown.waiting && waitMs > 0) {
      await new Promise<void>(resolve => {
        updated = resolve;
        timer = setTimeout(resolve, waitMs);
      });
    }
  } catch {
    return '';
  } finally {
    clearTimeout(timer);
    future?.dispose();
  }
  return shown.waiting ? '' : shown.text;
}

/** What one notebook panel's kernel can take back, asked for all the panel's renderings. */
export class UndoState {
  /** the calls the kernel listed when last asked */
  calls = new Set<string>();
  /** the calls an undo from this window took back (their rows are marked) */
  undone = new Set<string>();
  /** the kernel answered since it (re)started */
  asked = false;
  /** an undo runs: no second click */
  busy = false;
  private listeners = new Set<() => void>();
  private inflight: Promise<void> | null = null;
  private again = false;
  private generation = 0;

  constructor(private kernel: () => Kernel.IKernelConnection | null) {}

  /** Call `listener` after each change; returns the function that stops that. */
  subscribe(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Ask the kernel again (asks made while one is out are answered by one more, after it). */
  refresh(): Promise<void> {
    if (this.inflight) {
      this.again = true;
      return this.inflight;
    }
    this.inflight = (async () => {
      do {
        this.again = false;
        const generation = this.generation;
        const kernel = this.kernel();
        // asked while an undo runs (a `%shiro /undo` cell just ended), the kernel answers once it has ended
        const calls = kernel ? parseUndoable(await runSilently(kernel, UNDOABLE_CODE, UNDO_WAIT_MS)) : new Set<string>();
        if (generation === this.generation) {
          this.calls = calls;
          this.asked = true;
        }
      } while (this.again);
    })().finally(() => {
      this.inflight = null;
      this.notify();
    });
    return this.inflight;
  }

  /** The kernel restarted or changed: nothing of the old one can be taken back. */
  forget(): void {
    this.generation++;
    this.calls = new Set();
    this.undone = new Set();
    this.notify();
  }

  /** Take back `callId`'s step and every one after it; the kernel's report. */
  async undo(callId: string): Promise<string> {
    const kernel = this.kernel();
    if (!kernel || !this.calls.has(callId)) {
      return NOT_LISTED;
    }
    if (this.busy) {
      return 'not undone: an undo from this window is running';
    }
    const before = new Set(this.calls);
    this.busy = true;
    this.notify();
    let text = '';
    try {
      text = await runSilently(kernel, undoCode(callId), UNDO_WAIT_MS);
    } finally {
      this.busy = false;
    }
    await this.refresh();
    before.forEach(call => {
      if (!this.calls.has(call)) {
        this.undone.add(call);
      }
    });
    this.notify();
    return text.trim() || NO_ANSWER;
  }

  private notify(): void {
    this.listeners.forEach(listener => listener());
  }
}

/** The Undo controls of one rendering's tool rows (`rows`: each row by its call id), drawn from its panel's
 * state; what a click here reported stays under its row. */
export class UndoRows {
  private rows = new Map<string, HTMLElement>();
  private reports = new Map<string, string>();
  private state: UndoState | null = null;
  private unsubscribe: (() => void) | null = null;

  constructor(private host: HTMLElement) {}

  setRows(rows: Map<string, HTMLElement>): void {
    this.rows = rows;
    this.draw();
  }

  /** Follow `state` (null: not in a notebook panel); `ask`: the kernel is asked again first. */
  follow(state: UndoState | null, ask: boolean): void {
    if (state !== this.state) {
      this.unsubscribe?.();
      this.state = state;
      this.unsubscribe = state ? state.subscribe(() => this.draw()) : null;
    }
    if (state && ask) {
      void state.refresh();
    }
    this.draw();
  }

  dispose(): void {
    this.unsubscribe?.();
    this.unsubscribe = null;
    this.state = null;
  }

  private draw(): void {
    const state = this.state;
    this.host.dataset.shiroUndo = !state ? 'none' : state.asked ? 'asked' : 'asking';
    this.rows.forEach((row, callId) => this.drawRow(row, callId, state));
  }

  private drawRow(row: HTMLElement, callId: string, state: UndoState | null): void {
    const can = !!state && state.calls.has(callId);
    const undone = !!state && state.undone.has(callId);
    const report = this.reports.get(callId);
    row.classList.toggle('shiro-row-undone', undone);
    let box = row.querySelector<HTMLElement>(':scope > .shiro-undo');
    if (!can && !undone && report === undefined) {
      box?.remove();
      return;
    }
    if (!box) {
      box = document.createElement('div');
      box.className = 'shiro-undo';
      const button = document.createElement('button');
      button.type = 'button';
      button.className = 'jp-Button jp-mod-styled jp-mod-reject shiro-undo-button';
      button.textContent = 'Undo';
      button.title = 'Take back this step and every one after it (variables, files, cell changes)';
      button.addEventListener('click', event => {
        event.stopPropagation();
        void this.click(callId);
      });
      const mark = document.createElement('span');
      mark.className = 'shiro-undone';
      mark.textContent = '↶ undone';
      const text = document.createElement('pre');
      text.className = 'shiro-undo-report';
      box.append(button, mark, text);
      row.appendChild(box);
    }
    const button = box.querySelector<HTMLButtonElement>('.shiro-undo-button')!;
    show(button, can);
    button.disabled = !!state?.busy;
    show(box.querySelector<HTMLElement>('.shiro-undone')!, undone);
    const text = box.querySelector<HTMLElement>('.shiro-undo-report')!;
    text.textContent = report ?? ''; // the kernel's words, as text: never HTML
    show(text, report !== undefined);
  }

  private async click(callId: string): Promise<void> {
    const state = this.state;
    if (!state) {
      return;
    }
    this.reports.set(callId, TAKING_BACK);
    this.draw();
    this.reports.set(callId, await state.undo(callId));
    this.draw();
  }
}

/** Shown or not (JupyterLab's button styles would override the `hidden` attribute). */
function show(node: HTMLElement, shown: boolean): void {
  node.style.display = shown ? '' : 'none';
}
