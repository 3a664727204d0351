/**
 * The open document, as the notebook channel reads and changes it: cells by id, what `read` answers,
 * one change applied in one transaction (one undo step), and `run` through the panel's own session.
 * Everything goes through `NotebookPanel.content.model` and the cells' `sharedModel`, never the file, so
 * JupyterLab's save, undo and real-time collaboration stay in charge.
 */
import { Cell, CodeCell, ICellModel, ICodeCellModel } from '@jupyterlab/cells';
import * as nbformat from '@jupyterlab/nbformat';
import { NotebookPanel } from '@jupyterlab/notebook';

import { Change, ICellNow, IChangeResult, RunStatus, checkChange, isShiroCell } from './protocol';

interface ICapturing {
  undoManager?: { stopCapturing(): void } | null;
}

/** Close the undo step before and after a change, so the user's typing never merges into it. */
function stopCapturing(shared: unknown): void {
  (shared as ICapturing).undoManager?.stopCapturing();
}

export function cellModels(panel: NotebookPanel): ICellModel[] {
  const cells = panel.content.model?.cells;
  const out: ICellModel[] = [];
  for (let i = 0; cells && i < cells.length; i++) {
    out.push(cells.get(i));
  }
  return out;
}

export function indexOf(panel: NotebookPanel, id: string | null): number {
  return id === null ? -1 : cellModels(panel).findIndex(cell => cell.id === id);
}

export function widgetOf(panel: NotebookPanel, id: string): Cell | null {
  return panel.content.widgets.find(cell => cell.model.id === id) ?? null;
}

/** Does the user's cursor sit in this cell's editor? Such a cell is never overwritten. */
export function isEditing(cell: Cell | null): boolean {
  const host = cell?.editor?.host;
  const active = document.activeElement;
  return !!host && !!active && host.contains(active);
}

export function cellNow(panel: NotebookPanel, id: string | null): ICellNow | null {
  const index = indexOf(panel, id);
  if (index < 0 || id === null) {
    return null;
  }
  return { source: cellModels(panel)[index].sharedModel.getSource(), editing: isEditing(widgetOf(panel, id)) };
}

function outputsOf(model: ICellModel): nbformat.IOutput[] {
  return model.type === 'code' ? (model as ICodeCellModel).outputs.toJSON() : [];
}

/**
 * `read`'s answer: every cell as the document holds it now, unsaved edits included (only the cells `ids` names,
 * with their index in the document, when it names some).
 */
export function readCells(panel: NotebookPanel, ids: string[] | null = null): { cells: unknown[]; dirty: boolean } {
  const wanted = ids === null ? null : new Set(ids);
  const cells = cellModels(panel).flatMap((model, index) =>
    wanted && !wanted.has(model.id)
      ? []
      : [
          {
            index,
            id: model.id,
            cell_type: model.type,
            source: model.sharedModel.getSource(),
            execution_count: model.type === 'code' ? (model as ICodeCellModel).executionCount : null,
            outputs: outputsOf(model),
            editing: isEditing(widgetOf(panel, model.id))
          }
        ]
  );
  return { cells, dirty: panel.context.model.dirty };
}

/** Replace `before` by `after` touching only the middle that differs (cursors and collaborators keep their place). */
function replaceSource(shared: ICellModel['sharedModel'], after: string): void {
  const before = shared.getSource();
  let head = 0;
  while (head < before.length && head < after.length && before[head] === after[head]) {
    head++;
  }
  let tail = 0;
  while (
    tail < before.length - head &&
    tail < after.length - head &&
    before[before.length - 1 - tail] === after[after.length - 1 - tail]
  ) {
    tail++;
  }
  shared.updateSource(head, before.length - tail, after.slice(head, after.length - tail));
}

/**
 * Apply one change if the document allows it now (the cell still holds what the agent read, nobody is
 * typing in it, it exists), in one transaction. An insert goes below `after` (its own `after`, or the
 * cell an earlier insert of the same review made, so several inserts keep their order).
 */
export function applyChange(panel: NotebookPanel, change: Change, after?: string | null): IChangeResult {
  const model = panel.content.model;
  if (!model) {
    return { status: 'missing', id: null, index: null };
  }
  if (change.kind === 'insert') {
    const anchor = after === undefined ? change.after : after;
    const check = checkChange({ ...change, after: anchor }, cellNow(panel, anchor));
    if (check !== 'ok') {
      return { status: check, id: null, index: null };
    }
    const index = anchor === null ? 0 : indexOf(panel, anchor) + 1;
    const notebook = model.sharedModel;
    let id: string | null = null;
    stopCapturing(notebook);
    notebook.transact(() => {
      id = notebook.insertCell(index, { cell_type: change.cell_type, source: change.source, metadata: {} }).getId();
    });
    stopCapturing(notebook);
    return { status: 'accepted', id, index };
  }
  const check = checkChange(change, cellNow(panel, change.id));
  const index = indexOf(panel, change.id);
  if (check !== 'ok') {
    return { status: check, id: change.id, index: index < 0 ? null : index };
  }
  if (change.kind === 'edit') {
    const shared = cellModels(panel)[index].sharedModel;
    stopCapturing(shared);
    shared.transact(() => replaceSource(shared, change.source));
    stopCapturing(shared);
  } else {
    const notebook = model.sharedModel;
    stopCapturing(notebook);
    notebook.transact(() => notebook.deleteCell(index));
    stopCapturing(notebook);
  }
  return { status: 'accepted', id: change.id, index };
}

/** What JupyterLab's own Run sends with each cell (notebook/src/cellexecutor.ts), its deleted cells handed over. */
function runMetadata(panel: NotebookPanel): { deletedCells: string[]; recordTiming: boolean } {
  const deleted = panel.content.model?.deletedCells ?? [];
  const deletedCells = deleted.splice(0, deleted.length);
  return { deletedCells, recordTiming: panel.content.notebookConfig.recordTiming };
}

export interface IRunResult {
  id: string;
  index: number | null;
  status: RunStatus;
  execution_count: number | null;
  outputs: nbformat.IOutput[];
}

/**
 * Run the listed code cells through the panel's session, in order, each as if the user ran it (outputs
 * into the document, and the request's metadata JupyterLab's own Run sends: the kernel reads it as a run from
 * JupyterLab); an error stops the run, and the cells after it are `not-run`. A cell that would start a shiro
 * turn is `skipped`, never run: the run is made for a turn, and a turn never starts inside another.
 */
export async function runCells(panel: NotebookPanel, ids: string[]): Promise<IRunResult[]> {
  const results: IRunResult[] = [];
  let stopped = false;
  for (const id of ids) {
    const index = indexOf(panel, id);
    const cell = widgetOf(panel, id);
    const base = { id, index: index < 0 ? null : index, execution_count: null, outputs: [] };
    if (!cell || index < 0) {
      results.push({ ...base, status: 'missing' });
      continue;
    }
    if (stopped) {
      results.push({ ...base, status: 'not-run' });
      continue;
    }
    if (!(cell instanceof CodeCell)) {
      results.push({ ...base, status: 'not-code' });
      continue;
    }
    if (isShiroCell(cell.model.sharedModel.getSource())) {
      results.push({ ...base, status: 'skipped' });
      continue;
    }
    let status: RunStatus = 'ok';
    try {
      const reply = await CodeCell.execute(cell, panel.sessionContext, runMetadata(panel));
      if (reply && reply.content.status !== 'ok') {
        status = 'error'; // 'error', or 'aborted' after an earlier error in the queue
      }
    } catch {
      status = 'error'; // the execution was cancelled (a kernel restart, the cell disposed)
    }
    results.push({
      id,
      index: indexOf(panel, id) < 0 ? null : indexOf(panel, id),
      status,
      execution_count: cell.model.executionCount,
      outputs: cell.model.outputs.toJSON()
    });
    if (status === 'error') {
      stopped = true;
    }
  }
  return results;
}
