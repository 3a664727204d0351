// Unit tests for what the model's rendered Markdown may keep (src/sanitize.ts), on the compiled lib/.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import {
  dropAttribute,
  dropBeforeDrawing,
  dropElement,
  drawsInline,
  imageLinkText,
  linkInPage,
  isScriptUrl,
  modelClasses,
  normaliseUrl,
  scheme
} from '../lib/sanitize.js';

test('script URLs, however they are spelled', () => {
  for (const url of [
    'javascript:alert(1)',
    'JaVaScRiPt:alert(1)',
    '  javascript:alert(1)',
    '\u0001javascript:alert(1)',
    'java\tscript:alert(1)',
    'java\nscript:alert(1)',
    'vbscript:msgbox(1)',
    'livescript:x',
    'data:text/html,<script>alert(1)</script>',
    'data:text/html;base64,PHNjcmlwdD4=',
    'DATA:image/svg+xml,<svg onload=alert(1)>',
    'data:application/xhtml+xml,x',
    'file:///etc/passwd',
    'blob:http://x/1'
  ]) {
    assert.ok(isScriptUrl(url), url);
  }
});

test('plain links and images are kept', () => {
  for (const url of [
    'https://example.com/a?b=javascript:c',
    'http://x',
    'mailto:a@b.c',
    'tel:+123',
    'ftp://x/y',
    '#section',
    '/files/x.png',
    'x.png',
    './a/b:c',
    'data:image/png;base64,iVBOR',
    'data:image/jpeg;base64,/9j/'
  ]) {
    assert.ok(!isScriptUrl(url), url);
  }
  assert.equal(scheme('  HTTPS://x'), 'https');
  assert.equal(scheme('relative/path'), '');
  assert.equal(normaliseUrl(' Java\tScript:x '), 'javascript:x');
});

test('attributes dropped from the model text', () => {
  assert.ok(dropAttribute('onerror', 'x'));
  assert.ok(dropAttribute('ONLOAD', 'x'));
  assert.ok(dropAttribute('srcdoc', '<p>'));
  assert.ok(dropAttribute('data-commandlinker-command', 'help:about'));
  assert.ok(dropAttribute('data-commandlinker-args', '{}'));
  assert.ok(dropAttribute('href', 'javascript:x'));
  assert.ok(dropAttribute('src', 'javascript:x'));
  assert.ok(dropAttribute('xlink:href', 'javascript:x'));
  assert.ok(dropAttribute('formaction', 'javascript:x'));
  assert.ok(dropAttribute('srcset', 'a.png 1x, javascript:x 2x'));
  assert.ok(dropAttribute('to', ' javascript:alert(1)'));
  assert.ok(!dropAttribute('href', 'https://example.com'));
  assert.ok(!dropAttribute('src', 'data:image/png;base64,iVBOR'));
  assert.ok(!dropAttribute('class', 'language-python'));
  assert.ok(!dropAttribute('title', 'a tutorial'));
  assert.ok(!dropAttribute('srcset', 'a.png 1x, b.png 2x'));
});

test('elements removed whole', () => {
  for (const tag of ['script', 'IFRAME', 'object', 'embed', 'base', 'meta', 'link', 'animate', 'set']) {
    assert.ok(dropElement(tag), tag);
  }
  for (const tag of ['a', 'img', 'p', 'table', 'code', 'pre', 'svg', 'details']) {
    assert.ok(!dropElement(tag), tag);
  }
});

test('only inline image data draws; every other image of the model text is a link to it', () => {
  for (const url of ['data:image/png;base64,iVBOR', ' DATA:image/svg+xml,%3Csvg%3E', 'data:image/webp;base64,x']) {
    assert.ok(drawsInline(url), url);
  }
  for (const url of ['https://evil.example/x.png?q=secret', '//evil.example/x.png', 'x.png', '/files/x.png', 'data:text/html,x', '']) {
    assert.ok(!drawsInline(url), url);
  }
  assert.equal(imageLinkText('chart', 'https://e/x.png', 'img'), 'image: chart');
  assert.equal(imageLinkText(null, 'https://e/x.png', 'img'), 'image: ');
  assert.equal(imageLinkText('', 'https://e/v.mp4', 'video'), 'video: https://e/v.mp4');
});

test("before drawing: what loads, styles, titles but a link's, hidden; shiro's classes", () => {
  for (const [tag, name] of [['img', 'src'], ['img', 'srcset'], ['video', 'poster'], ['input', 'src'], ['td', 'background'],
    ['p', 'style'], ['span', 'title'], ['abbr', 'title'], ['span', 'hidden'], ['source', 'SRCSET']]) {
    assert.ok(dropBeforeDrawing(tag, name), `${tag} ${name}`);
  }
  for (const [tag, name] of [['a', 'title'], ['a', 'href'], ['code', 'class'], ['td', 'align']]) {
    assert.ok(!dropBeforeDrawing(tag, name), `${tag} ${name}`);
  }
  assert.equal(modelClasses('shiro-number'), '');
  assert.equal(modelClasses(' SHIRO-number-missing  language-python shiro-x'), 'language-python');
  assert.equal(modelClasses('cm-keyword'), 'cm-keyword');
  assert.equal(linkInPage('#shiro-call-call_1'), 'shiro');
  assert.equal(linkInPage(' #SHIRO-call-x'), 'shiro');
  assert.equal(linkInPage('#section'), 'page');
  assert.equal(linkInPage('https://example.com/#shiro-call-x'), '');
  assert.equal(linkInPage(null), '');
});
