/**
 * "Fix with shiro": a code cell whose outputs hold an error gets a small button under its output area
 * (the error itself renders as JupyterLab draws it); the button, or the `shiro:fix-cell` command on the
 * active cell, inserts a `%%shiro` cell below the failed one asking for the fix as a `notebook_edit` of
 * that cell (./fixprompt.ts), and runs it. The fix then arrives as a diff on the failed cell.
 *
 * Only an error the user produced in this kernel is sent at once: one this front end saw come back from
 * running the cell (`NotebookActions.executed`), since the kernel last started. Any other — saved in the
 * file (a notebook someone sent: its traceback may say anything), from an earlier kernel, pasted — fills
 * the prompt box with the prompt, its error framed as data (`fixPrompt(..., { saved: true })`), and waits
 * for Enter (issue 33).
 */
import { Dialog } from '@jupyterlab/apputils';
import { Cell, CodeCell } from '@jupyterlab/cells';
import * as nbformat from '@jupyterlab/nbformat';
import { Notebook, NotebookActions, NotebookPanel } from '@jupyterlab/notebook';
import { IOutputModel } from '@jupyterlab/rendermime';
import { Widget } from '@lumino/widgets';

import { shiroCell } from './format';
import { fixPrompt } from './fixprompt';
import { placeInCell } from './review';

export const FIX_COMMAND = 'shiro:fix-cell';

/** Loads the magics silently, so the `%%shiro` cell works in a kernel that never ran `%load_ext`. */
export const LOAD_CODE = 'get_ipython().extension_manager.load_extension("shiro_kernel")';

/** The cell's last error output (its model), if it has one. */
function errorOutput(cell: Cell | null): IOutputModel | null {
  if (!(cell instanceof CodeCell)) {
    return null;
  }
  const outputs = cell.model.outputs;
  for (let i = outputs.length - 1; i >= 0; i--) {
    const output = outputs.get(i);
    if (output.type === 'error') {
      return output;
    }
  }
  return null;
}

/** The cell's last error output, if it has one. */
export function errorOf(cell: Cell | null): nbformat.IError | null {
  const output = errorOutput(cell);
  return output ? (output.toJSON() as nbformat.IError) : null;
}

/**
 * The errors this front end saw come back from running a cell in a panel's kernel, since it last started
 * (a restart or another kernel forgets them all).
 */
class ProducedHere {
  private outputs = new WeakSet<IOutputModel>();

  constructor(private panel: NotebookPanel) {
    NotebookActions.executed.connect(this.onExecuted, this);
    panel.sessionContext.kernelChanged.connect(this.forget, this);
    panel.sessionContext.statusChanged.connect((_, status) => {
      if (status === 'restarting' || status === 'autorestarting' || status === 'dead') {
        this.forget();
      }
    }, this);
    panel.disposed.connect(() => NotebookActions.executed.disconnect(this.onExecuted, this));
  }

  has(cell: Cell): boolean {
    const output = errorOutput(cell);
    return !!output && this.outputs.has(output);
  }

  private onExecuted(_: unknown, args: { notebook: Notebook; cell: Cell; success: boolean }): void {
    const output = args.notebook === this.panel.content && !args.success ? errorOutput(args.cell) : null;
    if (output) {
      this.outputs.add(output);
    }
  }

  private forget(): void {
    this.outputs = new WeakSet<IOutputModel>();
  }
}

const produced = new WeakMap<NotebookPanel, ProducedHere>();

/** Did the user produce this cell's error in the panel's kernel (run here, since the kernel started)? */
export function producedHere(panel: NotebookPanel, cell: Cell): boolean {
  return produced.get(panel)?.has(cell) ?? false;
}

function watch(panel: NotebookPanel): void {
  if (!produced.has(panel)) {
    produced.set(panel, new ProducedHere(panel));
  }
}

/** A turn cell's own failure is not something to hand back to shiro. */
function isTurnCell(cell: Cell): boolean {
  return /^\s*%%?shiro\b/.test(cell.model.sharedModel.getSource());
}

export function canFix(cell: Cell | null): boolean {
  return !!cell && !!errorOf(cell) && !isTurnCell(cell);
}

/** The note above the prompt box when the error was not produced here. */
export const SAVED_NOTE =
  'This error was not produced by running the cell in this kernel (it came with the notebook, or from an ' +
  'earlier kernel): its text is sent as data. Check the prompt, then press Enter to ask.';

/** The prompt box, filled with the fix's prompt: Enter asks, Shift+Enter is a new line. */
class FixPromptBody extends Widget {
  readonly textarea: HTMLTextAreaElement;

  constructor(prompt: string) {
    super();
    this.addClass('jp-ShiroAsk');
    this.addClass('shiro-fix-ask');
    const note = document.createElement('p');
    note.className = 'shiro-fix-note';
    note.textContent = SAVED_NOTE;
    this.textarea = document.createElement('textarea');
    this.textarea.value = prompt;
    this.textarea.rows = 14;
    this.textarea.setSelectionRange(0, 0); // the box opens on the prompt's first line
    this.node.append(note, this.textarea);
    this.textarea.addEventListener('keydown', event => {
      if (event.key === 'Enter' && !event.shiftKey && !event.isComposing) {
        // a textarea does not submit a Dialog on Enter: hand the dialog the Enter it accepts on
        event.preventDefault();
        event.stopPropagation();
        this.node.closest('.jp-Dialog')?.dispatchEvent(new KeyboardEvent('keydown', { key: 'Enter', bubbles: true }));
      }
    });
  }

  getValue(): string {
    return this.textarea.value;
  }
}

/** The prompt as the user leaves it in the prompt box, or null when they cancel. */
async function confirmPrompt(prompt: string): Promise<string | null> {
  const body = new FixPromptBody(prompt);
  const result = await new Dialog({
    title: 'Ask shiro',
    body,
    focusNodeSelector: 'textarea',
    buttons: [Dialog.cancelButton(), Dialog.okButton({ label: 'Ask' })]
  }).launch();
  const value = body.getValue().trim();
  return result.button.accept && value ? value : null;
}

/**
 * Insert the `%%shiro` cell below the failed one and run it; for an error the user did not produce in this
 * kernel, only after they ask in the prompt box it fills.
 */
export async function fixCell(panel: NotebookPanel, cell: Cell): Promise<void> {
  const error = errorOf(cell);
  const notebook = panel.content;
  if (!error || notebook.widgets.indexOf(cell) < 0) {
    return;
  }
  const saved = !producedHere(panel, cell);
  let prompt: string | null = fixPrompt(
    {
      index: notebook.widgets.indexOf(cell),
      id: cell.model.id,
      source: cell.model.sharedModel.getSource(),
      ename: error.ename,
      evalue: error.evalue,
      traceback: error.traceback ?? []
    },
    { saved }
  );
  if (saved && (prompt = await confirmPrompt(prompt)) === null) {
    return;
  }
  const index = notebook.widgets.indexOf(cell);
  if (index < 0) {
    return;
  }
  notebook.deselectAll();
  notebook.activeCellIndex = index;
  NotebookActions.insertBelow(notebook);
  const turn = notebook.activeCell;
  if (!turn || turn === cell) {
    return;
  }
  turn.model.sharedModel.setSource(shiroCell(prompt));
  const kernel = panel.sessionContext.session?.kernel;
  if (kernel) {
    await kernel.requestExecute({ code: LOAD_CODE, silent: true, store_history: false }).done.catch(() => undefined);
  }
  await NotebookActions.run(notebook, panel.sessionContext);
}

/** Keeps a "Fix with shiro" button on every failed code cell of one panel. */
export class FixButtons {
  private watched = new WeakSet<Cell>();
  private bars = new Map<Cell, Widget>();

  constructor(
    private panel: NotebookPanel,
    private onFix: (panel: NotebookPanel, cell: Cell) => void
  ) {
    watch(panel);
    void panel.context.ready.then(() => {
      if (panel.isDisposed) {
        return;
      }
      panel.content.model?.cells.changed.connect(() => queueMicrotask(() => this.scan()), this);
      this.scan();
    });
  }

  private scan(): void {
    if (this.panel.isDisposed) {
      return;
    }
    for (const cell of this.panel.content.widgets) {
      if (cell instanceof CodeCell && !this.watched.has(cell)) {
        this.watched.add(cell);
        cell.model.outputs.changed.connect(() => this.update(cell), this);
        cell.disposed.connect(() => this.bars.delete(cell));
        this.update(cell);
      }
    }
  }

  private update(cell: CodeCell): void {
    const bar = this.bars.get(cell);
    const show = !cell.isDisposed && canFix(cell);
    if (show && !bar) {
      const widget = new Widget();
      widget.addClass('shiro-fix-bar');
      const button = document.createElement('button');
      button.type = 'button';
      button.className = 'jp-Button jp-mod-styled shiro-fix-button';
      button.textContent = 'Fix with shiro';
      button.title = 'Ask shiro to fix this cell: its fix shows as a diff here to accept';
      button.addEventListener('click', event => {
        event.stopPropagation();
        this.onFix(this.panel, cell);
      });
      widget.node.appendChild(button);
      this.bars.set(cell, widget);
      // a cell of a notebook just opened may not have built its parts yet (a saved error): placed before
      // them, the button would stand above the cell's input
      void cell.ready.then(() => {
        if (!widget.isDisposed && !cell.isDisposed) {
          placeInCell(cell, widget, 'afterOutput');
        }
      });
    } else if (!show && bar) {
      bar.dispose();
      this.bars.delete(cell);
    }
  }
}
