// Unit tests for the number marks' pure part (src/marks.ts), on the compiled lib/.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { callAnchor, callNames, foundTitle, numbersLine, placeNumbers, splitMarked, withSentinels } from '../lib/marks.js';
import { footer } from '../lib/format.js';

const O = k => String.fromCharCode(0xe000 + k);
const C = k => String.fromCharCode(0xe000 + 3200 + k);

test('the footer says the numbers not found, then the cached input, as the kernel does', () => {
  const usage = { inputTokens: 3856, cachedInputTokens: 3712, outputTokens: 1, costUsd: 0.0003 };
  const numbers = [
    { text: '16.4 %', found: false, call_id: null, start: 0, end: 6, line: null },
    { text: '2.0', found: true, call_id: 'c1', start: 10, end: 13, line: '2.0' },
    { text: '$1.2M', found: false, call_id: null, start: null, end: null, line: null }
  ];
  assert.equal(
    footer({ version: 1, entries: [], usage, numbers }),
    "⚠ 2 numbers not found in this turn's outputs · 3,856 in (3,712 cached) · 1 out tokens · $0.0003"
  );
  assert.equal(footer({ version: 1, entries: [], usage: { ...usage, cachedInputTokens: 0 } }), '3,856 in · 1 out tokens · $0.0003');
  assert.equal(footer({ version: 1, entries: [], usage: { inputTokens: 5, outputTokens: 1 } }), '5 in · 1 out tokens');
  assert.equal(numbersLine([{ text: '1', found: false }]), "⚠ 1 number not found in this turn's outputs");
  assert.equal(numbersLine([{ text: '1', found: true }]), '');
  assert.equal(footer({ version: 1, entries: [], numbers: 'junk' }), ''); // a malformed list counts nothing
});

test('offsets are code points: a number after an emoji is placed where Python placed it', () => {
  const answer = '📈 grew 16.4 % and 2.0';
  // Python: answer.index('16.4 %') == 7 (the emoji is one code point, two UTF-16 units)
  const placed = placeNumbers(answer, [
    { text: '16.4 %', found: false, start: 7, end: 13 },
    { text: '2.0', found: true, call_id: 'c', start: 18, end: 21 }
  ]);
  assert.deepEqual(placed.map(p => [p.start, p.end]), [[7, 13], [18, 21]]);
  assert.equal(withSentinels(answer, placed), `📈 grew ${O(0)}16.4 %${C(0)} and ${O(1)}2.0${C(1)}`);
});

test('wrong offsets fall back to the next place the text stands; none found: not marked', () => {
  const placed = placeNumbers('a 1,200 b 1,200', [
    { text: '1,200', found: true, start: 0, end: 5 },
    { text: '1,200', found: false, start: 99, end: 104 },
    { text: '777', found: false, start: null, end: null }
  ]);
  assert.deepEqual(placed.map(p => [p.start, p.end, p.number.found]), [[2, 7, true], [10, 15, false]]);
});

test('overlapping numbers: the first stands', () => {
  const placed = placeNumbers('x 12345 y', [
    { text: '12345', found: true, start: 2, end: 7 },
    { text: '345', found: false, start: 4, end: 7 }
  ]);
  assert.equal(placed.length, 1);
});

test("the answer's own private-use characters are never taken for marks", () => {
  const answer = `${O(0)}x 2.5 y${C(0)}`;
  const placed = placeNumbers(answer, [{ text: '2.5', found: false, start: 3, end: 6 }]);
  assert.equal(withSentinels(answer, placed), `\ufffdx ${O(0)}2.5${C(0)} y\ufffd`);
});

test('adjacent numbers close before the next opens', () => {
  const placed = placeNumbers('1.52.5', [
    { text: '1.5', found: false, start: 0, end: 3 },
    { text: '2.5', found: false, start: 3, end: 6 }
  ]);
  assert.equal(withSentinels('1.52.5', placed), `${O(0)}1.5${C(0)}${O(1)}2.5${C(1)}`);
  assert.deepEqual(splitMarked(withSentinels('1.52.5', placed), 2), [
    { text: '1.5', k: 0 },
    { text: '2.5', k: 1 }
  ]);
});

test('a text node is cut into plain runs and marked numbers; a split pair ends in a lone close', () => {
  assert.deepEqual(splitMarked(`up ${O(0)}16.4 %${C(0)} in Q3`, 1), [
    { text: 'up ', k: null },
    { text: '16.4 %', k: 0 },
    { text: ' in Q3', k: null }
  ]);
  // the number's pair was split by markup (`**1**2`): its halves are in two text nodes
  assert.deepEqual(splitMarked(`${O(0)}1`, 1), [{ text: '1', k: null }]);
  // where it ends, the number's closing character stands alone: its ⚠ goes there when it was not found
  assert.deepEqual(splitMarked(`2${C(0)} more`, 1), [
    { text: '2', k: null },
    { text: '', k: 0, lone: true },
    { text: ' more', k: null }
  ]);
  assert.deepEqual(splitMarked(`a ${O(0)}1${C(1)}.5 %${C(0)}`, 2), [
    { text: 'a 1', k: null },
    { text: '', k: 1, lone: true },
    { text: '.5 %', k: null },
    { text: '', k: 0, lone: true }
  ]);
});

test('titles and anchors name the call as the kernel does', () => {
  const calls = callNames([
    { type: 'text', text: 'x' },
    { type: 'tool', callId: 'call_a', name: 'python' },
    { type: 'notice', text: 'n' },
    { type: 'tool', callId: 'call/b', name: 'read_file' }
  ]);
  assert.deepEqual([...calls], [['call_a', 'call 1 (python)'], ['call/b', 'call 2 (read_file)']]);
  assert.equal(foundTitle({ text: '2.0', found: true, call_id: 'call/b', line: 'mean 2.0' }, calls), 'from call 2 (read_file): mean 2.0');
  assert.equal(foundTitle({ text: '2.0', found: true, call_id: 'gone' }, calls), 'from a tool call');
  assert.equal(callAnchor('call/b.1'), 'shiro-call-call_b_1');
});
