/**
 * The answer's checked numbers (the bundle's `numbers`, docs/turn-format.md "Numbers") marked in the
 * rendered answer, as the kernel's HTML does (shiro_kernel/ui/marks.py): a number found in a tool output
 * links to its tool row, titled `from call 2 (python): <the output line>`; one found nowhere becomes
 * `<span class="shiro-number-missing" title="not found in this turn's outputs">16.4 %⚠</span>`; the footer
 * starts with `⚠ 2 numbers not found in this turn's outputs`.
 *
 * The marks go in after the model's Markdown is rendered and sanitized, never into it: each number's place
 * is marked in the raw answer with characters of Unicode's Private Use Area (its own pair per number,
 * `withSentinels`), the text is rendered and made inert, and only then does `applyMarks` turn a pair that
 * stands in one text node into an element built with the DOM (the number's own text as a text node, the
 * title an attribute set by the DOM). Pairs in attributes are dropped unmarked; a number split across elements
 * (`1<b></b>6.4 %`) gets no link, and its ⚠ where it ends when it was found nowhere.
 * Offsets are Unicode code points (a Python string's), so the answer is indexed with `Array.from`.
 *
 * Everything but `applyMarks` is pure (node's test runner checks it).
 */

export const MISSING = '⚠';
export const MISSING_TITLE = "not found in this turn's outputs";
/** Numbers marked in one answer: U+E000 + k opens number k, U+E000 + LIMIT + k closes it. */
export const LIMIT = 3200;
const OPEN = 0xe000;
const CLOSE = OPEN + LIMIT;

export interface INumber {
  text: string;
  found: boolean;
  call_id?: string | null;
  start?: number | null;
  end?: number | null;
  line?: string | null;
}

/** A number placed in the answer: code-point offsets, in order, none overlapping the one before. */
export interface IPlaced {
  start: number;
  end: number;
  number: INumber;
}

export function isNumber(value: unknown): value is INumber {
  const n = value as INumber;
  return typeof value === 'object' && value !== null && typeof n.text === 'string' && typeof n.found === 'boolean';
}

/** The numbers of a bundle that can be read (a malformed list gives none). */
export function numbersOf(value: unknown): INumber[] {
  return Array.isArray(value) ? value.filter(isNumber) : [];
}

/** "⚠ 2 numbers not found in this turn's outputs", or '' when every number was found. */
export function numbersLine(numbers: INumber[]): string {
  const missing = numbers.filter(n => !n.found).length;
  if (!missing) {
    return '';
  }
  return `${MISSING} ${missing} number${missing === 1 ? '' : 's'} not found in this turn's outputs`;
}

function indexOfPoints(points: string[], text: string[], from: number): number {
  for (let i = from; i + text.length <= points.length; i++) {
    let k = 0;
    while (k < text.length && points[i + k] === text[k]) {
      k++;
    }
    if (k === text.length) {
      return i;
    }
  }
  return -1;
}

/**
 * The numbers with their offsets checked against `answer` (code points): kept when they hold the number's
 * text, else the next place that text stands, else none (it still counts in the footer, but is not marked).
 * Then only those inside the answer, in order, not overlapping, at most LIMIT.
 */
export function placeNumbers(answer: string, numbers: INumber[]): IPlaced[] {
  const points = Array.from(answer);
  const found: IPlaced[] = [];
  let last = 0;
  for (const number of numbers) {
    const text = Array.from(number.text);
    let start = number.start;
    let end = number.end;
    const fits =
      Number.isInteger(start) &&
      Number.isInteger(end) &&
      text.length > 0 &&
      points.slice(start as number, end as number).join('') === number.text;
    if (!fits) {
      const at = text.length ? indexOfPoints(points, text, last) : -1;
      [start, end] = at >= 0 ? [at, at + text.length] : [null, null];
    }
    if (typeof start === 'number' && typeof end === 'number') {
      found.push({ start, end, number });
      last = end;
    }
  }
  const out: IPlaced[] = [];
  let edge = 0;
  for (const p of [...found].sort((a, b) => a.start - b.start)) {
    if (edge <= p.start && p.start < p.end && p.end <= points.length && out.length < LIMIT) {
      out.push(p);
      edge = p.end;
    }
  }
  return out;
}

function sentinelClass(used: number): string {
  const c = (code: number): string => `\\u${code.toString(16).padStart(4, '0')}`;
  return `${c(OPEN)}-${c(OPEN + used - 1)}${c(CLOSE)}-${c(CLOSE + used - 1)}`;
}

/** A pattern matching any sentinel of `used` numbers (global). */
export function sentinels(used: number): RegExp {
  return new RegExp(`[${sentinelClass(Math.max(used, 1))}]`, 'g');
}

/**
 * `answer` with number k's place marked by U+E000+k before it and U+E000+LIMIT+k after it. The answer's
 * own characters in the ranges used become U+FFFD first, so none of them is taken for a mark.
 */
export function withSentinels(answer: string, placed: IPlaced[]): string {
  if (!placed.length) {
    return answer;
  }
  const points = Array.from(answer.replace(sentinels(placed.length), '\ufffd'));
  const inserts = new Map<number, string>();
  const add = (at: number, mark: string): void => {
    inserts.set(at, (inserts.get(at) ?? '') + mark);
  };
  // a close before an open at the same place: number k ends where number k+1 starts
  placed.forEach((p, k) => add(p.end, String.fromCharCode(CLOSE + k)));
  placed.forEach((p, k) => add(p.start, String.fromCharCode(OPEN + k)));
  let out = '';
  for (let i = 0; i <= points.length; i++) {
    out += inserts.get(i) ?? '';
    if (i < points.length) {
      out += points[i];
    }
  }
  return out;
}

/**
 * A text with sentinel pairs, cut into plain runs, marked numbers (k: the number's place in `placed`) and
 * lone closing characters (`lone`: the number was split by an element, `1<b></b>6.4 %`, and ends here).
 */
export function splitMarked(text: string, used: number): Array<{ text: string; k: number | null; lone?: boolean }> {
  const out: Array<{ text: string; k: number | null; lone?: boolean }> = [];
  const pair = new RegExp(`([\\u${OPEN.toString(16)}-\\u${(OPEN + used - 1).toString(16)}])([^${sentinelClass(used)}]*)([\\u${CLOSE.toString(16)}-\\u${(CLOSE + used - 1).toString(16)}])`, 'g');
  const strip = (s: string): string => s.replace(sentinels(used), '');
  const plain = (s: string): void => {
    // the closing characters left in a plain run each end a number whose opening is elsewhere
    let last = 0;
    for (let i = 0; i < s.length; i++) {
      const code = s.charCodeAt(i);
      if (code >= CLOSE && code < CLOSE + used) {
        out.push({ text: strip(s.slice(last, i)), k: null });
        out.push({ text: '', k: code - CLOSE, lone: true });
        last = i + 1;
      }
    }
    out.push({ text: strip(s.slice(last)), k: null });
  };
  let last = 0;
  for (let m = pair.exec(text); m; m = pair.exec(text)) {
    const k = m[1].charCodeAt(0) - OPEN;
    if (m[3].charCodeAt(0) - CLOSE !== k) {
      continue;
    }
    if (m.index > last) {
      plain(text.slice(last, m.index));
    }
    out.push({ text: m[2], k });
    last = m.index + m[0].length;
  }
  if (last < text.length) {
    plain(text.slice(last));
  }
  return out.filter(part => part.text !== '' || part.k !== null);
}

/** How a number's title names its call: call id -> `call 2 (python)`, counted over the turn's tool rows. */
export function callNames(entries: Array<{ type: string; callId?: string; name?: string }>): Map<string, string> {
  const names = new Map<string, string>();
  let i = 0;
  for (const entry of entries) {
    if (entry.type === 'tool') {
      i++;
      if (typeof entry.callId === 'string' && entry.callId) {
        names.set(entry.callId, `call ${i} (${entry.name})`);
      }
    }
  }
  return names;
}

/** A found number's title: `from call 2 (python): <line>`. */
export function foundTitle(number: INumber, calls: Map<string, string>): string {
  const where = calls.get(number.call_id ?? '') ?? 'a tool call';
  return number.line ? `from ${where}: ${number.line}` : `from ${where}`;
}

/** The HTML id the kernel gives a tool row's output: `shiro-call-` and the call id, odd characters `_`. */
export function callAnchor(callId: string): string {
  return 'shiro-call-' + callId.replace(/[^A-Za-z0-9_-]/g, '_');
}

function missingMark(doc: Document, text: string): HTMLElement {
  const span = doc.createElement('span');
  span.className = 'shiro-number-missing';
  span.title = MISSING_TITLE;
  span.textContent = text + MISSING;
  return span;
}

/**
 * Turn the sentinel pairs left in `root`'s text into marks, and remove every other sentinel (in other text,
 * in attributes). `openCall(callId)` opens and shows a tool row when a found number's link is followed.
 */
export function applyMarks(
  root: HTMLElement,
  placed: IPlaced[],
  calls: Map<string, string>,
  openCall: (callId: string) => void
): number {
  const used = placed.length;
  if (!used) {
    return 0;
  }
  const any = sentinels(used);
  const test = new RegExp(any.source);
  for (const el of Array.from(root.querySelectorAll('*'))) {
    for (const attr of Array.from(el.attributes)) {
      if (test.test(attr.value)) {
        el.setAttribute(attr.name, attr.value.replace(any, ''));
      }
    }
  }
  const doc = root.ownerDocument;
  const walker = doc.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  const nodes: Text[] = [];
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    if (test.test((node as Text).data)) {
      nodes.push(node as Text);
    }
  }
  let marked = 0;
  for (const node of nodes) {
    const inLink = !!node.parentElement?.closest('a');
    const fragment = doc.createDocumentFragment();
    for (const part of splitMarked(node.data, used)) {
      if (part.k === null) {
        fragment.appendChild(doc.createTextNode(part.text));
        continue;
      }
      const number = placed[part.k].number;
      if (part.lone) {
        if (!number.found) {
          // a number split by markup (`1<b></b>6.4 %`): its ⚠ where it ends, so no split hides it
          fragment.appendChild(missingMark(doc, ''));
          marked++;
        }
        continue;
      }
      marked++;
      if (!number.found) {
        fragment.appendChild(missingMark(doc, part.text));
        continue;
      }
      const callId = number.call_id ?? '';
      const link = !inLink && calls.has(callId);
      const mark = doc.createElement(link ? 'a' : 'span');
      mark.className = 'shiro-number';
      mark.title = foundTitle(number, calls);
      mark.textContent = part.text;
      if (link) {
        mark.setAttribute('href', `#${callAnchor(callId)}`);
        mark.addEventListener('click', event => {
          event.preventDefault(); // JupyterLab's page must not follow a fragment: the row opens here instead
          event.stopPropagation();
          openCall(callId);
        });
      }
      fragment.appendChild(mark);
    }
    node.replaceWith(fragment);
  }
  return marked;
}
