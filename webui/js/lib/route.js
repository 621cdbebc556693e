// Pure hash routing: parse "#/board/sm90/GEMM/dense/fp8?q=x&at=12" into a route and back.

export const VIEWS = ['boards', 'board', 'kernel', 'submission', 'commit', 'activity'];

const SEGMENTS = { board: 4, kernel: 5, submission: 1, commit: 1 };

function decode(part) {
  try {
    return decodeURIComponent(part);
  } catch {
    return part;
  }
}

/** Parse a location hash into {view, params, query}; unknown paths give view "notfound". */
export function parseHash(hash) {
  const text = String(hash ?? '').replace(/^#/, '');
  const [pathPart, queryPart = ''] = text.split('?', 2);
  const query = {};
  for (const [key, value] of new URLSearchParams(queryPart)) query[key] = value;
  const segments = pathPart.split('/').filter((s) => s !== '').map(decode);
  if (segments.length === 0) return { view: 'boards', params: {}, query };
  const [head, ...rest] = segments;
  if (head === 'activity' && rest.length === 0) return { view: 'activity', params: {}, query };
  if (head === 'boards' && rest.length === 0) return { view: 'boards', params: {}, query };
  // A kernel id may arrive as one %2F-encoded segment.
  const parts = rest.length === 1 && head !== 'submission' && head !== 'commit' ? rest[0].split('/') : rest;
  if (SEGMENTS[head] !== undefined && parts.length === SEGMENTS[head]) {
    return { view: head, params: paramsFor(head, parts), query };
  }
  return { view: 'notfound', params: { path: pathPart }, query };
}

function paramsFor(view, parts) {
  if (view === 'board') {
    const [arch, op_class, sub_class, quant] = parts;
    return { arch, op_class, sub_class, quant, group: parts.join('/') };
  }
  if (view === 'kernel') return { id: parts.join('/') };
  return { id: parts[0] };
}

function encodePath(text) {
  return String(text).split('/').map(encodeURIComponent).join('/');
}

/** Format a route back into a hash; empty query values are dropped, keys sorted. */
export function formatHash(view, params = {}, query = {}) {
  let path;
  if (view === 'board') {
    const group = params.group ?? [params.arch, params.op_class, params.sub_class, params.quant].join('/');
    path = `/board/${encodePath(group)}`;
  } else if (view === 'kernel') path = `/kernel/${encodePath(params.id)}`;
  else if (view === 'submission') path = `/submission/${encodeURIComponent(params.id)}`;
  else if (view === 'commit') path = `/commit/${encodeURIComponent(params.id)}`;
  else if (view === 'activity') path = '/activity';
  else path = '/';
  const search = new URLSearchParams();
  for (const key of Object.keys(query).sort()) {
    const value = query[key];
    if (value !== undefined && value !== null && value !== '') search.set(key, String(value));
  }
  const qs = search.toString();
  return `#${path}${qs ? `?${qs}` : ''}`;
}

/** Shorthands used by views for links. */
export const links = {
  boards: (query = {}) => formatHash('boards', {}, query),
  board: (group, query = {}) => formatHash('board', { group }, query),
  kernel: (id) => formatHash('kernel', { id }),
  submission: (id) => formatHash('submission', { id }),
  commit: (id) => formatHash('commit', { id }),
  activity: () => formatHash('activity'),
};
