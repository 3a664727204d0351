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

/*
 * Nothing of the model's text is fetched without a click (issue 33): an image, a video's poster, a CSS
 * background would load as the text is drawn, live and on every reopening, taking whatever the model put in
 * its URL (a file's or a DataFrame's contents) to that server. So before the rendered HTML is put in the
 * page (`inertHtml`, through `inertSanitizer`), in a document that loads nothing: an image becomes a link to
 * it (`image: <alt>`), which the user may follow; audio and video likewise; every other attribute that
 * loads something and every `style` go. An inline `data:` image loads nothing and still draws (Mermaid's
 * diagrams are such images). What the user's approved code displayed is not drawn through here.
 *
 * And nothing of the model's text may pass for shiro's own marks: the classes shiro gives the numbers it
 * checked (`shiro-number`...) are dropped from it, and with them every `title` but that of a link leading out
 * of the page (a titled `<abbr>` draws the same dotted underline as a found number, with its hover), and
 * every link to shiro's own anchors (`#shiro-call-...`, where a found number leads).
 */

/** What an image of the model's text becomes, before its alt text: the same words as the kernel's. */
export const IMAGE_LINK = 'image: ';

/** Elements that fetch what they show as they are drawn: each becomes a link to it. */
export const FETCHING_ELEMENTS = new Set(['img', 'video', 'audio', 'image']);

/** Elements that only feed one of those, removed whole. */
const FEEDING_ELEMENTS = new Set(['source', 'track', 'noscript']);

/** Attributes that load something as the element is drawn. */
export const LOADING_ATTRIBUTES = new Set([
  'src',
  'srcset',
  'poster',
  'background',
  'lowsrc',
  'dynsrc',
  'imagesrcset',
  'style'
]);

/** Class names of shiro's own marks: the model's text may not wear them. */
export const OWN_CLASS = /^shiro-/i;

/** May an element of the model's text keep this URL as what it draws? Only inline image data, which
 * loads nothing. */
export function drawsInline(url: string): boolean {
  return IMAGE_INLINE.test(normaliseUrl(url));
}
const IMAGE_INLINE = /^data:image\/[a-z0-9.+-]+[;,]/;

/** The class attribute without shiro's own names ('' when none is left). */
export function modelClasses(value: string): string {
  return value
    .split(/\s+/)
    .filter(name => name && !OWN_CLASS.test(name))
    .join(' ');
}

/** Should this attribute of an element of the model's text go before it is drawn? */
export function dropBeforeDrawing(tag: string, name: string): boolean {
  const n = name.toLowerCase();
  return LOADING_ATTRIBUTES.has(n) || n === 'hidden' || (n === 'title' && tag.toLowerCase() !== 'a');
}

/** The text of the link an image (or video, audio) of the model's text becomes. */
export function imageLinkText(alt: string | null, url: string | null, tag: string): string {
  const label = (alt ?? '').trim();
  return tag === 'img' || tag === 'image' ? IMAGE_LINK + label : `${tag}: ${label || url || ''}`;
}

/** Does this link of the model's text point into the page (a fragment), or at one of shiro's own anchors? */
export function linkInPage(href: string | null): 'shiro' | 'page' | '' {
  const url = normaliseUrl(href ?? '');
  return url.startsWith('#shiro-') ? 'shiro' : url.startsWith('#') ? 'page' : '';
}

/** A link of the model's text keeps its title only when it leads out of the page (a found number's mark is
 * a link into it, titled with where the number was found), and never leads to a tool row of shiro's. */
function ownAnchor(el: Element): void {
  const inPage = linkInPage(el.getAttribute('href'));
  if (inPage) {
    el.removeAttribute('title');
  }
  if (inPage === 'shiro') {
    el.removeAttribute('href');
  }
}

/** The element's URL that it would fetch to draw itself (an image's src, a video's src or poster...). */
function fetchedUrl(el: Element): string | null {
  const source = el.querySelector('source[src]');
  return (
    el.getAttribute('src') ??
    el.getAttribute('href') ??
    el.getAttribute('xlink:href') ??
    source?.getAttribute('src') ??
    el.getAttribute('poster')
  );
}

/** `root`'s images, media and loading attributes made inert, in place (see above). */
export function inertElement(root: Element): void {
  const doc = root.ownerDocument;
  for (const el of Array.from(root.querySelectorAll('*'))) {
    const tag = el.localName.toLowerCase();
    if (!root.contains(el)) {
      continue; // inside an element already replaced
    }
    if (FEEDING_ELEMENTS.has(tag)) {
      el.remove();
      continue;
    }
    const url = fetchedUrl(el);
    const inputImage = tag === 'input' && (el.getAttribute('type') ?? '').toLowerCase() === 'image';
    const inline = tag === 'img' && url !== null && drawsInline(url) && !el.hasAttribute('srcset');
    if ((FETCHING_ELEMENTS.has(tag) || inputImage) && !inline) {
      const link = doc.createElement('a');
      if (url && !isScriptUrl(url)) {
        link.setAttribute('href', url);
      }
      link.className = 'shiro-image-link';
      link.textContent = imageLinkText(el.getAttribute('alt'), url, inputImage ? 'img' : tag);
      el.replaceWith(link);
      continue;
    }
    if (tag === 'a') {
      ownAnchor(el);
    }
    for (const attr of Array.from(el.attributes)) {
      if (dropBeforeDrawing(tag, attr.name) && !(tag === 'img' && attr.name === 'src')) {
        el.removeAttribute(attr.name);
      } else if (attr.name === 'class') {
        const kept = modelClasses(attr.value);
        if (kept) {
          el.setAttribute('class', kept);
        } else {
          el.removeAttribute('class');
        }
      }
    }
  }
}

/** HTML of the model's text made inert before it is drawn: parsed in a document that loads and runs
 * nothing, then `neutralise` and `inertElement`. */
export function inertHtml(html: string): string {
  const doc = new DOMParser().parseFromString(`<!DOCTYPE html><body>${html}`, 'text/html');
  neutralise(doc.body);
  inertElement(doc.body);
  return doc.body.innerHTML;
}

/** `inner` (JupyterLab's sanitizer), its output then made inert (`inertHtml`) before it is drawn. */
export function inertSanitizer<T extends { sanitize(dirty: string, options?: any): string }>(inner: T): T {
  const wrapped = Object.create(inner) as T;
  wrapped.sanitize = (dirty: string, options?: any): string => inertHtml(inner.sanitize(dirty, options));
  return wrapped;
}
