// SPDX-License-Identifier: MIT
// The operator's page of sluice-gateway: reads GET /v1/queues once, then GET /v1/events (one
// event a second with the same JSON), and draws a table of the queues and, for the queue
// clicked, its history chart, limits and partitions. Actions go to POST /v1/admin/... with the
// token typed in (kept in this tab's sessionStorage, never in a cookie; sent only in the
// Authorization header); the buttons are enabled when the gateway has actions on and a token
// is typed. Text is set with textContent, never parsed as HTML.
'use strict';

const SVG = 'http://www.w3.org/2000/svg';
const SERIES = [ // history columns drawn, with their colour
  ['depth', '#2f6fdb'], ['admitted', '#1a7f37'], ['rejected', '#b42318'],
  ['limited', '#b26b00'], ['acked', '#6e40c9'],
];
let last = null;
let selected = null;
let detail = null; // GET /v1/queues/{selected}: 5-minute history, consumers, dead letters
const TOKEN_KEY = 'sluice-admin-token'; // sessionStorage: this tab only, gone when it closes

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}

function fmt(v, digits) {
  if (v === null || v === undefined) return '–';
  if (typeof v !== 'number') return String(v);
  return digits === undefined ? String(v) : v.toFixed(digits);
}

function fmtWait(s) {
  if (s === null || s === undefined) return '∞';
  if (s < 1) return '<1 s';
  if (s < 120) return s.toFixed(0) + ' s';
  if (s < 7200) return (s / 60).toFixed(0) + ' min';
  return (s / 3600).toFixed(1) + ' h';
}

// A line chart of the given columns of history.points, scaled per series to its own maximum.
function chart(history, width, height, columns) {
  const svg = document.createElementNS(SVG, 'svg');
  svg.setAttribute('width', width);
  svg.setAttribute('height', height);
  svg.setAttribute('viewBox', '0 0 ' + width + ' ' + height);
  const pts = (history && history.points) || [];
  if (pts.length < 2) return svg;
  const cols = history.columns;
  const t0 = pts[0][0], t1 = pts[pts.length - 1][0];
  for (const [name, colour] of columns) {
    const i = cols.indexOf(name);
    if (i < 0) continue;
    let max = 0;
    for (const p of pts) if (p[i] !== null && p[i] > max) max = p[i];
    if (name === 'depth') {
      const ci = cols.indexOf('capacity');
      for (const p of pts) if (p[ci] > max) max = p[ci];
    }
    if (max <= 0) max = 1;
    let d = '';
    for (const p of pts) {
      if (p[i] === null) continue;
      const x = t1 > t0 ? ((p[0] - t0) / (t1 - t0)) * (width - 2) + 1 : 1;
      const y = height - 1 - (p[i] / max) * (height - 2);
      d += (d ? 'L' : 'M') + x.toFixed(1) + ' ' + y.toFixed(1);
    }
    const path = document.createElementNS(SVG, 'path');
    path.setAttribute('d', d);
    path.setAttribute('fill', 'none');
    path.setAttribute('stroke', colour);
    path.setAttribute('stroke-width', '1.5');
    path.setAttribute('data-series', name);
    svg.appendChild(path);
  }
  return svg;
}

function queueRow(q) {
  const tr = el('tr', null, 'q');
  tr.dataset.queue = q.queue;
  const name = el('td', q.queue, 'name');
  if (q.paused) name.appendChild(el('span', 'paused', 'badge paused'));
  tr.appendChild(name);
  if (!q.sampled) {
    const td = el('td', q.ready ? 'reading…' : 'redis unavailable', 'muted');
    td.colSpan = 12;
    tr.appendChild(td);
    return tr;
  }
  if (q.full) tr.classList.add('full');
  const depth = el('td', null, 'depth');
  const bar = el('span', null, 'bar');
  const fill = el('span');
  fill.style.width = Math.min(100, q.capacity > 0 ? (100 * q.depth) / q.capacity : 100) + '%';
  bar.appendChild(fill);
  depth.appendChild(bar);
  depth.appendChild(el('span', q.depth + ' / ' + q.capacity));
  tr.appendChild(depth);
  tr.appendChild(el('td', q.waiting, 'waiting'));
  tr.appendChild(el('td', q.in_flight, 'in-flight'));
  for (const k of ['admitted', 'rejected', 'limited', 'acked']) {
    tr.appendChild(el('td', fmt(q.rates[k], 1), 'rate-' + k));
  }
  tr.appendChild(el('td', fmt(q.drain_rate, 1), 'drain'));
  tr.appendChild(el('td', fmtWait(q.wait_s), 'wait'));
  tr.appendChild(el('td', q.consumers, 'consumers'));
  tr.appendChild(el('td', q.dead, 'dead'));
  const h = el('td', null, 'history');
  h.appendChild(chart(q.history, 160, 28, SERIES));
  tr.appendChild(h);
  tr.addEventListener('click', () => { selected = q.queue; loadDetail(); });
  return tr;
}

// A queue found by --discover: figures only (no rates: the gateway does not sample it).
function discoveredRow(q) {
  const tr = el('tr', null, 'discovered');
  const name = el('td', q.queue + ' (discovered)');
  if (q.paused) name.appendChild(el('span', 'paused', 'badge paused'));
  tr.appendChild(name);
  const cap = q.capacity === null ? '–' : q.capacity;
  for (const v of [q.depth + ' / ' + cap, q.waiting, q.in_flight, '–', '–', '–', '–', '–', '–',
    q.consumers, q.dead, '']) {
    tr.appendChild(el('td', v));
  }
  return tr;
}

function fillTable(id, rows) {
  const tbody = document.querySelector('#' + id + ' tbody');
  tbody.replaceChildren();
  for (const r of rows) {
    const tr = el('tr');
    for (const c of r) tr.appendChild(el('td', c));
    tbody.appendChild(tr);
  }
}

function renderDetail() {
  const section = document.getElementById('detail');
  const q = last && last.queues.find((x) => x.queue === selected);
  if (!q || !q.sampled) { section.hidden = true; return; }
  section.hidden = false;
  document.getElementById('detail-name').textContent = q.queue;
  const d = detail && detail.queue === q.queue ? detail : null;
  const box = document.getElementById('detail-chart');
  box.replaceChildren(chart(d ? d.history : q.history, 640, 160, SERIES));
  fillTable('detail-consumers', d ? d.consumer_list.map((c) =>
    [c.name, c.pending, fmtWait(c.idle_ms / 1000)]) : []);
  fillTable('detail-dead', d ? d.dead_latest.map((x) =>
    [x.dead_id, x.id, x.reason, x.consumer, x.deliveries].map((v) =>
      typeof v === 'object' ? JSON.stringify(v) : v)) : []);
  fillTable('detail-lanes', d && d.lanes.top ? d.lanes.top.map((l) =>
    [typeof l.tenant === 'string' ? l.tenant : JSON.stringify(l.tenant), l.depth, fmt(l.weight)]) : []);
  fillTable('detail-limits', q.limits.map((l) => [l.name, l.scope, l.spec, l.refused]));
  fillTable('detail-parts', q.by_partition.map((p, i) =>
    p.unavailable ? [i, p.unavailable, '', ''] : [i, p.depth, p.capacity, p.in_flight]));
  document.getElementById('detail-paused').hidden = !q.paused;
  const token = document.getElementById('token').value;
  for (const b of document.querySelectorAll('#admin button')) b.disabled = !last.admin || !token;
}

function render(data) {
  last = data;
  const tbody = document.querySelector('#queues tbody');
  tbody.replaceChildren(...data.queues.map(queueRow), ...(data.discovered || []).map(discoveredRow));
  renderDetail();
  document.getElementById('status').textContent =
    'live · ' + new Date().toLocaleTimeString() + (data.admin ? '' : ' · actions disabled');
}

async function loadDetail() {
  if (selected === null) return;
  try {
    const r = await fetch('/v1/queues/' + encodeURIComponent(selected), { cache: 'no-store' });
    if (r.ok) detail = await r.json();
  } catch (e) { /* the next tick tries again */ }
  renderDetail();
}

async function act(action, body) {
  const out = document.getElementById('admin-result');
  const token = document.getElementById('token').value;
  try {
    const r = await fetch('/v1/admin/queues/' + encodeURIComponent(selected) + '/' + action, {
      method: 'POST', credentials: 'omit', cache: 'no-store',
      headers: { 'Authorization': 'Bearer ' + token, 'Content-Type': 'application/json' },
      body: JSON.stringify(body || {}),
    });
    const j = await r.json().catch(() => ({}));
    out.textContent = r.status + ' ' + (j.error || 'ok');
  } catch (e) {
    out.textContent = 'failed: ' + e;
  }
}

function poll() {
  fetch('/v1/queues', { cache: 'no-store' }).then((r) => r.json()).then(render).catch(() => {
    document.getElementById('status').textContent = 'reconnecting…';
  });
}

// Live updates over GET /v1/events; with ?poll=1 in the address, short polling of
// GET /v1/queues once a second instead (for proxies that buffer event streams).
function start() {
  poll();
  if (new URLSearchParams(location.search).get('poll') === '1') {
    setInterval(poll, 1000);
  } else {
    const es = new EventSource('/v1/events');
    es.addEventListener('queues', (e) => render(JSON.parse(e.data)));
    es.onerror = () => { document.getElementById('status').textContent = 'reconnecting…'; };
  }
  const token = document.getElementById('token');
  token.value = sessionStorage.getItem(TOKEN_KEY) || '';
  token.addEventListener('input', () => {
    sessionStorage.setItem(TOKEN_KEY, token.value);
    if (last) renderDetail();
  });
  document.getElementById('admin').addEventListener('submit', (e) => {
    e.preventDefault();
    act('capacity', { capacity: Number(document.getElementById('capacity').value) });
  });
  setInterval(loadDetail, 2000);
  for (const b of document.querySelectorAll('#admin button[data-action]')) {
    b.addEventListener('click', () => {
      const a = b.dataset.action;
      if (a === 'clear') {
        if (window.confirm('Delete every waiting entry of ' + selected + '?')) {
          act(a, { confirm: true });
        }
      } else if (a.startsWith('dead/')) { // replay or delete: the dead letters listed
        if (detail && detail.dead_latest.length) {
          act(a, { ids: detail.dead_latest.map((x) => x.dead_id) });
        }
      } else {
        act(a);
      }
    });
  }
}

document.addEventListener('DOMContentLoaded', start);
