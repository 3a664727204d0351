/**
 * The review of a `review` request in the notebook itself: an edit as a line diff in its cell, an insert
 * as a ghost "proposed" cell between the cells (not in the document), a delete as its cell marked for
 * removal; each with Accept / Reject (and a note for shiro), and Accept all / Reject all when the request
 * holds several. Nothing changes before Accept; at Accept the change is checked again (./cells.ts) and
 * applied in one transaction. `review: false` applies every change at once, with the same checks. The
 * reply (`done`) resolves when every change is decided; a withdrawn review resolves null.
 */
import { Notification } from '@jupyterlab/apputils';
import { Cell } from '@jupyterlab/cells';
import { NotebookPanel } from '@jupyterlab/notebook';
import { PanelLayout, Widget } from '@lumino/widgets';

import { applyChange, indexOf, widgetOf } from './cells';
import { diffCounts, hunked, lineDiff, splitLines } from './diff';
import { Change, IChangeResult, IReviewRequest, Ledger } from './protocol';

export type Slot = 'top' | 'afterInput' | 'afterOutput' | 'bottom';

/** Put `widget` into `cell` at `slot` (after the boxes already there), unless it is there already. */
export function placeInCell(cell: Cell, widget: Widget, slot: Slot): void {
  if (widget.parent === cell) {
    return;
  }
  const layout = cell.layout as PanelLayout;
  const widgets = layout.widgets;
  const at = (cls: string): number => widgets.findIndex(w => w.hasClass(cls));
  const footer = at('jp-Cell-footer');
  const end = footer < 0 ? widgets.length : footer;
  let index: number;
  if (slot === 'top') {
    index = 0;
    while (index < widgets.length && widgets[index].hasClass('shiro-slot-top')) {
      index++;
    }
  } else if (slot === 'bottom') {
    index = end;
  } else {
    const after = at(slot === 'afterInput' ? 'jp-Cell-inputWrapper' : 'jp-Cell-outputWrapper');
    index = after < 0 ? end : after + 1;
    while (index < widgets.length && widgets[index].hasClass(`shiro-slot-${slot}`)) {
      index++;
    }
  }
  widget.addClass(`shiro-slot-${slot}`);
  layout.insertWidget(index, widget);
}

function el<K extends keyof HTMLElementTagNameMap>(tag: K, className: string, text?: string): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  node.className = className;
  if (text !== undefined) {
    node.textContent = text;
  }
  return node;
}

/** The diff of an edit as coloured lines (text only: the source is the model's). */
export function diffNode(before: string, after: string): HTMLElement {
  const pre = el('pre', 'shiro-diff');
  for (const line of hunked(lineDiff(before, after))) {
    if (line.kind === 'skip') {
      pre.appendChild(el('span', 'shiro-diff-line shiro-diff-skip', `⋯ ${line.count} unchanged line${line.count === 1 ? '' : 's'}`));
    } else {
      const sign = line.kind === 'add' ? '+' : line.kind === 'del' ? '-' : ' ';
      pre.appendChild(el('span', `shiro-diff-line shiro-diff-${line.kind}`, `${sign} ${line.text}`));
    }
  }
  return pre;
}

function counts(change: Change): string {
  if (change.kind === 'edit') {
    const { added, removed } = diffCounts(lineDiff(change.expect, change.source));
    return `+${added} −${removed}`;
  }
  if (change.kind === 'insert') {
    return `+${splitLines(change.source).length} −0`;
  }
  return `+0 −${splitLines(change.expect).length}`;
}

const HEADS: Record<Change['kind'], string> = {
  edit: 'shiro proposes an edit of this cell',
  insert: 'shiro proposes a new cell',
  delete: 'shiro proposes to delete this cell'
};

const REFUSED: Record<string, string> = {
  conflict: 'the cell changed since shiro read it; shiro is told to read it again',
  editing: 'you are typing in that cell',
  missing: 'that cell is gone'
};

interface IBox {
  widget: Widget;
  note: HTMLInputElement;
  all: HTMLElement;
}

export class Review {
  readonly ledger: Ledger;
  readonly done: Promise<IChangeResult[] | null>;
  private resolve: (results: IChangeResult[] | null) => void = () => undefined;
  private boxes = new Map<number, IBox>();
  private marked = new Map<number, Cell>();
  private inserted = new Map<number, string>();
  private applying = false;
  private scheduled = false;
  private finished = false;

  constructor(
    private panel: NotebookPanel,
    readonly request: IReviewRequest
  ) {
    this.ledger = new Ledger(request.changes.length);
    this.done = new Promise(resolve => (this.resolve = resolve));
  }

  get id(): number {
    return this.request.id;
  }

  /** Show the review, or under `review: false` apply every change now, in order. */
  start(): void {
    const model = this.panel.content.model;
    if (!model) {
      this.close('the notebook has no document');
      return;
    }
    if (!this.request.review) {
      this.request.changes.forEach((_, k) => this.decide(k, true, false));
      return;
    }
    model.cells.changed.connect(this.onCells, this);
    model.contentChanged.connect(this.onContent, this);
    this.request.changes.forEach((change, k) => this.boxes.set(k, this.box(change, k)));
    this.reattach();
    this.onContent();
    const first = this.host(0)?.cell;
    const typing = this.panel.content.widgets.some(cell => cell.editor?.host.contains(document.activeElement));
    if (first && !typing) {
      void this.panel.content.scrollToCell(first).catch(() => undefined);
    }
  }

  /** Decide change k: apply it (checked again now) or reject it; the reply goes when all are decided. */
  decide(k: number, accept: boolean, tell = true): void {
    if (this.finished || this.ledger.isDecided(k)) {
      return;
    }
    const change = this.request.changes[k];
    let result: IChangeResult;
    if (accept) {
      this.applying = true;
      try {
        result = applyChange(this.panel, change, change.kind === 'insert' ? this.anchor(k) : undefined);
      } finally {
        this.applying = false;
      }
      if (result.status === 'accepted' && change.kind === 'insert' && result.id) {
        this.inserted.set(k, result.id);
      }
      if (result.status !== 'accepted' && tell) {
        Notification.warning(`shiro: not applied: ${REFUSED[result.status] ?? result.status}.`, { autoClose: 6000 });
      }
    } else {
      result = {
        status: 'rejected',
        id: change.kind === 'insert' ? null : change.id,
        index: change.kind === 'insert' ? null : this.indexOrNull(change.id)
      };
    }
    const note = this.boxes.get(k)?.note.value.trim();
    if (note) {
      result.note = note;
    }
    this.ledger.decide(k, result);
    this.unbox(k);
    this.reattach();
    if (this.ledger.done) {
      this.finish();
    }
  }

  /** Change k cannot be shown any more: decided `status`, nothing applied. */
  private refuse(k: number, status: 'missing'): void {
    const change = this.request.changes[k];
    this.ledger.decide(k, { status, id: change.kind === 'insert' ? null : change.id, index: null });
    this.unbox(k);
    if (this.ledger.done) {
      this.finish();
    }
  }

  decideAll(accept: boolean): void {
    for (const k of this.ledger.pending()) {
      this.decide(k, accept);
    }
  }

  /**
   * The kernel withdrew the review (the turn stopped, the approval timed out): nothing more changes. What the
   * user decided before it (null for the undecided; an accepted change is in the document), or null when the
   * review had ended already.
   */
  cancel(): Array<IChangeResult | null> | null {
    if (this.finished) {
      return null;
    }
    this.finished = true;
    const sofar = this.ledger.sofar().map((result, k) => (result ? this.indexed(result, k) : null));
    this.teardown();
    this.resolve(null);
    return sofar;
  }

  /** The notebook closed or its kernel restarted: every pending change is rejected with `note`; the results. */
  close(note: string): IChangeResult[] | null {
    if (this.finished) {
      return null;
    }
    for (const k of this.ledger.pending()) {
      const change = this.request.changes[k];
      this.ledger.decide(k, { status: 'rejected', id: change.kind === 'insert' ? null : change.id, index: null, note });
    }
    return this.finish();
  }

  private finish(): IChangeResult[] {
    this.finished = true;
    const results = this.ledger.results().map((result, k) => this.indexed(result, k));
    this.teardown();
    this.resolve(results);
    return results;
  }

  /** Change k's result with the index its cell has now (cells may have moved since it was decided). */
  private indexed(result: IChangeResult, k: number): IChangeResult {
    const change = this.request.changes[k];
    const gone = change.kind === 'delete' && result.status === 'accepted';
    if (result.id && !gone && !this.panel.isDisposed) {
      const index = this.indexOrNull(result.id);
      return { ...result, index: index ?? result.index };
    }
    return result;
  }

  private teardown(): void {
    for (const k of [...this.boxes.keys()]) {
      this.unbox(k);
    }
    const model = this.panel.content.model;
    model?.cells.changed.disconnect(this.onCells, this);
    model?.contentChanged.disconnect(this.onContent, this);
  }

  private indexOrNull(id: string | null): number | null {
    const index = this.panel.isDisposed ? -1 : indexOf(this.panel, id);
    return index < 0 ? null : index;
  }

  /** Where insert k goes: below the cell an earlier insert of this review with the same `after` made, else `after`. */
  private anchor(k: number): string | null {
    const change = this.request.changes[k];
    if (change.kind !== 'insert') {
      return null;
    }
    for (let j = k - 1; j >= 0; j--) {
      const earlier = this.request.changes[j];
      const made = this.inserted.get(j);
      if (earlier.kind === 'insert' && earlier.after === change.after && made && indexOf(this.panel, made) >= 0) {
        return made;
      }
    }
    return change.after;
  }

  /** The cell that shows change k's box, and where in it; null when the cell it is about is gone. */
  private host(k: number): { cell: Cell; slot: Slot } | null {
    const change = this.request.changes[k];
    if (change.kind !== 'insert') {
      const cell = widgetOf(this.panel, change.id);
      return cell ? { cell, slot: change.kind === 'edit' ? 'afterInput' : 'top' } : null;
    }
    const anchor = this.anchor(k);
    if (anchor === null) {
      const cell = this.panel.content.widgets[0];
      return cell ? { cell, slot: 'top' } : null;
    }
    const cell = widgetOf(this.panel, anchor);
    return cell ? { cell, slot: 'bottom' } : null;
  }

  /** Keep every pending box in the cell it belongs to (cells are re-created when moved); a change whose cell is gone is `missing`. */
  private reattach(): void {
    if (this.finished) {
      return;
    }
    let rebuilt = false;
    for (const k of this.ledger.pending()) {
      if (this.finished || this.ledger.isDecided(k)) {
        continue;
      }
      const host = this.host(k);
      const change = this.request.changes[k];
      if (!host && (change.kind !== 'insert' || change.after !== null)) {
        this.refuse(k, 'missing'); // the cell it is about (or goes after) is gone
        continue;
      }
      if (!host) {
        continue; // an insert at the top of a notebook with no cells: shown when a cell is there
      }
      let box = this.boxes.get(k);
      if (box?.widget.isDisposed) {
        // its cell was re-created (a move): the old cell took the box with it; a new one, the note kept
        const note = box.note.value;
        box = this.box(change, k);
        box.note.value = note;
        this.boxes.set(k, box);
        rebuilt = true;
      }
      if (box) {
        placeInCell(host.cell, box.widget, host.slot);
      }
      if (change.kind === 'delete') {
        const old = this.marked.get(k);
        if (old !== host.cell) {
          old?.removeClass('shiro-marked-for-removal');
          host.cell.addClass('shiro-marked-for-removal');
          this.marked.set(k, host.cell);
        }
      }
    }
    // Accept all / Reject all once, on the first change still waiting, while more than one waits
    const pending = this.ledger.pending();
    for (const [k, box] of this.boxes) {
      box.all.hidden = pending.length < 2 || k !== pending[0];
    }
    if (rebuilt) {
      this.onContent();
    }
  }

  private onCells(): void {
    // A move is a removal then an insertion (of a new widget with the same id), in one transaction: look
    // once both are done, or the cell would seem gone between them.
    if (this.applying || this.scheduled) {
      return;
    }
    this.scheduled = true;
    queueMicrotask(() => {
      this.scheduled = false;
      this.reattach();
    });
  }

  /** Mark the boxes of changes whose cell no longer holds what shiro read: Accept will refuse them. */
  private onContent(): void {
    for (const [k, box] of this.boxes) {
      const change = this.request.changes[k];
      if (change.kind === 'insert') {
        continue;
      }
      const index = indexOf(this.panel, change.id);
      const model = index < 0 ? null : this.panel.content.model?.cells.get(index);
      box.widget.toggleClass('shiro-review-stale', !!model && model.sharedModel.getSource() !== change.expect);
    }
  }

  private unbox(k: number): void {
    const box = this.boxes.get(k);
    if (box) {
      this.boxes.delete(k);
      box.widget.dispose();
    }
    const cell = this.marked.get(k);
    if (cell) {
      this.marked.delete(k);
      if (![...this.marked.values()].includes(cell)) {
        cell.removeClass('shiro-marked-for-removal');
      }
    }
  }

  private box(change: Change, k: number): IBox {
    const widget = new Widget();
    widget.addClass('shiro-review');
    widget.addClass(`shiro-review-${change.kind}`);
    if (change.kind === 'insert') {
      widget.addClass('shiro-proposed-cell');
    }
    const node = widget.node;
    node.dataset.shiroRequest = String(this.request.id);
    node.dataset.shiroChange = String(k);
    const head = el('div', 'shiro-review-head');
    const label = change.kind === 'insert' ? `shiro proposes a new ${change.cell_type} cell` : HEADS[change.kind];
    head.appendChild(el('span', 'shiro-review-label', label));
    head.appendChild(el('span', 'shiro-review-counts', counts(change)));
    // the kernel's own title says what the label says already when a request holds one change
    if (this.request.title && !(this.request.changes.length === 1 && this.request.title === 'shiro proposes a change')) {
      head.appendChild(el('span', 'shiro-review-title', this.request.title));
    }
    node.appendChild(head);
    if (change.kind === 'edit') {
      node.appendChild(diffNode(change.expect, change.source));
    } else if (change.kind === 'insert') {
      node.appendChild(el('pre', 'shiro-proposed-source', change.source));
    }
    node.appendChild(
      el('div', 'shiro-review-stale-note', 'This cell changed since shiro read it: Accept will not apply this change.')
    );
    const actions = el('div', 'shiro-review-actions');
    const note = el('input', 'shiro-review-note');
    note.type = 'text';
    note.placeholder = 'note for shiro (optional)';
    const button = (text: string, cls: string, onClick: () => void): HTMLButtonElement => {
      const b = el('button', `jp-Button jp-mod-styled ${cls}`, text);
      b.type = 'button';
      b.addEventListener('click', event => {
        event.stopPropagation();
        onClick();
      });
      return b;
    };
    actions.appendChild(button('Accept', 'jp-mod-accept shiro-review-accept', () => this.decide(k, true)));
    actions.appendChild(button('Reject', 'jp-mod-reject shiro-review-reject', () => this.decide(k, false)));
    const all = el('span', 'shiro-review-all');
    all.appendChild(button('Accept all', 'jp-mod-accept shiro-review-accept-all', () => this.decideAll(true)));
    all.appendChild(button('Reject all', 'jp-mod-reject shiro-review-reject-all', () => this.decideAll(false)));
    actions.appendChild(all);
    actions.appendChild(note);
    node.appendChild(actions);
    return { widget, note, all };
  }
}
