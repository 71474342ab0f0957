// Loads the vendored xterm.js (vendor/xterm/, pinned; scripts/update-xterm) on first use, and
// makes it live within the console's Content-Security-Policy (style-src 'self', no inline
// styles): xterm 5's DOM renderer writes its theme and cell sizes as the text of <style>
// elements and truecolor cells as style attributes, both of which the CSP refuses. Here the
// <style> elements it creates while opening become constructed stylesheets
// (document.adoptedStyleSheets) and style attributes go through the CSSOM (element.style),
// neither of which is inline markup.
let loading = null;

function script(src) {
  return new Promise((resolve, reject) => {
    const s = document.createElement('script');
    s.src = src;
    s.onload = resolve;
    s.onerror = () => reject(new Error(`cannot load ${src}`));
    document.head.append(s);
  });
}

function stylesheet(href) {
  if (document.querySelector(`link[href="${href}"]`)) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const l = document.createElement('link');
    l.rel = 'stylesheet';
    l.href = href;
    l.onload = resolve;
    l.onerror = () => reject(new Error(`cannot load ${href}`));
    document.head.append(l);
  });
}

// A stand-in for a <style> element: its text goes into a constructed stylesheet.
function constructedStyle(doc, create) {
  const el = create.call(doc, 'xterm-style');
  const sheet = new CSSStyleSheet();
  doc.adoptedStyleSheets = [...doc.adoptedStyleSheets, sheet];
  let text = '';
  Object.defineProperty(el, 'textContent', {
    get: () => text,
    set: (t) => { text = String(t); sheet.replaceSync(text); },
  });
  const remove = el.remove.bind(el);
  el.remove = () => {
    doc.adoptedStyleSheets = doc.adoptedStyleSheets.filter((s) => s !== sheet);
    remove();
  };
  return el;
}

let patched = false;
function patchStyleAttributes() {
  if (patched) return;
  patched = true;
  const setAttribute = Element.prototype.setAttribute;
  Element.prototype.setAttribute = function (name, value) {
    if (String(name).toLowerCase() === 'style' && this.style) {
      this.style.cssText = String(value);
      return;
    }
    return setAttribute.call(this, name, value);
  };
}

export function loadXterm() {
  loading ??= (async () => {
    await Promise.all([stylesheet('vendor/xterm/xterm.css'), script('vendor/xterm/xterm.js')]);
    await script('vendor/xterm/addon-fit.js');
    patchStyleAttributes();
    return { Terminal: window.Terminal, FitAddon: window.FitAddon.FitAddon };
  })();
  return loading;
}

// term.open(parent) with its <style> elements turned into constructed stylesheets.
export function openTerminal(term, parent) {
  const doc = parent.ownerDocument;
  const create = doc.createElement;
  doc.createElement = function (tag, options) {
    if (String(tag).toLowerCase() === 'style') return constructedStyle(doc, create);
    return create.call(this, tag, options);
  };
  try {
    term.open(parent);
  } finally {
    delete doc.createElement;  // back to Document.prototype.createElement
  }
}
