// A small fetch wrapper: JSON in, ApiError (from the error envelope) out.

const SUBMITTER_KEY = 'kz.submitterId';

/** An API failure: HTTP status plus the envelope's code, message and details. */
export class ApiError extends Error {
  constructor({ status = 0, code = 'network_error', message, details = {}, url = '' }) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.code = code;
    this.details = details;
    this.url = url;
  }
}

/** Build an ApiError from a non-2xx response, reading the envelope when there is one. */
export async function errorFrom(response, url) {
  let body = null;
  try {
    body = await response.json();
  } catch {
    body = null;
  }
  const env = body?.error;
  return new ApiError({
    status: response.status,
    code: env?.code ?? `http_${response.status}`,
    message: env?.message ?? `${response.status} ${response.statusText || 'error'} from ${url}`,
    details: env?.details ?? {},
    url,
  });
}

function withQuery(path, query) {
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(query ?? {})) {
    if (value !== undefined && value !== null && value !== '') params.set(key, String(value));
  }
  const qs = params.toString();
  return qs ? `${path}?${qs}` : path;
}

async function request(path, { query, signal, headers = {}, as = 'json', cache = 'default', early = null } = {}) {
  const url = withQuery(path, query);
  let response;
  try {
    response = await (early ?? fetch(url, { signal, cache, headers: { Accept: as === 'json' ? 'application/json' : '*/*', ...headers } }));
  } catch (exc) {
    if (exc?.name === 'AbortError') throw exc;
    throw new ApiError({ message: `Could not reach the API (${url}): ${exc?.message ?? exc}.`, url });
  }
  if (!response.ok) throw await errorFrom(response, url);
  if (response.status === 204) return null;
  return as === 'json' ? response.json() : response.text();
}

/** The index request index.html started before the modules loaded, once. */
function takeEarlyIndex() {
  const early = globalThis.kzIndexRequest ?? null;
  if (early) globalThis.kzIndexRequest = null;
  return early;
}

/** The submitter id the page sends where the API asks for one (open mode). */
export function submitterId() {
  try {
    return localStorage.getItem(SUBMITTER_KEY) || 'webui';
  } catch {
    return 'webui';
  }
}

export function kernelPath(id) {
  return String(id).split('/').map(encodeURIComponent).join('/');
}

/** The endpoints the UI reads. Every function takes an optional AbortSignal. */
export const api = {
  index: (at, signal) => request('/api/index.json', { query: { at }, signal, cache: at ? 'default' : 'no-cache', early: at ? null : takeEarlyIndex() }),
  kernel: (id, signal) => request(`/api/kernels/${kernelPath(id)}`, { signal }),
  benchHistory: (id, signal) => request(`/api/kernels/${kernelPath(id)}/bench-history`, { signal }),
  submissions: (query, signal) => request('/api/submissions', { query, signal }),
  submission: (id, signal) => request(`/api/submissions/${encodeURIComponent(id)}`, { signal }),
  submissionStatus: (id, since, timeout, signal) =>
    request(`/api/submissions/${encodeURIComponent(id)}/status`, {
      query: { since, timeout },
      signal,
      headers: { 'X-Submitter-Id': submitterId() },
    }),
  commit: (id, signal) => request(`/api/commits/${encodeURIComponent(id)}`, { signal }),
  logs: (url, signal) => request(url, { signal, as: 'text' }),
  runners: (signal) => request('/api/runners', { signal }),
  health: (signal) => request('/api/health', { signal, cache: 'no-store' }),
  text: (url, signal) => request(url, { signal, as: 'text' }),
};

/** A list response that may be a bare array or {key: [...]} into an array. */
export function listOf(body, key) {
  if (Array.isArray(body)) return body;
  if (body && Array.isArray(body[key])) return body[key];
  if (body && Array.isArray(body.items)) return body.items;
  return [];
}
