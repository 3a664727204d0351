// Unit tests for the renderer's pure helpers, on the compiled lib/ (`npm test` builds it first).
import { test } from 'node:test';
import assert from 'node:assert/strict';

import {
  HistoryWalker, duration, footer, isTurn, marker, parseHistory, shiroCell, taskBar, toolLine
} from '../lib/format.js';

const tasks = [
  { content: 'load', status: 'done' },
  { content: 'clean', status: 'in_progress' },
  { content: 'plot', status: 'pending' },
  { content: 'publish', status: 'blocked', note: 'no key' }
];

test('task bar is the seed bar, 40 wide', () => {
  assert.equal(taskBar(tasks), `tasks ${'#'.repeat(10)}${'.'.repeat(30)} 1/4  1 blocked`);
  assert.equal(taskBar([{ content: 'a', status: 'pending' }]), `tasks ${'.'.repeat(40)} 0/1`);
  assert.equal(taskBar([]), '');
  assert.equal(taskBar(undefined), '');
});

test('bar rounds half up as the seed does', () => {
  const tasks = n => Array.from({ length: 16 }, (_, i) => ({ content: `t${i}`, status: i < n ? 'done' : 'pending' }));
  // 1/16 * 40 = 2.5 -> 3, 3/16 * 40 = 7.5 -> 8, 5/16 * 40 = 12.5 -> 13
  assert.ok(taskBar(tasks(1)).startsWith(`tasks ${'#'.repeat(3)}${'.'.repeat(37)} 1/16`));
  assert.ok(taskBar(tasks(3)).startsWith(`tasks ${'#'.repeat(8)}.`));
  assert.ok(taskBar(tasks(5)).startsWith(`tasks ${'#'.repeat(13)}.`));
});

test('markers', () => {
  assert.deepEqual(['pending', 'in_progress', 'done', 'blocked'].map(marker), ['[ ]', '[~]', '[x]', '[!]']);
});

test('tool line matches render.py', () => {
  assert.equal(toolLine({ type: 'tool', name: 'python', args: 'df.x.mean()', status: 'ok', seconds: 0.004 }),
    '✓ python(df.x.mean()) · ok · 4 ms');
  assert.equal(toolLine({ type: 'tool', name: 'shell', args: 'ls', status: 'error', seconds: 2.25 }),
    '✗ shell(ls) · error · 2.3 s');
  assert.equal(toolLine({ type: 'tool', name: 'python', args: 'x', status: 'running' }), '… python(x) · running');
  assert.equal(duration(null), '');
});

test('footer has tokens, cost and the resume hint', () => {
  const turn = { version: 1, entries: [], usage: { inputTokens: 1234, outputTokens: 56, costUsd: 0.00022 },
    contextPercent: 12, resume: '%shiro -r 0193ab2c' };
  assert.equal(footer(turn), '1,234 in · 56 out tokens · $0.0002 · context 12% · resume: %shiro -r 0193ab2c');
  assert.equal(footer({ version: 1, entries: [], usage: { inputTokens: 5, outputTokens: 1, costUsd: null } }),
    '5 in · 1 out tokens');
});

test('a usage the server did not send is shown as the estimate it is', () => {
  const turn = { version: 1, entries: [], usage: { inputTokens: 4100, outputTokens: 60, costUsd: null, estimated: true } };
  assert.equal(footer(turn), '~4,100 in · ~60 out tokens (estimated: the server sent no usage)');
});

test('isTurn', () => {
  assert.ok(isTurn({ version: 1, entries: [] }));
  assert.ok(!isTurn({ version: 1 }));
  assert.ok(!isTurn('x'));
});

test('history: first Up keeps the draft, Down past the newest restores it', () => {
  const w = new HistoryWalker(['one', 'two']);
  assert.equal(w.up('draft'), 'two');
  assert.equal(w.up('two'), 'one');
  assert.equal(w.up('one'), null);
  assert.equal(w.down(), 'two');
  assert.equal(w.down(), 'draft');
  assert.equal(w.down(), null);
  assert.equal(new HistoryWalker([]).up('x'), null);
});

test('parseHistory and the inserted cell', () => {
  assert.deepEqual(parseHistory('noise\n["a", "b"]\n'), ['a', 'b']);
  assert.deepEqual(parseHistory('not json'), []);
  assert.equal(shiroCell('  what is df?\n'), '%%shiro\nwhat is df?');
});

test('the error line under a row: a refusal whole, other errors cut at 160', async () => {
  const { errorLine, drawableOutputs } = await import('../lib/format.js');
  const refusal = 'Error: not approved — this run cannot show approval buttons (no widget frontend) and ' +
    'Shiro.approval is "ask", so python was not run. To allow it, run `%config Shiro.approval = "auto"` and ask again.';
  assert.equal(errorLine({ type: 'tool', name: 'python', args: '', status: 'error', output: refusal + '\nmore' }), refusal);
  const long = 'Error: ' + 'x'.repeat(300);
  assert.equal(errorLine({ type: 'tool', name: 'grep', args: '', status: 'error', output: long }).length, 160);
  assert.equal(errorLine({ type: 'tool', name: 'grep', args: '', status: 'ok', output: long }), '');
  const outputs = [{ data: { 'image/png': 'iVBOR' } }, { data: {} }, null];
  assert.equal(drawableOutputs({ type: 'tool', name: 'python', args: '', status: 'ok', outputs }).length, 1);
});
