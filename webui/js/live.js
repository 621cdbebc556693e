// The live feed: one EventSource on /api/events shared by every view (held by a worker), and
// the index store that refetches index.json when an event may have changed it.

import { api } from './api.js';
import { whenIdle } from './dom.js';
import { changesIndex } from './lib/events.js';
import { buildBoards, normaliseIndex } from './lib/model.js';
import { LOG_EVENT_TYPES } from './lib/vocab.js';

const FEED_LIMIT = 300;
const NAMED_TYPES = LOG_EVENT_TYPES; // the SSE `event:` names: one per event type of the log
const REPLAY = 200; // events of the past the feed starts with

function emitter() {
  const listeners = new Set();
  return {
    on(fn) {
      listeners.add(fn);
      return () => listeners.delete(fn);
    },
    emit(value) {
      for (const fn of [...listeners]) fn(value);
    },
  };
}

class LiveFeed {
  constructor() {
    this.state = 'idle';
    this.lastSeq = null;
    this.feed = [];
    this.messages = emitter();
    this.states = emitter();
    this.source = null;
  }

  /**
   * Open the feed. The stream replays from `?after=`, so it starts REPLAY events before the
   * log's end (from /api/health) to fill the feed without replaying the whole log; reconnects
   * resume with Last-Event-ID. The connection lives in a worker where there is one
   * (live-worker.js): the page then has no request that never ends.
   */
  async start(url = '/api/events') {
    if (this.source || (typeof EventSource === 'undefined' && typeof Worker === 'undefined')) return;
    this.source = 'starting';
    this.setState('connecting');
    let after = 0;
    try {
      const health = await api.health();
      after = Math.max(0, (health?.nats?.stream_seq ?? 0) - REPLAY);
    } catch {
      after = 0; // the log is unreachable: the stream says so by failing too
    }
    if (this.source !== 'starting') return; // stopped meanwhile
    this.source = openStream(`${url}?after=${after}`, {
      state: (readyState) => this.setState(readyState === 1 ? 'open' : readyState === 2 ? 'closed' : 'connecting'),
      message: (ev) => this.receive(ev),
    });
  }

  stop() {
    if (this.source && this.source !== 'starting') this.source.close();
    this.source = null;
    this.setState('idle');
  }

  setState(state) {
    if (state === this.state) return;
    const reconnected = state === 'open' && this.opened === true;
    if (state === 'open') this.opened = true;
    this.state = state;
    this.states.emit({ state, reconnected });
  }

  receive(ev) {
    let message;
    try {
      message = JSON.parse(ev.data);
    } catch {
      return; // a keep-alive or comment line: nothing to show
    }
    if (!message || typeof message !== 'object') return;
    if (message.seq === undefined && ev.lastEventId) message.seq = Number(ev.lastEventId);
    if (message.event === undefined) message = { seq: message.seq, event: message };
    if (message.seq !== null && message.seq !== undefined && this.lastSeq !== null && message.seq <= this.lastSeq) return;
    this.lastSeq = message.seq ?? this.lastSeq;
    this.feed.unshift(message);
    if (this.feed.length > FEED_LIMIT) this.feed.length = FEED_LIMIT;
    this.messages.emit(message);
  }
}

/**
 * An EventSource on `url`, in a worker when the browser has workers (else on the page):
 * `on.state(readyState)` on open and error, `on.message({data, lastEventId})` per message.
 * Returns {close()}.
 */
function openStream(url, on) {
  if (typeof Worker !== 'undefined') {
    try {
      const worker = new Worker(new URL('./live-worker.js', import.meta.url));
      worker.onmessage = ({ data }) => (data.kind === 'state' ? on.state(data.readyState) : on.message(data));
      worker.postMessage({ url: new URL(url, location.href).href, types: NAMED_TYPES });
      return { close: () => worker.terminate() };
    } catch {
      // no worker allowed here (a policy): the page holds the stream itself
    }
  }
  const source = new EventSource(url);
  source.onopen = () => on.state(source.readyState);
  source.onerror = () => on.state(source.readyState);
  source.onmessage = on.message;
  for (const type of NAMED_TYPES) source.addEventListener(type, on.message);
  return source;
}

export const live = new LiveFeed();

class IndexStore {
  constructor() {
    this.index = null;
    this.error = null;
    this.updates = emitter();
    this.inflight = null;
    this.again = false;
    this.timer = null;
  }

  /** Load (or reload) the live index; concurrent calls share one request. */
  async load() {
    if (this.inflight) {
      this.again = true;
      return this.inflight;
    }
    this.inflight = api
      .index(undefined)
      .then((raw) => {
        const previous = this.index;
        this.index = normaliseIndex(raw);
        this.error = null;
        this.updates.emit({ index: this.index, previous });
        buildWhenIdle(this.index, () => this.index);
      })
      .catch((error) => {
        this.error = error;
        this.updates.emit({ index: this.index, error });
      })
      .finally(() => {
        this.inflight = null;
        if (this.again) {
          this.again = false;
          this.load();
        }
      });
    return this.inflight;
  }

  /** Refetch shortly, unless the index has by then folded event `seq` already (a replay). */
  refreshSoon(delayMs = 250, seq = null) {
    this.pendingSeq = seq === null || this.pendingSeq === undefined ? seq : Math.max(this.pendingSeq ?? seq, seq);
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.settle(), delayMs);
  }

  async settle() {
    if (this.inflight) await this.inflight;
    const seq = this.pendingSeq;
    this.pendingSeq = undefined;
    if (this.index && Number.isFinite(seq) && seq <= this.index.logSeq) return;
    await this.load();
    // The API folds the log on its own: when its index is behind the event, ask again.
    if (this.index && Number.isFinite(seq) && seq > this.index.logSeq && (this.retries = (this.retries ?? 0) + 1) <= 20) this.refreshSoon(250, seq);
    else this.retries = 0;
  }
}

export const indexStore = new IndexStore();

/**
 * Build the boards no view has read yet, a few at a time while the page is idle, so that a
 * search, another page of boards or a kernel page finds them ready. Stops when `current()`
 * is no longer this index (a newer one arrived).
 */
function buildWhenIdle(index, current) {
  whenIdle(function step(deadline) {
    if (current() === index && !buildBoards(index, () => deadline.timeRemaining() > 2)) whenIdle(step);
  });
}

const pastCache = new Map();

/** The index as it stood at log sequence `at` (cached: the past does not change). */
export async function indexAt(at) {
  if (!pastCache.has(at)) {
    pastCache.set(at, api.index(at).then(normaliseIndex));
    pastCache.get(at).catch(() => pastCache.delete(at));
  }
  return pastCache.get(at);
}

live.messages.on((message) => {
  if (changesIndex(message)) indexStore.refreshSoon(250, message.seq);
});
live.states.on(({ reconnected }) => {
  if (reconnected) indexStore.refreshSoon(0);
});

