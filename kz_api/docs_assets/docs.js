// The API documentation page (/schema): reads the OpenAPI document and writes the page.
// Inlined into it by kz_api/docs_page.py; everything shown is set as text, never as HTML.
const el = (tag, props = {}, ...kids) => {
  const node = Object.assign(document.createElement(tag), props);
  for (const kid of kids.flat()) if (kid !== null && kid !== undefined) node.append(kid);
  return node;
};
const ref = (s) => (s && s.$ref ? s.$ref.split('/').pop() : null);
function typeOf(s) {
  if (!s) return '';
  if (s.$ref) return ref(s);
  if (s.oneOf || s.anyOf) return (s.oneOf || s.anyOf).map(typeOf).join(' | ');
  if (s.type === 'array') return `${typeOf(s.items)}[]`;
  if (s.enum) return s.enum.map((v) => JSON.stringify(v)).join(' | ');
  return s.type || 'object';
}
function schemaLink(s) {
  const name = ref(s) || ref(s?.items);
  return name ? el('a', { href: `#schema-${name}`, textContent: typeOf(s) }) : el('code', { textContent: typeOf(s) });
}
function operation(path, method, op) {
  const params = op.parameters || [];
  const body = op.requestBody?.content || {};
  const answers = Object.entries(op.responses || {});
  return el('details', { className: 'op', id: op.operationId || `${method}-${path}` },
    el('summary', {}, el('span', { className: `method ${method}`, textContent: method }),
      el('span', { className: 'path', textContent: path }), el('span', { className: 'muted', textContent: op.summary || '' })),
    el('div', {},
      op.description ? el('p', { textContent: op.description }) : null,
      params.length ? el('table', {}, el('tr', {}, ...['parameter', 'in', 'type', 'required', 'description'].map((t) => el('th', { textContent: t }))),
        ...params.map((p) => el('tr', {}, el('td', {}, el('code', { textContent: p.name })), el('td', { textContent: p.in }),
          el('td', {}, schemaLink(p.schema)), el('td', { textContent: p.required ? 'yes' : '' }), el('td', { textContent: p.description || p.schema?.description || '' })))) : null,
      ...Object.entries(body).map(([type, media]) => el('p', {}, 'body ', el('code', { textContent: type }), ': ', schemaLink(media.schema))),
      el('table', {}, el('tr', {}, el('th', { textContent: 'answer' }), el('th', { textContent: 'description' }), el('th', { textContent: 'body' })),
        ...answers.map(([code, a]) => el('tr', {}, el('td', { textContent: code }), el('td', { textContent: a.description || '' }),
          el('td', {}, ...Object.values(a.content || {}).map((m) => schemaLink(m.schema))))))));
}
function schema(name, s) {
  const props = Object.entries(s.properties || {});
  const required = new Set(s.required || []);
  return el('details', { className: 'op', id: `schema-${name}` }, el('summary', {}, el('span', { className: 'path', textContent: name }),
      el('span', { className: 'muted', textContent: s.description || '' })),
    el('div', {}, props.length ? el('table', {}, el('tr', {}, ...['field', 'type', 'required', 'description'].map((t) => el('th', { textContent: t }))),
      ...props.map(([field, p]) => el('tr', {}, el('td', {}, el('code', { textContent: field })), el('td', {}, schemaLink(p)),
        el('td', { textContent: required.has(field) ? 'yes' : '' }), el('td', { textContent: p.description || '' }))))
      : el('pre', { textContent: JSON.stringify(s, null, 1) })));
}
async function main() {
  const root = document.getElementById('docs');
  try {
    const response = await fetch(root.dataset.schema, { headers: { Accept: 'application/json' } });
    if (!response.ok) throw new Error(`${response.status} from ${root.dataset.schema}`);
    const doc = await response.json();
    const byTag = new Map();
    for (const [path, item] of Object.entries(doc.paths || {})) {
      for (const [method, op] of Object.entries(item)) {
        if (typeof op !== 'object' || !op.responses) continue;
        const tag = (op.tags || ['other'])[0];
        if (!byTag.has(tag)) byTag.set(tag, []);
        byTag.get(tag).push(operation(path, method, op));
      }
    }
    const schemas = Object.entries(doc.components?.schemas || {}).sort(([a], [b]) => (a < b ? -1 : 1));
    root.replaceChildren(
      el('h1', { textContent: doc.info?.title || 'API' }),
      el('p', { className: 'muted' }, `version ${doc.info?.version || '?'} · OpenAPI ${doc.openapi || ''} · `, el('a', { href: root.dataset.schema, textContent: 'openapi.json' })),
      el('nav', { id: 'toc' }, ...[...byTag.keys()].map((t) => el('a', { href: `#tag-${t}`, textContent: t })), el('a', { href: '#schemas', textContent: 'schemas' })),
      ...[...byTag].flatMap(([tag, ops]) => [el('h2', { id: `tag-${tag}`, textContent: tag }), ...ops]),
      el('h2', { id: 'schemas', textContent: `schemas (${schemas.length})` }), ...schemas.map(([n, s]) => schema(n, s)),
    );
    const target = location.hash && document.getElementById(location.hash.slice(1));
    if (target) { if (target.tagName === 'DETAILS') target.open = true; target.scrollIntoView(); }
  } catch (error) {
    root.replaceChildren(el('p', { textContent: `Could not read the OpenAPI document: ${error.message}` }));
  }
}
main();
