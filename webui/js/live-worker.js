// The live feed's connection, off the page: a dedicated worker holds the EventSource on
// /api/events and hands each message to the page. The page's own requests all end, so a
// headless capture (chromium --virtual-time-budget, which waits while the document has a
// request open) settles on the rendered data instead of waiting on a stream that never ends.

let source = null;

function state() {
  postMessage({ kind: 'state', readyState: source.readyState });
}

function forward(ev) {
  postMessage({ kind: 'message', type: ev.type, data: ev.data, lastEventId: ev.lastEventId });
}

onmessage = (ev) => {
  const { url, types } = ev.data ?? {};
  if (source || typeof url !== 'string') return;
  source = new EventSource(url);
  source.onopen = state;
  source.onerror = state;
  source.onmessage = forward;
  for (const type of types ?? []) source.addEventListener(type, forward);
};
