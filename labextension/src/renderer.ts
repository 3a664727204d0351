/**
 * The mime renderer for `application/vnd.shiro.turn+json` (docs/turn-format.md): the turn's
 * Markdown through JupyterLab's own markdown renderer, tool rows as `<details>` (the call's code with
 * its line breaks, then its text output), what each call displayed (figures, DataFrames, Plotly...)
 * under its row through JupyterLab's own renderers, notices, the task list with the seed's bar, and
 * the footer.
 *
 * In a notebook panel whose running kernel can take a row's step back, the row gets an Undo button
 * (./undo.ts); the report it brings goes in as text.
 *
 * Safe whatever the notebook's trust: the model's text (answer, tool rows, notices, errors) is never
 * trusted. Every string goes in as text, and the answer's Markdown is rendered untrusted (JupyterLab's
 * sanitizer) and made inert before it is drawn (./sanitize.ts: images and media as links, nothing that
 * loads, no script URLs or command links, none of shiro's own classes). Only what the user's approved
 * code displayed (`drawableOutputs`) is drawn with the cell's trust, as a cell output is.
 */
import { IRenderMimeRegistry, renderMarkdown } from '@jupyterlab/rendermime';
import { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import type { Message } from '@lumino/messaging';
import { Widget } from '@lumino/widgets';

import { unifiedLines } from './diff';
import {
  ICellChange,
  IOutput,
  ITurn,
  IToolEntry,
  TURN_MIME,
  changeLine,
  drawableOutputs,
  errorLine,
  footer,
  isCellChange,
  isTurn,
  marker,
  taskBar,
  toolLine
} from './format';
import { IPlaced, applyMarks, callNames, numbersOf, placeNumbers, withSentinels } from './marks';
import { inertSanitizer, neutralise } from './sanitize';
import { UndoRows, UndoState } from './undo';

/** The undo state of the notebook panel a rendering's node stands in (null: none, or not in a panel). */
export type UndoFinder = (node: HTMLElement) => UndoState | null;

/**
 * Ranks: lower wins. HTML is 50, Markdown 60, the ipywidgets view -10. A finished turn's output
 * holds the widget view and this bundle; the bundle wins so a notebook reopened without a kernel
 * (widget model gone) draws the same picture as the live view did.
 */
export const RANK = -20;

function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  className: string,
  text?: string
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  if (className) {
    node.className = className;
  }
  if (text !== undefined) {
    node.textContent = text;
  }
  return node;
}

export class TurnRenderer extends Widget implements IRenderMime.IRenderer {
  private undo = new UndoRows(this.node);
  private drawn = false; // a bundle was drawn since the kernel was last asked what it can take back

  constructor(
    private options: IRenderMime.IRendererOptions,
    private registry: IRenderMimeRegistry | null = null,
    private undoFor: UndoFinder | null = null
  ) {
    super();
    this.addClass('jp-RenderedShiroTurn');
  }

  async renderModel(model: IRenderMime.IMimeModel): Promise<void> {
    const data = model.data[TURN_MIME];
    this.node.textContent = '';
    if (!isTurn(data)) {
      this.node.appendChild(el('pre', 'shiro-error', 'shiro: this output is not a turn bundle'));
      return;
    }
    const turn = data as ITurn;
    const undoRows = new Map<string, HTMLElement>();
    const pending: Promise<void>[] = [];
    const numbers = numbersOf(turn.numbers);
    const answer = lastTextIndex(turn);
    const calls = callNames(turn.entries);
    turn.entries.forEach((entry, index) => {
      if (entry.type === 'text') {
        const host = el('div', 'shiro-text jp-RenderedHTMLCommon'); // JupyterLab's Markdown look: links look like links
        this.node.appendChild(host);
        const placed = index === answer && numbers.length ? placeNumbers(entry.text, numbers) : [];
        pending.push(this.markdown(host, entry.text, placed, calls));
      } else if (entry.type === 'tool') {
        const row = isCellChange(entry.change) ? changeRow(entry, entry.change) : toolRow(entry);
        if (typeof entry.callId === 'string') {
          row.dataset.shiroCall = entry.callId;
          undoRows.set(entry.callId, row);
        }
        this.node.appendChild(row);
        for (const output of drawableOutputs(entry)) {
          const host = el('div', 'shiro-output');
          this.node.appendChild(host);
          pending.push(this.output(host, output, model.trusted));
        }
      } else if (entry.type === 'notice') {
        const quote = el('blockquote', `shiro-notice shiro-notice-${entry.kind ?? 'info'}`);
        quote.appendChild(el('em', '', entry.text));
        this.node.appendChild(quote);
      }
    });
    if (turn.end?.error) {
      const p = el('p', 'shiro-end-error');
      p.appendChild(el('strong', '', 'shiro: '));
      p.appendChild(document.createTextNode(turn.end.error));
      this.node.appendChild(p);
    } else if (turn.end?.reason === 'aborted') {
      this.node.appendChild(el('p', 'shiro-aborted', 'stopped by the user'));
    } else if (turn.end?.reason === 'waiting') {
      this.node.appendChild(el('p', 'shiro-waiting', 'waiting for approval'));
    }
    if (turn.tasks && turn.tasks.length) {
      this.node.appendChild(taskList(turn));
    }
    const foot = footer(turn);
    if (foot) {
      this.node.appendChild(el('div', 'shiro-footer', foot));
    }
    this.undo.setRows(undoRows);
    this.drawn = true; // a new bundle: a turn ended, or the notebook opened
    if (this.isAttached) {
      this.followUndo();
    }
    await Promise.all(pending);
  }

  protected onAfterAttach(msg: Message): void {
    super.onAfterAttach(msg);
    this.followUndo();
  }

  dispose(): void {
    this.undo.dispose();
    super.dispose();
  }

  /** The Undo buttons follow the panel's kernel (found once the node is in the page). */
  private followUndo(): void {
    this.undo.follow(this.undoFor?.(this.node) ?? null, this.drawn);
    this.drawn = false;
  }

  /** One display output through the registry's own renderer for its richest safe MIME type. */
  private async output(host: HTMLElement, output: IOutput, trusted: boolean): Promise<void> {
    const registry = this.registry;
    const data = output.data as Record<string, any>;
    const mime = registry?.preferredMimeType(data as any, trusted ? 'any' : 'ensure');
    if (!registry || !mime) {
      host.appendChild(el('pre', 'shiro-output-text', String(data['text/plain'] ?? '')));
      return;
    }
    try {
      const renderer = registry.createRenderer(mime);
      const model = registry.createModel({ data: data as any, metadata: (output.metadata ?? {}) as any, trusted });
      await renderer.renderModel(model);
      host.appendChild(renderer.node);
    } catch {
      host.appendChild(el('pre', 'shiro-output-text', String(data['text/plain'] ?? mime)));
    }
  }

  /** A tool row of this turn opened and shown (a found number's link leads there). */
  private openCall(callId: string): void {
    const row = Array.from(this.node.querySelectorAll<HTMLElement>('.shiro-tool-row')).find(
      r => r.dataset.shiroCall === callId
    );
    const details = row?.querySelector('details');
    if (details) {
      details.open = true;
      details.scrollIntoView({ block: 'nearest' });
    }
  }

  /**
   * The model's Markdown: untrusted, whatever the notebook's trust, then made inert; only then are the
   * answer's numbers marked (./marks.ts), from their places kept through the rendering.
   */
  private async markdown(host: HTMLElement, source: string, placed: IPlaced[], calls: Map<string, string>): Promise<void> {
    const o = this.options;
    try {
      await renderMarkdown({
        host,
        source: withSentinels(source, placed).trim(),
        trusted: false,
        sanitizer: inertSanitizer(o.sanitizer), // nothing of it fetched, nothing passing for shiro's marks
        resolver: o.resolver,
        linkHandler: o.linkHandler,
        latexTypesetter: o.latexTypesetter,
        markdownParser: o.markdownParser ?? null,
        shouldTypeset: this.isAttached,
        translator: o.translator
      });
      neutralise(host);
      applyMarks(host, placed, calls, callId => this.openCall(callId));
    } catch {
      host.textContent = source; // never lose the answer to a renderer problem
    }
  }
}

/** The answer is the last text entry; -1 when there is none. */
function lastTextIndex(turn: ITurn): number {
  for (let i = turn.entries.length - 1; i >= 0; i--) {
    if (turn.entries[i].type === 'text') {
      return i;
    }
  }
  return -1;
}

function toolRow(entry: IToolEntry): HTMLElement {
  const row = el('div', 'shiro-tool-row');
  const details = el('details', `shiro-tool shiro-tool-${entry.status}`);
  const summary = el('summary', '');
  summary.appendChild(el('code', '', toolLine(entry)));
  details.appendChild(summary);
  if (entry.code) {
    details.appendChild(el('pre', 'shiro-tool-code', entry.code));
  }
  details.appendChild(el('pre', 'shiro-tool-output', entry.output ?? ''));
  row.appendChild(details);
  const error = errorLine(entry);
  if (error) {
    row.appendChild(el('div', 'shiro-tool-error', `↳ ${error}`));
  }
  return row;
}

/**
 * A notebook_edit / notebook_insert / notebook_delete call as one compact row (`✓ edited cell 3: +2 −1`)
 * that opens on the diff. The diff is the model's text: each line goes in as text, coloured by its
 * first character only.
 */
function changeRow(entry: IToolEntry, change: ICellChange): HTMLElement {
  const row = el('div', 'shiro-tool-row');
  const status = /^[a-z-]+$/.test(change.status) ? change.status : 'other';
  const details = el('details', `shiro-tool shiro-change shiro-change-${status}`);
  const summary = el('summary', '');
  summary.appendChild(el('code', '', changeLine(change)));
  details.appendChild(summary);
  if (typeof change.diff === 'string' && change.diff) {
    details.appendChild(diffBlock(change.diff));
  }
  if (entry.output) {
    details.appendChild(el('pre', 'shiro-tool-output', entry.output));
  }
  row.appendChild(details);
  const error = errorLine(entry);
  if (error) {
    row.appendChild(el('div', 'shiro-tool-error', `↳ ${error}`));
  }
  return row;
}

export function diffBlock(diff: string): HTMLElement {
  const pre = el('pre', 'shiro-diff');
  for (const line of unifiedLines(diff)) {
    pre.appendChild(el('span', `shiro-diff-line shiro-diff-${line.kind}`, line.text));
  }
  return pre;
}

function taskList(turn: ITurn): HTMLElement {
  const pre = el('pre', 'shiro-tasks');
  pre.appendChild(document.createTextNode(taskBar(turn.tasks)));
  for (const task of turn.tasks ?? []) {
    pre.appendChild(document.createTextNode(`\n${marker(task.status)} `));
    if (task.status === 'done') {
      pre.appendChild(el('s', '', task.content));
    } else {
      pre.appendChild(document.createTextNode(task.content));
    }
    if (typeof task.note === 'string' && task.note.trim()) {
      pre.appendChild(document.createTextNode(`  (${task.note.trim()})`));
    }
  }
  return pre;
}

/** The factory; with the registry, a call's display outputs are drawn by JupyterLab's own renderers; with
 * `undoFor`, rows get Undo buttons in a notebook panel whose kernel can take their steps back. */
export function createRendererFactory(
  registry: IRenderMimeRegistry | null,
  undoFor: UndoFinder | null = null
): IRenderMime.IRendererFactory {
  return {
    safe: true,
    mimeTypes: [TURN_MIME],
    defaultRank: RANK,
    createRenderer: options => new TurnRenderer(options, registry, undoFor)
  };
}

export const rendererFactory = createRendererFactory(null);
