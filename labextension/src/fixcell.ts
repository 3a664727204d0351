/**
 * "Fix with shiro": a code cell whose outputs hold an error gets a small button under its output area
 * (the error itself renders as JupyterLab draws it); the button, or the `shiro:fix-cell` command on the
 * active cell, inserts a `%%shiro` cell below the failed one asking for the fix as a `notebook_edit` of
 * that cell (./fixprompt.ts), and runs it. The fix then arrives as a diff on the failed cell.
 */
import { Cell, CodeCell } from '@jupyterlab/cells';
import * as nbformat from '@jupyterlab/nbformat';
import { NotebookActions, NotebookPanel } from '@jupyterlab/notebook';
import { Widget } from '@lumino/widgets';

import { shiroCell } from './format';
import { fixPrompt } from './fixprompt';
import { placeInCell } from './review';

export const FIX_COMMAND = 'shiro:fix-cell';

/** Loads the magics silently, so the `%%shiro` cell works in a kernel that never ran `%load_ext`. */
export const LOAD_CODE = 'get_ipython().extension_manager.load_extension("shiro_kernel")';

/** The cell's last error output, if it has one. */
export function errorOf(cell: Cell | null): nbformat.IError | null {
  if (!(cell instanceof CodeCell)) {
    return null;
  }
  const outputs = cell.model.outputs;
  for (let i = outputs.length - 1; i >= 0; i--) {
    const output = outputs.get(i);
    if (output.type === 'error') {
      return output.toJSON() as nbformat.IError;
    }
  }
  return null;
}

/** A turn cell's own failure is not something to hand back to shiro. */
function isTurnCell(cell: Cell): boolean {
  return /^\s*%%?shiro\b/.test(cell.model.sharedModel.getSource());
}

export function canFix(cell: Cell | null): boolean {
  return !!cell && !!errorOf(cell) && !isTurnCell(cell);
}

/** Insert the `%%shiro` cell below the failed one and run it. */
export async function fixCell(panel: NotebookPanel, cell: Cell): Promise<void> {
  const error = errorOf(cell);
  const notebook = panel.content;
  const index = notebook.widgets.indexOf(cell);
  if (!error || index < 0) {
    return;
  }
  const prompt = fixPrompt({
    index,
    id: cell.model.id,
    source: cell.model.sharedModel.getSource(),
    ename: error.ename,
    evalue: error.evalue,
    traceback: error.traceback ?? []
  });
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
      placeInCell(cell, widget, 'afterOutput');
      this.bars.set(cell, widget);
    } else if (!show && bar) {
      bar.dispose();
      this.bars.delete(cell);
    }
  }
}
