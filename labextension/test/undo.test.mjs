// The Undo buttons' pure parts (src/undo.ts): the code a click sends, reading the kernel's answers, and the
// panel's state against a kernel connection that answers as a live kernel does (IOPub messages on a future).
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { NOT_LISTED, Shown, UNDOABLE_CODE, UndoState, parseUndoable, runSilently, undoCode } from '../lib/undo.js';

const PREFIX = 'get_ipython().find_line_magic("shiro")(';

test('a call id reaches the kernel as one string literal, whatever it holds', () => {
  const ids = ['call_abc123', 'x"); import os; os.system("id"); ("', 'a\\"b', 'line\nbreak\r\u2028', "it's", 'caf\u00e9 \ud800',
    "call_{__import__('os').system('id')}$HOME"];
  for (const id of ids) {
    const code = undoCode(id);
    assert.ok(code.startsWith(PREFIX) && code.endsWith(')'), code);
    const literal = code.slice(PREFIX.length, -1);
    assert.ok(!/[\n\r]/.test(literal), literal); // one line of code
    // a JSON string literal: double quotes outside, none unescaped inside; Python reads its escapes the same
    assert.ok(literal.startsWith('"') && literal.endsWith('"') && !/[^\\]"./.test(literal.slice(0, -1)), literal);
    assert.equal(JSON.parse(literal), '/undo ' + id);
  }
  assert.equal(UNDOABLE_CODE, 'get_ipython().find_line_magic("shiro")("/undoable")');
  // the magic called as a function: IPython's run_line_magic would evaluate `{…}` in the line
  assert.ok(!undoCode('{x}').includes('run_line_magic'));
});

test("the listing is read from the answer's JSON line, and nothing else lists a call", () => {
  assert.deepEqual([...parseUndoable('{"calls": ["call_1", "call_2"]}')], ['call_1', 'call_2']);
  assert.deepEqual([...parseUndoable('resumed 0193ab2c\n{"calls": ["c"]}\n')], ['c']);
  assert.deepEqual([...parseUndoable('{"calls": ["ok", 3, null, {"x": 1}]}')], ['ok']);
  assert.deepEqual([...parseUndoable('')], []);
  assert.deepEqual([...parseUndoable("UsageError: Line magic function `%shiro` not found.")], []);
  assert.deepEqual([...parseUndoable('{"calls": "call_1"}')], []);
  assert.deepEqual([...parseUndoable('["call_1"]')], []);
});

test('a placeholder display waits for its update; other displays and output do not', () => {
  const shown = new Shown();
  shown.feed('display_data', { data: { 'text/plain': 'taking the steps back…' }, transient: { display_id: 'd1' } });
  assert.equal(shown.waiting, true);
  shown.feed('update_display_data', { data: { 'text/plain': 'not this one' }, transient: { display_id: 'd2' } });
  assert.equal(shown.waiting, true);
  shown.feed('update_display_data', { data: { 'text/plain': 'undid 2 steps' }, transient: { display_id: 'd1' } });
  assert.equal(shown.waiting, false);
  assert.equal(shown.text, 'undid 2 steps');

  const plain = new Shown();
  plain.feed('display_data', { data: { 'text/plain': '{"calls": []}' }, transient: {} });
  assert.equal(plain.waiting, false);
  assert.equal(plain.text, '{"calls": []}');
  const printed = new Shown();
  printed.feed('stream', { name: 'stdout', text: 'a' });
  printed.feed('stream', { name: 'stderr', text: 'b' });
  printed.feed('stream', { name: 'stdout', text: 'c' });
  assert.equal(printed.text, 'ac');
});

/** A kernel connection whose silent requests are answered by `answer(code)`: the IOPub messages of the request
 * (before its reply) and, for an undo, the update that follows it. */
function scriptedKernel(answer) {
  const kernel = {
    sent: [],
    requestExecute(content, disposeOnDone) {
      kernel.sent.push({ code: content.code, silent: content.silent, disposeOnDone });
      const { now = [], later = [] } = answer(content.code);
      const future = {
        onIOPub: () => undefined,
        disposed: false,
        dispose() {
          future.disposed = true;
        },
        done: new Promise(resolve => {
          setTimeout(() => {
            now.forEach(([type, content]) => future.onIOPub({ header: { msg_type: type }, content }));
            resolve({});
            setTimeout(() => {
              if (!future.disposed) {
                later.forEach(([type, content]) => future.onIOPub({ header: { msg_type: type }, content }));
              }
            }, 5);
          }, 5);
        })
      };
      return future;
    }
  };
  return kernel;
}

const listing = calls => ({ now: [['display_data', { data: { 'text/plain': JSON.stringify({ calls }) }, transient: {} }]] });

test('a silent undo waits for the report that replaces its placeholder', async () => {
  const kernel = scriptedKernel(() => ({
    now: [['display_data', { data: { 'text/plain': 'taking the steps back…' }, transient: { display_id: 'p' } }]],
    later: [['update_display_data', { data: { 'text/plain': 'undid 1 step, newest first' }, transient: { display_id: 'p' } }]]
  }));
  assert.equal(await runSilently(kernel, undoCode('call_1'), 2000), 'undid 1 step, newest first');
  assert.deepEqual(kernel.sent[0], { code: undoCode('call_1'), silent: true, disposeOnDone: false });
  const mute = scriptedKernel(() => ({
    now: [['display_data', { data: { 'text/plain': 'taking the steps back…' }, transient: { display_id: 'p' } }]]
  }));
  assert.equal(await runSilently(mute, 'x', 30), ''); // no report in time: nothing is claimed
});

test('the panel asks once more for asks made while one is out, and a restart forgets what was listed', async () => {
  let calls = ['call_1', 'call_2'];
  const kernel = scriptedKernel(code => (code === UNDOABLE_CODE ? listing(calls) : {}));
  const state = new UndoState(() => kernel);
  let draws = 0;
  state.subscribe(() => draws++);
  const first = state.refresh();
  state.refresh();
  state.refresh();
  await first;
  assert.equal(kernel.sent.length, 2); // the one out, and one more for the asks made meanwhile
  assert.deepEqual([...state.calls], ['call_1', 'call_2']);
  assert.ok(state.asked && draws > 0);

  const asking = state.refresh();
  state.forget(); // the kernel restarted while the old one's answer was on its way
  await asking;
  assert.deepEqual([...state.calls], []);
  calls = [];
  await state.refresh();
  assert.deepEqual([...state.calls], []);
});

test('an undo sends the listed call, marks what it took back, and refuses a call the kernel did not list', async () => {
  let calls = ['call_1', 'call_2', 'call_3'];
  const kernel = scriptedKernel(code => {
    if (code === UNDOABLE_CODE) {
      return listing(calls);
    }
    calls = ['call_1'];
    return {
      now: [['display_data', { data: { 'text/plain': 'taking…' }, transient: { display_id: 'u' } }]],
      later: [['update_display_data', { data: { 'text/plain': 'undid 2 steps\nrestored: df' }, transient: { display_id: 'u' } }]]
    };
  });
  const state = new UndoState(() => kernel);
  await state.refresh();
  assert.equal(await state.undo('call_2'), 'undid 2 steps\nrestored: df');
  assert.deepEqual([...state.calls], ['call_1']);
  assert.deepEqual([...state.undone].sort(), ['call_2', 'call_3']);
  assert.equal(state.busy, false);
  const sent = kernel.sent.length;
  assert.equal(await state.undo('x"); import os; ("'), NOT_LISTED);
  assert.equal(kernel.sent.length, sent); // nothing sent for it
  assert.equal(await new UndoState(() => null).undo('call_1'), NOT_LISTED); // no kernel, no undo
});
