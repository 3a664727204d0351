/**
 * shiro_kernel's JupyterLab extension: draws saved turns without a kernel, gives `%shiro` a prompt box
 * (command palette, notebook toolbar, Alt I) with the project's prompt history on Up/Down, serves the
 * kernel's notebook channel (./channel.ts: the cell tools read, review, and run the open document) and
 * puts "Fix with shiro" on failed cells (./fixcell.ts) and Undo on the rows of turns its kernel can take back
 * (./undo.ts).
 */
import {
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { Dialog, ICommandPalette, ToolbarButton } from '@jupyterlab/apputils';
import {
  INotebookTracker,
  Notebook,
  NotebookActions,
  NotebookPanel
} from '@jupyterlab/notebook';
import { IRenderMimeRegistry } from '@jupyterlab/rendermime';
import { Widget } from '@lumino/widgets';

import { NotebookChannels } from './channel';
import { FIX_COMMAND, FixButtons, canFix, fixCell } from './fixcell';
import { HistoryWalker, parseHistory, shiroCell } from './format';
import { RANK, UndoFinder, createRendererFactory } from './renderer';
import { UndoState } from './undo';

export const COMMAND = 'shiro:ask';

/** Run silently in the kernel: loads the magics and prints the project's prompt history. */
export const HISTORY_CODE = [
  'import json as _sj, pathlib as _sp',
  'import shiro_kernel.store.history as _sh, shiro_kernel.store.paths as _spa',
  'get_ipython().extension_manager.load_extension("shiro_kernel")',
  'print(_sj.dumps(_sh.PromptHistory.for_project(_spa.project_root(',
  '    _spa.notebook_path(get_ipython().user_ns) or _sp.Path.cwd())).entries()))',
  'del _sj, _sp, _sh, _spa'
].join('\n');

async function fetchHistory(panel: NotebookPanel): Promise<string[]> {
  const kernel = panel.sessionContext.session?.kernel;
  if (!kernel) {
    return [];
  }
  let stdout = '';
  try {
    const future = kernel.requestExecute({
      code: HISTORY_CODE,
      silent: true,
      store_history: false
    });
    future.onIOPub = msg => {
      if (msg.header.msg_type === 'stream') {
        const content = msg.content as { name: string; text: string };
        if (content.name === 'stdout') {
          stdout += content.text;
        }
      }
    };
    await future.done;
  } catch {
    return [];
  }
  return parseHistory(stdout);
}

class PromptBody extends Widget {
  readonly textarea: HTMLTextAreaElement;
  private walker = new HistoryWalker([]);

  constructor() {
    super();
    this.addClass('jp-ShiroAsk');
    this.textarea = document.createElement('textarea');
    this.textarea.placeholder = 'Ask shiro… (Enter runs, Shift+Enter for a new line, ↑/↓ history)';
    this.textarea.rows = 3;
    this.node.appendChild(this.textarea);
    this.textarea.addEventListener('keydown', this.onKey);
  }

  setHistory(entries: string[]): void {
    this.walker.setEntries(entries);
    // the history arrives from the kernel after the box opens (a busy kernel answers late)
    this.textarea.dataset.historyLoaded = String(entries.length);
  }

  getValue(): string {
    return this.textarea.value;
  }

  private onKey = (event: KeyboardEvent): void => {
    const ta = this.textarea;
    const before = ta.value.slice(0, ta.selectionStart);
    const after = ta.value.slice(ta.selectionEnd);
    if (event.key === 'ArrowUp' && !before.includes('\n')) {
      const text = this.walker.up(ta.value);
      if (text !== null) {
        event.preventDefault();
        this.showText(text);
      }
    } else if (event.key === 'ArrowDown' && !after.includes('\n')) {
      const text = this.walker.down();
      if (text !== null) {
        event.preventDefault();
        this.showText(text);
      }
    } else if (event.key === 'Enter' && !event.shiftKey && !event.isComposing) {
      // A textarea does not submit a Dialog on Enter; hand the dialog the Enter it accepts on.
      event.preventDefault();
      event.stopPropagation();
      const dialog = this.node.closest('.jp-Dialog');
      dialog?.dispatchEvent(new KeyboardEvent('keydown', { key: 'Enter', bubbles: true }));
    }
  };

  private showText(text: string): void {
    this.textarea.value = text;
    this.textarea.selectionStart = this.textarea.selectionEnd = text.length;
  }
}

async function ask(tracker: INotebookTracker): Promise<void> {
  const panel = tracker.currentWidget;
  if (!panel) {
    return;
  }
  const body = new PromptBody();
  const history = fetchHistory(panel).then(entries => body.setHistory(entries));
  const result = await new Dialog({
    title: 'Ask shiro',
    body,
    focusNodeSelector: 'textarea',
    buttons: [Dialog.cancelButton(), Dialog.okButton({ label: 'Ask' })]
  }).launch();
  await history.catch(() => undefined);
  const prompt = body.getValue().trim();
  if (!result.button.accept || !prompt) {
    return;
  }
  const notebook = panel.content;
  NotebookActions.insertBelow(notebook);
  const cell = notebook.activeCell;
  if (!cell) {
    return;
  }
  cell.model.sharedModel.setSource(shiroCell(prompt));
  await NotebookActions.run(notebook, panel.sessionContext);
}

/**
 * The undo state of the notebook panel a rendering stands in, made on first need: asked again after each cell
 * the panel runs, forgotten when its kernel restarts or changes.
 */
function undoFinder(tracker: INotebookTracker): UndoFinder {
  const states = new WeakMap<NotebookPanel, UndoState>();
  return node => {
    const panel = tracker.find(p => p.node.contains(node));
    if (!panel) {
      return null;
    }
    let state = states.get(panel);
    if (!state) {
      const made = (state = new UndoState(() => panel.sessionContext.session?.kernel ?? null));
      states.set(panel, made);
      const context = panel.sessionContext;
      context.kernelChanged.connect(() => made.forget());
      context.statusChanged.connect((_, status) => {
        if (status === 'restarting' || status === 'autorestarting' || status === 'dead') {
          made.forget();
        }
      });
      const ran = (_: unknown, args: { notebook: Notebook }): void => {
        if (args.notebook === panel.content) {
          void made.refresh();
        }
      };
      NotebookActions.executed.connect(ran);
      panel.disposed.connect(() => NotebookActions.executed.disconnect(ran));
    }
    return state;
  };
}

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'shiro-kernel:plugin',
  description: 'Renders shiro turns and adds the Shiro: Ask prompt box.',
  autoStart: true,
  requires: [IRenderMimeRegistry],
  optional: [INotebookTracker, ICommandPalette],
  activate: (
    app: JupyterFrontEnd,
    rendermime: IRenderMimeRegistry,
    tracker: INotebookTracker | null,
    palette: ICommandPalette | null
  ) => {
    rendermime.addFactory(createRendererFactory(rendermime, tracker ? undoFinder(tracker) : null), RANK);
    if (!tracker) {
      return;
    }
    app.commands.addCommand(COMMAND, {
      label: 'Shiro: Ask',
      caption: 'Ask shiro: insert a %%shiro cell below and run it',
      isEnabled: () => tracker.currentWidget !== null,
      execute: () => ask(tracker)
    });
    app.commands.addKeyBinding({
      command: COMMAND,
      keys: ['Alt I'],
      selector: '.jp-Notebook'
    });
    palette?.addItem({ command: COMMAND, category: 'Shiro' });
    new NotebookChannels(tracker);
    const fix = (panel: NotebookPanel, cell: Parameters<typeof fixCell>[1]): void => {
      void fixCell(panel, cell).catch(error => console.error('shiro: Fix with shiro failed', error));
    };
    app.commands.addCommand(FIX_COMMAND, {
      label: 'Shiro: Fix this cell',
      caption: 'Ask shiro to fix the active cell from its error; the fix shows as a diff to accept',
      isEnabled: () => canFix(tracker.activeCell),
      execute: () => {
        const panel = tracker.currentWidget;
        const cell = tracker.activeCell;
        if (panel && cell && canFix(cell)) {
          return fixCell(panel, cell);
        }
      }
    });
    palette?.addItem({ command: FIX_COMMAND, category: 'Shiro' });
    tracker.forEach(panel => new FixButtons(panel, fix));
    tracker.widgetAdded.connect((_sender, panel) => {
      new FixButtons(panel, fix);
      const button = new ToolbarButton({
        className: 'jp-ShiroAskButton',
        label: 'Ask shiro',
        tooltip: 'Ask shiro (Alt I)',
        onClick: () => void app.commands.execute(COMMAND)
      });
      panel.toolbar.insertItem(10, 'shiro-ask', button);
    });
  }
};

export default plugin;
