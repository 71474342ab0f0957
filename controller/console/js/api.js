// The REST API, as any client sees it: the token from sessionStorage as a bearer header (never
// in a URL or a cookie), JSON bodies, the API's error envelope turned into ApiError.
import { visible } from './visible.js';

const KEY = 'pvs.token';

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

export const token = {
  get: () => sessionStorage.getItem(KEY) || '',
  set: (t) => sessionStorage.setItem(KEY, t),
  clear: () => sessionStorage.removeItem(KEY),
};

let onUnauthorized = () => {};
export function setUnauthorizedHandler(fn) { onUnauthorized = fn; }

// api('GET', '/v1/sandboxes') -> parsed JSON (null for 204). opts: {json, body, headers,
// raw: true -> the Response, query: {k: v | [v...]}}.
export async function api(method, path, opts = {}) {
  const headers = { Authorization: `Bearer ${opts.token ?? token.get()}`, ...(opts.headers || {}) };
  let body = opts.body;
  if (opts.json !== undefined) {
    headers['Content-Type'] = 'application/json';
    body = JSON.stringify(opts.json);
  }
  let url = path;
  if (opts.query) {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(opts.query)) {
      for (const one of Array.isArray(v) ? v : [v]) if (one !== undefined && one !== '') q.append(k, one);
    }
    const s = q.toString();
    if (s) url += `?${s}`;
  }
  const resp = await fetch(url, { method, headers, body, credentials: 'omit', cache: 'no-store' });
  if (!resp.ok && resp.status !== 202) {
    let code = 'http_' + resp.status;
    let message = resp.statusText || `HTTP ${resp.status}`;
    try {
      const e = (await resp.json()).error;
      if (e) { code = e.code; message = e.message; }
    } catch { /* not JSON */ }
    if (resp.status === 401 && !opts.token) onUnauthorized();
    throw new ApiError(resp.status, code, message);
  }
  if (opts.raw) return resp;
  if (resp.status === 204) return null;
  const type = resp.headers.get('Content-Type') || '';
  return type.startsWith('application/json') ? resp.json() : resp.text();
}

export const sbPath = (id, rest = '') => `/v1/sandboxes/${encodeURIComponent(id)}${rest}`;

// A message for people: the API's message with its status and code.
export function describe(e) {
  if (e instanceof ApiError) return visible(`${e.message} (${e.status} ${e.code})`);
  return visible(e && e.message ? e.message : e);
}
