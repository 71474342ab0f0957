// Agent-controlled text (commands, labels, file names, audit values) made visible before it goes
// in as textContent: textContent stops markup, not bidi spoofing or hidden characters. C0 and C1
// controls, DEL, Unicode format characters (category Cf: bidi overrides and isolates, zero-width
// characters, the BOM, tags) and the line and paragraph separators become escapes such as \x1b,
// \n and \u202e, the same ones sandboxctl prints (pvs::terminal_safe, docs/console.md).
const HAZARD = /[\p{Cc}\p{Cf}\u2028\u2029]/gu;
const NAMED = { '\n': '\\n', '\r': '\\r', '\t': '\\t' };

const hex = (n, width) => n.toString(16).padStart(width, '0');

function escape(ch) {
  if (NAMED[ch]) return NAMED[ch];
  const c = ch.codePointAt(0);
  if (c < 0x80) return `\\x${hex(c, 2)}`;
  return c < 0x10000 ? `\\u${hex(c, 4)}` : `\\U${hex(c, 8)}`;
}

// `text` (any value; null and undefined are '') with its hazards as escapes; a lone surrogate
// (not text a person can read) as \uXXXX too.
export function visible(text) {
  if (text === undefined || text === null) return '';
  return String(text).replace(HAZARD, escape).replace(/\p{Cs}/gu, escape);
}
