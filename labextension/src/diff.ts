/**
 * Line diffs, pure (no DOM): what a proposed edit looks like in its cell, and how a unified diff made
 * by the kernel is read back for the turn renderer. A longest-common-subsequence diff over lines,
 * after trimming the common head and tail: cells are short, and an edit usually touches a few lines,
 * so the quadratic table is over the changed middle only. (`@codemirror/merge` is not in the
 * offline registry here, and a read-only diff needs none of its editor machinery.)
 */

export type LineKind = 'same' | 'add' | 'del';

export interface IDiffLine {
  kind: LineKind;
  text: string;
}

/** A run of unchanged lines left out of a hunked diff. */
export interface ISkip {
  kind: 'skip';
  count: number;
}

/** Above this many table cells the middle is shown as all removed then all added (still correct). */
export const MAX_TABLE = 4_000_000;

/** A cell's source as lines: `a\nb` and `a\nb\n` differ by a last, empty line. */
export function splitLines(source: string): string[] {
  return source === '' ? [] : source.split('\n');
}

/** The lines of `before` and `after` as kept, removed and added lines, in order (removals first). */
export function lineDiff(before: string, after: string): IDiffLine[] {
  const a = splitLines(before);
  const b = splitLines(after);
  let head = 0;
  while (head < a.length && head < b.length && a[head] === b[head]) {
    head++;
  }
  let tail = 0;
  while (tail < a.length - head && tail < b.length - head && a[a.length - 1 - tail] === b[b.length - 1 - tail]) {
    tail++;
  }
  const out: IDiffLine[] = a.slice(0, head).map(text => ({ kind: 'same' as LineKind, text }));
  out.push(...middle(a.slice(head, a.length - tail), b.slice(head, b.length - tail)));
  out.push(...a.slice(a.length - tail).map(text => ({ kind: 'same' as LineKind, text })));
  return out;
}

function middle(a: string[], b: string[]): IDiffLine[] {
  const n = a.length;
  const m = b.length;
  if (n * m > MAX_TABLE || n === 0 || m === 0) {
    return [
      ...a.map(text => ({ kind: 'del' as LineKind, text })),
      ...b.map(text => ({ kind: 'add' as LineKind, text }))
    ];
  }
  // lcs[i][j]: the longest common subsequence of a[i:] and b[j:], one flat row-major table
  const w = m + 1;
  const lcs = new Uint32Array((n + 1) * w);
  for (let i = n - 1; i >= 0; i--) {
    for (let j = m - 1; j >= 0; j--) {
      lcs[i * w + j] =
        a[i] === b[j] ? lcs[(i + 1) * w + j + 1] + 1 : Math.max(lcs[(i + 1) * w + j], lcs[i * w + j + 1]);
    }
  }
  const out: IDiffLine[] = [];
  let i = 0;
  let j = 0;
  while (i < n && j < m) {
    if (a[i] === b[j]) {
      out.push({ kind: 'same', text: a[i] });
      i++;
      j++;
    } else if (lcs[(i + 1) * w + j] >= lcs[i * w + j + 1]) {
      out.push({ kind: 'del', text: a[i++] });
    } else {
      out.push({ kind: 'add', text: b[j++] });
    }
  }
  while (i < n) {
    out.push({ kind: 'del', text: a[i++] });
  }
  while (j < m) {
    out.push({ kind: 'add', text: b[j++] });
  }
  return out;
}

/** `{added, removed}` line counts of a diff. */
export function diffCounts(lines: IDiffLine[]): { added: number; removed: number } {
  let added = 0;
  let removed = 0;
  for (const line of lines) {
    if (line.kind === 'add') {
      added++;
    } else if (line.kind === 'del') {
      removed++;
    }
  }
  return { added, removed };
}

/**
 * The diff with long unchanged runs folded: `context` kept lines around each change, the rest one
 * `skip` row. A diff with no change keeps nothing but the skip.
 */
export function hunked(lines: IDiffLine[], context = 3): Array<IDiffLine | ISkip> {
  const keep = new Array<boolean>(lines.length).fill(false);
  lines.forEach((line, k) => {
    if (line.kind !== 'same') {
      for (let d = Math.max(0, k - context); d <= Math.min(lines.length - 1, k + context); d++) {
        keep[d] = true;
      }
    }
  });
  const out: Array<IDiffLine | ISkip> = [];
  let skipped = 0;
  lines.forEach((line, k) => {
    if (keep[k]) {
      if (skipped) {
        out.push({ kind: 'skip', count: skipped });
        skipped = 0;
      }
      out.push(line);
    } else {
      skipped++;
    }
  });
  if (skipped) {
    out.push({ kind: 'skip', count: skipped });
  }
  return out;
}

export type UnifiedKind = 'add' | 'del' | 'same' | 'hunk' | 'file';

/** A unified diff's lines, each with what it is (`+`, `-`, ` `, `@@`, or a `---`/`+++` file line). */
export function unifiedLines(text: string): Array<{ kind: UnifiedKind; text: string }> {
  const lines = text.replace(/\n$/, '').split('\n');
  return lines.map(line => {
    if (line.startsWith('+++ ') || line.startsWith('--- ')) {
      return { kind: 'file' as UnifiedKind, text: line };
    }
    if (line.startsWith('@@')) {
      return { kind: 'hunk' as UnifiedKind, text: line };
    }
    if (line.startsWith('+')) {
      return { kind: 'add' as UnifiedKind, text: line };
    }
    if (line.startsWith('-')) {
      return { kind: 'del' as UnifiedKind, text: line };
    }
    return { kind: 'same' as UnifiedKind, text: line };
  });
}
