// The notebook channel's pure part: messages, path matching, the checks at Accept, the review ledger.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';

import {
  Ledger, PROTOCOL, TARGET, VERSION, addressedTo, checkChange, chooseAnswerer, errorReply, hello, isShiroCell, okReply,
  parseChange, parseMessage, tailMatch
} from '../lib/protocol.js';

test('the version said in hello is the package version', () => {
  const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url)));
  assert.equal(VERSION, pkg.version);
  assert.equal(TARGET, 'shiro.notebook');
  assert.deepEqual(hello('work/a.ipynb', 'id-1', 'client-1'), {
    type: 'hello', protocol: PROTOCOL, path: 'work/a.ipynb', panel: 'id-1', client: 'client-1', version: VERSION,
    withdraws: true
  });
});

test('requests parse; what is wrong is said, with the id to reply to', () => {
  assert.deepEqual(parseMessage({ type: 'request', id: 1, op: 'read' }),
    { kind: 'request', request: { type: 'request', id: 1, op: 'read', ids: null }, to: null });
  assert.deepEqual(parseMessage({ type: 'request', id: 1, op: 'read', ids: ['c'], to: 'w1' }),
    { kind: 'request', request: { type: 'request', id: 1, op: 'read', ids: ['c'] }, to: 'w1' });
  assert.deepEqual(parseMessage({ type: 'request', id: 2, op: 'run', ids: ['a', 'b'] }).request.ids, ['a', 'b']);
  assert.deepEqual(parseMessage({ type: 'cancel', id: 3 }), { kind: 'cancel', id: 3, to: null });
  assert.deepEqual(parseMessage({ type: 'cancel', id: 3, to: 'w2' }), { kind: 'cancel', id: 3, to: 'w2' });
  const review = parseMessage({
    type: 'request', id: 4, op: 'review', turn: 't', title: 'fix it',
    changes: [{ kind: 'edit', id: 'c1', source: 'new', expect: 'old' }, { kind: 'insert', after: null, source: 'x' },
      { kind: 'delete', id: 'c2', expect: 'gone' }]
  });
  assert.equal(review.kind, 'request');
  assert.equal(review.request.review, true); // absent means review: nothing changes before Accept
  assert.equal(review.request.changes[1].cell_type, 'code');
  assert.equal(parseMessage({ type: 'request', id: 5, op: 'review', review: false,
    changes: [{ kind: 'insert', after: 'c1', source: '' }] }).request.review, false);

  const bad = [
    [{ type: 'request', id: 6, op: 'fly' }, 6, /unknown op/],
    [{ type: 'request', op: 'read' }, null, /integer id/],
    [{ type: 'request', id: 7, op: 'run', ids: [1] }, 7, /ids/],
    [{ type: 'request', id: 7, op: 'read', ids: 'c1' }, 7, /ids/],
    [{ type: 'request', id: 8, op: 'review', changes: [] }, 8, /non-empty/],
    [{ type: 'request', id: 9, op: 'review', changes: [{ kind: 'edit', id: 'c', source: 's' }] }, 9, /expect/],
    [{ type: 'request', id: 10, op: 'review', changes: [{ kind: 'insert', after: 3, source: 's' }] }, 10, /after/],
    [{ type: 'request', id: 11, op: 'review', changes: [{ kind: 'insert', after: null, source: 's', cell_type: 'html' }] }, 11, /cell_type/],
    [{ type: 'request', id: 12, op: 'review', changes: [{ kind: 'move' }] }, 12, /unknown kind/],
    [{ type: 'hello' }, null, /unknown message type/],
    ['text', null, /not an object/]
  ];
  for (const [data, id, error] of bad) {
    const m = parseMessage(data);
    assert.equal(m.kind, 'invalid', JSON.stringify(data));
    assert.equal(m.id, id);
    assert.match(m.error, error);
  }
  assert.match(parseChange(null, 2), /change 2/);
});

test('a message addressed to another window is not for this one', () => {
  assert.equal(addressedTo(null, 'w1'), true); // an older kernel names nobody: the one panel that answered serves
  assert.equal(addressedTo('w1', 'w1'), true);
  assert.equal(addressedTo('w2', 'w1'), false);
  assert.equal(parseMessage({ type: 'request', id: 1, op: 'fly', to: 'w2' }).to, 'w2'); // not answered elsewhere
});

test('a cell that would start a shiro turn is known by its magic', () => {
  for (const source of ['%shiro rerun all the cells', '%%shiro\nexplain', 'x = 1\n  %shiro --wait go',
    "get_ipython().run_line_magic('shiro', 'go')", 'get_ipython().run_cell_magic("shiro", "", "go")']) {
    assert.equal(isShiroCell(source), true, source);
  }
  for (const source of ['%shirok x', 'print("%shiro")', '# %shiro go', '%load_ext shiro_kernel', 'shiro = 1']) {
    assert.equal(isShiroCell(source), false, source);
  }
});

test('replies', () => {
  assert.deepEqual(okReply(3, { cells: [] }), { type: 'reply', id: 3, ok: true, cells: [] });
  assert.deepEqual(errorReply(3, 'no.'), { type: 'reply', id: 3, ok: false, error: 'no.' });
});

test('paths compare by their tail', () => {
  assert.equal(tailMatch('/home/u/work/a.ipynb', 'work/a.ipynb'), 2);
  assert.equal(tailMatch('/home/u/work/a.ipynb', 'a.ipynb'), 1);
  assert.equal(tailMatch('a.ipynb', 'sub/a.ipynb'), 1); // the kernel knew a path relative to its folder
  assert.equal(tailMatch('C:\\Users\\u\\a.ipynb', 'a.ipynb'), 1);
  assert.equal(tailMatch('/home/u/work/a.ipynb', 'other/a.ipynb'), 0);
  assert.equal(tailMatch('/home/u/ba.ipynb', 'a.ipynb'), 0); // whole names only
  assert.equal(tailMatch('/x/a.ipynb', ''), 0);
});

test('one panel answers: the longest matching tail, or the only one when the kernel knows no path', () => {
  const panels = [{ key: 'p1', path: 'a.ipynb' }, { key: 'p2', path: 'sub/a.ipynb' }, { key: 'p3', path: 'b.ipynb' }];
  assert.equal(chooseAnswerer('/root/sub/a.ipynb', panels), 'p2');
  assert.equal(chooseAnswerer('/root/a.ipynb', panels), 'p1');
  assert.equal(chooseAnswerer('/root/c.ipynb', panels), null);
  assert.equal(chooseAnswerer(null, panels), null);
  assert.equal(chooseAnswerer(null, [{ key: 'only', path: 'x.ipynb' }]), 'only');
  // two views of one document: the first answers, once
  assert.equal(chooseAnswerer('/r/v.ipynb', [{ key: 'v1', path: 'v.ipynb' }, { key: 'v2', path: 'v.ipynb' }]), 'v1');
});

test('a change is checked against the cell as it is now', () => {
  const edit = { kind: 'edit', id: 'c', source: 'new', expect: 'old' };
  assert.equal(checkChange(edit, { source: 'old', editing: false }), 'ok');
  assert.equal(checkChange(edit, { source: 'old!', editing: false }), 'conflict');
  assert.equal(checkChange(edit, { source: 'old', editing: true }), 'editing');
  assert.equal(checkChange(edit, null), 'missing');
  const del = { kind: 'delete', id: 'c', expect: 'old' };
  assert.equal(checkChange(del, { source: 'typed', editing: true }), 'conflict');
  assert.equal(checkChange({ kind: 'insert', after: null, source: '' }, null), 'ok');
  assert.equal(checkChange({ kind: 'insert', after: 'c', source: '' }, null), 'missing');
  assert.equal(checkChange({ kind: 'insert', after: 'c', source: '' }, { source: '', editing: true }), 'ok');
});

test('the ledger: each change decided once, done when all are', () => {
  const l = new Ledger(3);
  assert.deepEqual(l.pending(), [0, 1, 2]);
  assert.ok(l.decide(1, { status: 'accepted', id: 'a', index: 0 }));
  assert.ok(!l.decide(1, { status: 'rejected', id: 'a', index: 0 })); // the first decision stands
  assert.ok(!l.decide(5, { status: 'rejected', id: null, index: null }));
  assert.ok(!l.done);
  l.decide(0, { status: 'rejected', id: null, index: null });
  l.decide(2, { status: 'conflict', id: 'b', index: 2 });
  assert.ok(l.done);
  assert.deepEqual(l.results().map(r => r.status), ['rejected', 'accepted', 'conflict']);
});

test('a ledger says what is decided so far, null for the others', () => {
  const l = new Ledger(2);
  assert.deepEqual(l.sofar(), [null, null]);
  l.decide(1, { status: 'accepted', id: 'a', index: 0 });
  assert.deepEqual(l.sofar(), [null, { status: 'accepted', id: 'a', index: 0 }]);
});
