/**
 * What the model's Markdown may keep once JupyterLab's sanitizer has run on it. The sanitizer drops
 * script, event handlers and most script URLs, but checks the scheme of `href` and `cite` only (not `src`,
 * `xlink:href`, `formaction`...), and keeps JupyterLab's command links (`data-commandlinker-command`:
 * a button that runs any JupyterLab command when clicked). So after it, every element the model's text
 * produced loses: URL attributes whose scheme is not a plain one, any attribute holding a script URL,
 * handlers, `srcdoc`, command links; and elements that load or run something of their own are removed.
 *
 * The pure functions need no DOM (node's test runner checks them); `neutralise` walks a rendered node.
 */

/** Attributes that hold a URL a click, a load or a form submission follows. */
export const URL_ATTRIBUTES = new Set([
  'href',
  'src',
  'xlink:href',
  'action',
  'formaction',
  'data',
  'poster',
  'background',
  'cite',
  'longdesc',
  'lowsrc',
  'dynsrc',
  'ping',
  'codebase',
  'manifest',
  'icon',
  'profile',
  'archive',
  'classid',
  'srcset',
  'imagesrcset'
]);

/** Elements removed whole: they run, embed or load another document, or change how URLs resolve. */
export const DROPPED_ELEMENTS = new Set([
  'script',
  'iframe',
  'frame',
  'frameset',
  'object',
  'embed',
  'applet',
  'base',
  'meta',
  'link',
  'portal',
  'animate',
  'set',
  'animatemotion',
  'animatetransform',
  'handler',
  'listener'
]);

const DROPPED_ATTRIBUTES = new Set(['srcdoc', 'data-commandlinker-command', 'data-commandlinker-args']);

/** Schemes a link or an image of the model's text may use; anything else is dropped. */
const PLAIN_SCHEMES = new Set(['http', 'https', 'mailto', 'ftp', 'tel']);
const IMAGE_DATA = /^data:image\/(png|gif|jpeg|webp)[;,]/;

/** A URL as the browser reads it: C0 controls and spaces around it gone, tabs and line breaks inside it
 * ignored (so `java\tscript:` is `javascript:`), case folded. */
export function normaliseUrl(value: string): string {
  // eslint-disable-next-line no-control-regex
  return value.replace(/^[\u0000-\u0020]+|[\u0000-\u0020]+$/g, '').replace(/[\t\n\r]/g, '').toLowerCase();
}

/** The URL's scheme (`javascript`), or '' for a relative URL. */
export function scheme(value: string): string {
  const match = /^([a-z][a-z0-9+.-]*):/.exec(normaliseUrl(value));
  return match ? match[1] : '';
}

/** Does following (or loading) this URL run script or open a document of its own making? */
export function isScriptUrl(value: string): boolean {
  const url = normaliseUrl(value);
  const s = scheme(url);
  if (s === 'data') {
    return !IMAGE_DATA.test(url);
  }
  return s !== '' && !PLAIN_SCHEMES.has(s);
}

/** Should this attribute go, on an element of the model's rendered text? */
export function dropAttribute(name: string, value: string): boolean {
  const n = name.toLowerCase();
  if (n.startsWith('on') || DROPPED_ATTRIBUTES.has(n)) {
    return true;
  }
  if (URL_ATTRIBUTES.has(n) || n.endsWith(':href')) {
    // a srcset is a list: any of its URLs decides
    const urls = n.endsWith('srcset') ? value.split(',').map(part => part.trim().split(/\s+/)[0] ?? '') : [value];
    return urls.some(isScriptUrl);
  }
  // any other attribute holding a script URL (SVG's `to`/`values`, `formaction` spelled oddly...)
  return /^(javascript|vbscript|livescript|mocha|data:text\/html)/.test(normaliseUrl(value).replace(/\s/g, ''));
}

export function dropElement(tag: string): boolean {
  return DROPPED_ELEMENTS.has(tag.toLowerCase());
}

/** Make what `root` holds inert, in place; returns how many elements and attributes were removed. */
export function neutralise(root: Element): number {
  let removed = 0;
  for (const el of Array.from(root.querySelectorAll('*'))) {
    if (dropElement(el.localName)) {
      el.remove();
      removed++;
      continue;
    }
    for (const attr of Array.from(el.attributes)) {
      if (dropAttribute(attr.name, attr.value)) {
        el.removeAttribute(attr.name);
        removed++;
      }
    }
  }
  return removed;
}
