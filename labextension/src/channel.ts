/**
 * The `shiro.notebook` comm (docs/notebook-protocol.md), front-end side. The target is registered on
 * every kernel connection of every notebook panel (again when the kernel changes); the kernel opens the
 * comm, and the one panel whose path matches (./protocol.ts `chooseAnswerer`) answers `hello` and then
 * serves `read`, `review`, `run` and `cancel` on its document. Several windows on one notebook (a second
 * browser, a tab kept open, real-time collaborators) each hear the comm and say hello; a message the kernel
 * addresses `to` another window's client id is left alone here, so exactly one window acts on each request.
 * A closed panel, a kernel restart or a kernel change answers every pending review `rejected` with "the
 * notebook was closed".
 */
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import { Kernel, KernelMessage } from '@jupyterlab/services';

import { readCells, runCells } from './cells';
import { Review } from './review';
import {
  CLOSED_NOTE,
  Request,
  TARGET,
  addressedTo,
  chooseAnswerer,
  errorReply,
  hello,
  okReply,
  parseMessage
} from './protocol';

/**
 * A comm message on the kernel's main shell, never a subshell. JupyterLab 4.4+ sends a comm's messages on a
 * kernel subshell (JEP 91) that the comms of one target share, created and deleted as they come and go; the
 * protocol wants none (docs/notebook-protocol.md: the kernel reads replies between cells), and a reply must not
 * depend on a subshell's lifetime. So the channel builds its `comm_msg` itself, as `CommHandler.send` does but
 * without a subshell id. (The kernel side routes what arrives as it was sent: shiro_kernel/notebook/channel.py.)
 */
export function sendOnMainShell(kernel: Kernel.IKernelConnection, comm: Kernel.IComm, data: Record<string, unknown>): void {
  if (comm.isDisposed || kernel.isDisposed) {
    throw new Error('the comm is closed');
  }
  const msg = KernelMessage.createMessage({
    msgType: 'comm_msg',
    channel: 'shell',
    username: kernel.username,
    session: kernel.clientId,
    content: { comm_id: comm.commId, data: data as any }
  });
  kernel.sendShellMessage(msg, false, true);
}

/** One open comm, answered by one panel. */
export class Channel {
  private reviews = new Map<number, Review>();
  private closed = false;

  constructor(
    readonly panel: NotebookPanel,
    readonly comm: Kernel.IComm,
    private kernel: Kernel.IKernelConnection
  ) {
    // never return a promise here: the kernel connection would hold every later message until it settles
    comm.onMsg = (msg: KernelMessage.ICommMsgMsg) => {
      this.receive(msg.content.data);
    };
    comm.onClose = () => {
      this.end(null);
    };
  }

  get isClosed(): boolean {
    return this.closed;
  }

  /** Number of reviews waiting for the user (tests and the status read it). */
  get pendingReviews(): number {
    return this.reviews.size;
  }

  /** This window's client id (its kernel connection's): the kernel names it in `to` when this one is to serve. */
  get client(): string {
    return this.kernel.clientId;
  }

  private receive(data: unknown): void {
    if (this.closed) {
      return;
    }
    const message = parseMessage(data);
    if (!addressedTo(message.to, this.client)) {
      return; // another window serves it: nothing shows and nothing changes here
    }
    if (message.kind === 'cancel') {
      const review = this.reviews.get(message.id);
      const sofar = review?.cancel() ?? null;
      if (review && sofar) {
        this.reviews.delete(message.id); // answered here: serve() sends nothing more for it
        this.send(okReply(message.id, { withdrawn: true, results: sofar }));
      }
    } else if (message.kind === 'invalid') {
      if (message.id !== null) {
        this.send(errorReply(message.id, message.error));
      }
    } else {
      void this.serve(message.request);
    }
  }

  private async serve(request: Request): Promise<void> {
    let reply: Record<string, unknown> | null;
    try {
      reply = await this.answer(request);
    } catch (error) {
      reply = errorReply(request.id, `the front end failed: ${(error as Error)?.message ?? String(error)}`);
    }
    if (reply) {
      this.send(reply);
    }
  }

  private async answer(request: Request): Promise<Record<string, unknown> | null> {
    await this.panel.context.ready;
    if (request.op === 'read') {
      return okReply(request.id, readCells(this.panel, request.ids));
    }
    if (request.op === 'run') {
      if (!this.panel.sessionContext.session?.kernel) {
        return errorReply(request.id, 'the notebook has no kernel to run cells in');
      }
      return okReply(request.id, { cells: await runCells(this.panel, request.ids) });
    }
    if (this.reviews.has(request.id)) {
      return errorReply(request.id, `request ${request.id} is already under review`);
    }
    const review = new Review(this.panel, request);
    this.reviews.set(request.id, review);
    review.start();
    const results = await review.done;
    if (!this.reviews.delete(request.id)) {
      return null; // answered already, by end()
    }
    return results === null ? null : okReply(request.id, { results });
  }

  private send(data: Record<string, unknown>): void {
    if (this.comm.isDisposed) {
      return;
    }
    try {
      sendOnMainShell(this.kernel, this.comm, data);
    } catch {
      // the kernel went away between the decision and the reply: nobody waits for it
    }
  }

  /**
   * Stop serving: pending reviews answered `rejected` with `note` (null: withdrawn without a reply, the
   * comm is gone); `closeComm` tells the kernel no front end is attached any more.
   */
  end(note: string | null, closeComm = false): void {
    if (this.closed) {
      return;
    }
    const reviews = [...this.reviews.values()];
    this.reviews.clear();
    for (const review of reviews) {
      if (note === null) {
        review.cancel();
      } else {
        const results = review.close(note);
        if (results) {
          this.send(okReply(review.id, { results }));
        }
      }
    }
    this.closed = true;
    if (closeComm && !this.comm.isDisposed) {
      try {
        this.comm.close(); // after the replies: the kernel reads them in order
      } catch {
        // already closed by the kernel
      }
    }
  }
}

/** A notebook panel's link to its kernel connection and its channel, if it answered. */
class PanelLink {
  kernel: Kernel.IKernelConnection | null = null;
  channel: Channel | null = null;

  constructor(
    readonly panel: NotebookPanel,
    private channels: NotebookChannels
  ) {
    const session = panel.sessionContext;
    session.kernelChanged.connect((_, change) => this.setKernel(change.newValue), this);
    session.statusChanged.connect((_, status) => {
      if (status === 'restarting' || status === 'autorestarting' || status === 'dead') {
        this.closeChannel(CLOSED_NOTE);
      }
    }, this);
    // The session context says it goes before it drops the kernel connection (the panel's own disposed
    // signal comes after the document manager disposed the context): the replies can still be sent.
    session.disposed.connect(() => this.closeChannel(CLOSED_NOTE, true), this);
    panel.disposed.connect(() => {
      this.closeChannel(CLOSED_NOTE, true);
      this.setKernel(null);
      channels.forget(this);
    });
    this.setKernel(session.session?.kernel ?? null);
  }

  attach(comm: Kernel.IComm): void {
    // an older comm of this panel: its reviews are withdrawn and it is closed (one comm per panel)
    this.closeChannel(null, true);
    if (!this.kernel) {
      return;
    }
    this.channel = new Channel(this.panel, comm, this.kernel);
    const panel = this.panel;
    const answer = hello(panel.context.path, panel.id, this.kernel.clientId);
    try {
      sendOnMainShell(this.kernel, comm, answer);
    } catch {
      this.channel = null;
    }
  }

  closeChannel(note: string | null, closeComm = false): void {
    this.channel?.end(note, closeComm);
    this.channel = null;
  }

  private setKernel(kernel: Kernel.IKernelConnection | null): void {
    if (kernel === this.kernel) {
      return;
    }
    if (this.kernel) {
      this.closeChannel(CLOSED_NOTE);
      this.channels.release(this.kernel, this);
    }
    this.kernel = kernel;
    if (kernel) {
      this.channels.register(kernel);
    }
  }
}

/** Every notebook panel's link; the comm target once per kernel connection. */
export class NotebookChannels {
  private links: PanelLink[] = [];
  private targets = new Map<Kernel.IKernelConnection, (comm: Kernel.IComm, msg: KernelMessage.ICommOpenMsg) => void>();

  constructor(tracker: INotebookTracker) {
    tracker.forEach(panel => this.track(panel));
    tracker.widgetAdded.connect((_, panel) => this.track(panel));
  }

  /** The channel a panel serves now, if any (for the tests' inspection and the fix command). */
  channelOf(panel: NotebookPanel): Channel | null {
    return this.links.find(link => link.panel === panel)?.channel ?? null;
  }

  track(panel: NotebookPanel): void {
    if (!this.links.some(link => link.panel === panel)) {
      this.links.push(new PanelLink(panel, this));
    }
  }

  forget(link: PanelLink): void {
    this.links = this.links.filter(l => l !== link);
  }

  register(kernel: Kernel.IKernelConnection): void {
    if (this.targets.has(kernel)) {
      return;
    }
    const target = (comm: Kernel.IComm, msg: KernelMessage.ICommOpenMsg): void => this.opened(kernel, comm, msg);
    this.targets.set(kernel, target);
    kernel.registerCommTarget(TARGET, target);
  }

  release(kernel: Kernel.IKernelConnection, link: PanelLink): void {
    if (this.links.some(l => l !== link && l.kernel === kernel)) {
      return;
    }
    const target = this.targets.get(kernel);
    this.targets.delete(kernel);
    if (target && !kernel.isDisposed) {
      kernel.removeCommTarget(TARGET, target);
    }
  }

  /**
   * The kernel opened a comm; each of its connections hears it. Every connection picks the same panel
   * among all panels of that kernel, and only the connection that panel uses answers.
   */
  private opened(kernel: Kernel.IKernelConnection, comm: Kernel.IComm, msg: KernelMessage.ICommOpenMsg): void {
    const data = (msg.content.data ?? {}) as { path?: unknown };
    const path = typeof data.path === 'string' ? data.path : null;
    const candidates = this.links
      .filter(link => link.kernel && link.kernel.id === kernel.id && !link.panel.isDisposed)
      .map(link => ({ key: link, path: link.panel.context.path }));
    const chosen = chooseAnswerer(path, candidates);
    if (chosen && chosen.kernel === kernel) {
      chosen.attach(comm);
    }
  }
}
