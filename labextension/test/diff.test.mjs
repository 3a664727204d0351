// The line diff a proposed edit is drawn with, and how the renderer reads a unified diff back.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { MAX_TABLE, diffCounts, hunked, lineDiff, splitLines, unifiedLines } from '../lib/diff.js';

const show = lines => lines.map(l => (l.kind === 'add' ? '+' : l.kind === 'del' ? '-' : ' ') + l.text).join('\n');

// Rebuild both sides from the diff: whatever the alignment, it must give back before and after.
function sides(lines) {
  return [
    lines.filter(l => l.kind !== 'add').map(l => l.text).join('\n'),
    lines.filter(l => l.kind !== 'del').map(l => l.text).join('\n')
  ];
}

test('an edit of one line in the middle', () => {
  const d = lineDiff('a\nb\nc', 'a\nB\nc');
  assert.equal(show(d), ' a\n-b\n+B\n c');
  assert.deepEqual(diffCounts(d), { added: 1, removed: 1 });
});

test('the longest common subsequence keeps moved-around lines', () => {
  const d = lineDiff('x = 1\ny = 2\nprint(x)\nprint(y)', 'x = 1\nprint(x)\nz = 3\nprint(y)');
  assert.equal(show(d), ' x = 1\n-y = 2\n print(x)\n+z = 3\n print(y)');
  assert.deepEqual(diffCounts(d), { added: 1, removed: 1 });
});

test('empty sides, identical sides, trailing newline', () => {
  assert.deepEqual(lineDiff('', ''), []);
  assert.equal(show(lineDiff('', 'a\nb')), '+a\n+b');
  assert.equal(show(lineDiff('a\nb', '')), '-a\n-b');
  assert.deepEqual(diffCounts(lineDiff('same\ntext', 'same\ntext')), { added: 0, removed: 0 });
  assert.equal(show(lineDiff('a', 'a\n')), ' a\n+');
  assert.deepEqual(splitLines(''), []);
  assert.deepEqual(splitLines('a\n'), ['a', '']);
});

test('random edits: the diff always rebuilds both sources and is minimal in kept lines', () => {
  let seed = 7;
  const rand = n => ((seed = (seed * 1103515245 + 12345) % 2147483648), seed % n);
  for (let round = 0; round < 300; round++) {
    const a = Array.from({ length: rand(12) }, () => 'l' + rand(5));
    const b = Array.from({ length: rand(12) }, () => 'l' + rand(5));
    const d = lineDiff(a.join('\n'), b.join('\n'));
    const [before, after] = sides(d);
    assert.equal(before, a.join('\n'));
    assert.equal(after, b.join('\n'));
    // kept lines are a longest common subsequence: compare with a plain DP length
    const L = Array.from({ length: a.length + 1 }, () => new Array(b.length + 1).fill(0));
    for (let i = a.length - 1; i >= 0; i--) {
      for (let j = b.length - 1; j >= 0; j--) {
        L[i][j] = a[i] === b[j] ? L[i + 1][j + 1] + 1 : Math.max(L[i + 1][j], L[i][j + 1]);
      }
    }
    if (a.length && b.length) {
      assert.equal(d.filter(l => l.kind === 'same').length, L[0][0]);
    }
  }
});

test('a huge middle falls back to remove-then-add, still correct', () => {
  const n = Math.ceil(Math.sqrt(MAX_TABLE)) + 10;
  const a = Array.from({ length: n }, (_, i) => `a${i}`).join('\n');
  const b = Array.from({ length: n }, (_, i) => `b${i}`).join('\n');
  const d = lineDiff(`head\n${a}\ntail`, `head\n${b}\ntail`);
  assert.deepEqual(diffCounts(d), { added: n, removed: n });
  assert.equal(d[0].text, 'head');
  assert.equal(d[d.length - 1].text, 'tail');
});

test('hunks fold long unchanged runs', () => {
  const before = Array.from({ length: 20 }, (_, i) => `line ${i}`).join('\n');
  const after = before.replace('line 10', 'LINE 10');
  const h = hunked(lineDiff(before, after), 2);
  assert.deepEqual(h[0], { kind: 'skip', count: 8 });
  assert.deepEqual(h.slice(1, -1).map(l => l.kind), ['same', 'same', 'del', 'add', 'same', 'same']);
  assert.deepEqual(h[h.length - 1], { kind: 'skip', count: 7 });
  assert.deepEqual(hunked(lineDiff('a\nb', 'a\nb')), [{ kind: 'skip', count: 2 }]);
});

test('unified diff lines are told apart by their first characters', () => {
  const u = unifiedLines('--- cell 3\n+++ cell 3\n@@ -1,2 +1,2 @@\n x = 1\n-y = 2\n+y = 3\n');
  assert.deepEqual(u.map(l => l.kind), ['file', 'file', 'hunk', 'same', 'del', 'add']);
  assert.equal(u[5].text, '+y = 3');
});
