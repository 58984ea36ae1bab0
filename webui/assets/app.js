// hotsplit key visualizer: load over key space (y) × time (x) from
// /api/v1/heatmap, with every split and merge, polled at least once per
// step. Hand-written, no framework, no network but this node's own API.
//
// Key bytes come from reporters, the least-trusted role: the API sends them
// escaped (printable ASCII) and this page puts them on screen only through
// textContent and canvas text, never as HTML.
//
// For browser tests: window.hotsplitView holds what was painted last (plot
// rectangle, cells with their bands' pixel rows, marks, routes) in CSS
// pixels of the canvas, and when (paintedAtMs, from navigation); the
// canvas's data-paints counts the paints.
'use strict';

(function () {
  const $ = (id) => document.getElementById(id);
  const canvas = $('heatmap');
  const ctx = canvas.getContext('2d');
  const tooltip = $('tooltip');
  const MARGIN = { left: 170, right: 12, top: 8, bottom: 26 };
  // Poll every step, but not more often than this nor less often than that.
  const MIN_POLL_MS = 200;
  const MAX_POLL_MS = 5000;
  const PLOT_BG = '#111118';
  const PAGE_BG = '#0d0d12';
  // Mark colours by kind and origin (every SplitOrigin and both merge
  // origins).
  const MARK_COLOURS = {
    'split:ISOLATION_COMPOUND': '#ff4081',
    'split:ISOLATION_SINGLE_LOWER_EDGE': '#ffab40',
    'split:ISOLATION_SINGLE_UPPER_EDGE': '#ffd740',
    'split:BALANCE': '#4fc3f7',
    'split:SUB_BUCKET_MEDIAN': '#69f0ae',
    'split:MANUAL': '#ffffff',
    'split:UNSPECIFIED': '#b0bec5',
    'merge:AUTOMATIC': '#7c4dff',
    'merge:MANUAL': '#b388ff',
  };
  const OTHER_MARK = '#e0e0e0';
  // Colour ramp of the log scale: low to high.
  const RAMP = [
    [0.0, [22, 33, 62]],
    [0.35, [15, 124, 140]],
    [0.7, [232, 197, 71]],
    [1.0, [215, 38, 61]],
  ];

  const state = {
    metric: 'weighted',
    rangeMs: 3600000, // 0: everything kept
    live: true,
    fromMs: 0, // a fixed time range when not live
    toMs: 0,
    start: null, // escaped keys; null: the whole key space
    end: null,
    data: null,
    timer: 0,
    seq: 0,
    paints: 0,
    drag: null,
    explainSeq: 0,
  };

  // ---- fetching ----

  function plotWidth() {
    return Math.max(50, canvas.getBoundingClientRect().width - MARGIN.left - MARGIN.right);
  }

  function heatmapURL() {
    const p = new URLSearchParams();
    p.set('metric', state.metric);
    if (state.live) {
      if (state.rangeMs === 0) {
        // Everything kept: from the oldest column (from 0 the time axis
        // would start in 1970).
        p.set('from', String(state.data ? state.data.history.from_ms : 0));
      } else if (state.data) {
        p.set('from', String(Math.max(0, state.data.now_ms - state.rangeMs)));
      }
    } else {
      p.set('from', String(state.fromMs));
      p.set('to', String(state.toMs));
    }
    if (state.start !== null) p.set('start', state.start);
    if (state.end !== null && state.end !== '') p.set('end', state.end);
    p.set('cells', String(Math.min(1500, Math.max(1, Math.floor(plotWidth())))));
    return '/api/v1/heatmap?' + p.toString();
  }

  async function getJSON(url) {
    const resp = await fetch(url, { credentials: 'same-origin', cache: 'no-store' });
    if (!resp.ok) {
      const text = (await resp.text()).trim();
      throw new Error(resp.status + ' ' + text);
    }
    return resp.json();
  }

  async function refresh() {
    clearTimeout(state.timer);
    const seq = ++state.seq;
    let delay = MAX_POLL_MS;
    const began = performance.now();
    try {
      const d = await getJSON(heatmapURL());
      if (seq !== state.seq) return; // a newer request took over
      d.layoutRows = d.layouts.map(layoutRows);
      state.data = d;
      render();
      // Every step, unless fetching and painting take more than a quarter
      // of it (a wide range of many routes at a 1 s step).
      delay = Math.max(pollDelay(d), Math.min(MAX_POLL_MS, 4 * (performance.now() - began)));
    } catch (err) {
      if (seq !== state.seq) return;
      setStatus('cannot read the heat map: ' + err.message, true);
    }
    state.timer = setTimeout(refresh, delay);
  }

  // layoutRows reads a layout: a bitmap of the rows that start a band, in
  // hexadecimal, four rows a digit, the highest bit first.
  function layoutRows(hex) {
    const rows = [];
    for (let i = 0; i < hex.length; i++) {
      const v = parseInt(hex[i], 16);
      for (let b = 0; b < 4; b++) {
        if (v & (8 >> b)) rows.push(4 * i + b);
      }
    }
    return rows;
  }

  // pollDelay is one step (the pending step when it is shorter), bounded.
  function pollDelay(d) {
    let step = d.step.ms || MAX_POLL_MS;
    if (d.step.next_ms && d.step.next_ms < step) step = d.step.next_ms;
    return Math.min(MAX_POLL_MS, Math.max(MIN_POLL_MS, step));
  }

  // ---- drawing ----

  function geometry() {
    const rect = canvas.getBoundingClientRect();
    const dpr = window.devicePixelRatio || 1;
    const w = Math.max(MARGIN.left + 50, Math.floor(rect.width));
    const h = Math.max(MARGIN.top + MARGIN.bottom + 50, Math.floor(rect.height));
    if (canvas.width !== Math.round(w * dpr) || canvas.height !== Math.round(h * dpr)) {
      canvas.width = Math.round(w * dpr);
      canvas.height = Math.round(h * dpr);
    }
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    return {
      w: w, h: h, left: MARGIN.left, top: MARGIN.top,
      width: w - MARGIN.left - MARGIN.right, height: h - MARGIN.top - MARGIN.bottom,
    };
  }

  function ratePerMin(value, coveredMs) {
    return coveredMs > 0 ? value * 60000 / coveredMs : 0;
  }

  function colour(rate, maxRate) {
    const c = colourRGB(rate, maxRate);
    return c ? 'rgb(' + c[0] + ',' + c[1] + ',' + c[2] + ')' : PLOT_BG;
  }

  // colourRGB is the ramp's colour of rate on the log scale up to maxRate,
  // null for no load.
  function colourRGB(rate, maxRate) {
    if (!(rate > 0) || !(maxRate > 0)) return null;
    // Log scale; the faintest load still shows.
    return rampRGB(Math.log10(1 + rate) / Math.log10(1 + maxRate));
  }

  function rampRGB(t) {
    t = 0.08 + 0.92 * Math.min(1, Math.max(0, t));
    for (let i = 1; i < RAMP.length; i++) {
      if (t <= RAMP[i][0]) {
        const [t0, c0] = RAMP[i - 1];
        const [t1, c1] = RAMP[i];
        const f = (t - t0) / (t1 - t0);
        return c0.map((v, k) => Math.round(v + (c1[k] - v) * f));
      }
    }
    return RAMP[RAMP.length - 1][1];
  }

  // RAMP_RGB is the ramp in RAMP_STEPS steps (r, g, b each), finer than
  // its 8-bit channels tell apart: painting a million bands looks their
  // colours up instead of interpolating each.
  const RAMP_STEPS = 1024;
  const RAMP_RGB = (() => {
    const t = new Uint8Array(3 * RAMP_STEPS);
    for (let i = 0; i < RAMP_STEPS; i++) t.set(rampRGB(i / (RAMP_STEPS - 1)), 3 * i);
    return t;
  })();

  // paintBands draws every cell's bands into the plot as one image, in
  // device pixels: a pixel row shows the hottest band that touches it, so
  // a hot band thinner than a pixel still shows. One fillRect per band
  // took seconds for an hour of 1000 routes at a 1 s step (a million
  // bands); this is one pass over the values and one over the pixels.
  // Cells name one of the answer's layouts (where their bands start), so
  // the pixel rows of a layout's bands are worked out once.
  function paintBands(d, g, x, y, rows, maxRate) {
    const dpr = canvas.width / g.w;
    const pw = Math.max(1, Math.round(g.width * dpr));
    const ph = Math.max(1, Math.round(g.height * dpr));
    const img = ctx.createImageData(pw, ph);
    const px = img.data;
    const bg = [17, 17, 24]; // PLOT_BG
    for (let i = 0; i < px.length; i += 4) {
      px[i] = bg[0];
      px[i + 1] = bg[1];
      px[i + 2] = bg[2];
      px[i + 3] = 255;
    }
    const pixels = d.layoutRows.map((l) => {
      const py0 = new Int32Array(l.length);
      const py1 = new Int32Array(l.length);
      for (let j = 0; j < l.length; j++) {
        const r1 = j + 1 < l.length ? l[j + 1] : rows;
        py0[j] = Math.min(ph - 1, Math.floor((y(l[j]) - g.top) * dpr));
        py1[j] = Math.min(ph, Math.max(py0[j] + 1, Math.round((y(r1) - g.top) * dpr)));
      }
      return { py0: py0, py1: py1 };
    });
    // The hottest value per pixel row: within a cell a rate is its value
    // over the same covered time, so values compare as rates do.
    const hottest = new Float64Array(ph);
    const logMax = maxRate > 0 ? Math.log10(1 + maxRate) : 0;
    for (const c of d.cells) {
      const cx0 = Math.min(pw - 1, Math.max(0, Math.floor((x(c.start_ms) - g.left) * dpr)));
      const cx1 = Math.min(pw, Math.max(cx0 + 1, Math.round((x(c.end_ms) - g.left) * dpr)));
      const { py0, py1 } = pixels[c.layout];
      const vs = c.values;
      hottest.fill(0);
      for (let j = 0; j < vs.length; j++) {
        const v = vs[j];
        if (!(v > 0)) continue;
        for (let py = py0[j], end = py1[j]; py < end; py++) {
          if (v > hottest[py]) hottest[py] = v;
        }
      }
      // colourRGB's log scale, looked up in RAMP_RGB.
      const perMin = c.covered_ms > 0 ? 60000 / c.covered_ms : 0;
      let last = -1;
      let at = -1;
      for (let py = 0; py < ph; py++) {
        if (hottest[py] !== last) {
          last = hottest[py];
          const rate = last * perMin;
          at = rate > 0 && logMax > 0 ? 3 * Math.round(Math.min(1, Math.log10(1 + rate) / logMax) * (RAMP_STEPS - 1)) : -1;
        }
        if (at < 0) continue;
        const r = RAMP_RGB[at];
        const gr = RAMP_RGB[at + 1];
        const b = RAMP_RGB[at + 2];
        for (let px0 = cx0, i = (py * pw + cx0) * 4; px0 < cx1; px0++, i += 4) {
          px[i] = r;
          px[i + 1] = gr;
          px[i + 2] = b;
        }
      }
    }
    ctx.putImageData(img, Math.round(g.left * dpr), Math.round(g.top * dpr));
  }

  // bandsOf lists a cell's bands with their rows, pixel rows and rates
  // (built when asked: a large answer has a million of them).
  function bandsOf(c, layout, rows, y) {
    return layout.map((r0, j) => {
      const r1 = j + 1 < layout.length ? layout[j + 1] : rows;
      return { row0: r0, row1: r1, y0: y(r0), y1: y(r1), value: c.values[j], rate: ratePerMin(c.values[j], c.covered_ms) };
    });
  }

  function markColour(kind, origin) {
    return MARK_COLOURS[kind + ':' + origin] || OTHER_MARK;
  }

  function render() {
    const d = state.data;
    if (!d) return;
    paint(d);
    banner(d.switch);
    legend(d);
    status(d);
  }

  function paint(d) {
    const g = geometry();
    ctx.fillStyle = PAGE_BG;
    ctx.fillRect(0, 0, g.w, g.h);
    ctx.fillStyle = PLOT_BG;
    ctx.fillRect(g.left, g.top, g.width, g.height);
    const rows = Math.max(1, d.keys.length);
    const span = Math.max(1, d.to_ms - d.from_ms);
    const x = (t) => g.left + (Math.min(Math.max(t, d.from_ms), d.to_ms) - d.from_ms) / span * g.width;
    const y = (r) => g.top + r / rows * g.height;
    const view = {
      fromMs: d.from_ms, toMs: d.to_ms, metric: d.metric, start: d.start, end: d.end,
      plot: { left: g.left, top: g.top, width: g.width, height: g.height },
      rows: rows, keys: d.keys, cells: [], marks: [], routes: [], maxRate: 0, paints: 0,
    };
    for (const c of d.cells) {
      let top = 0;
      for (const v of c.values) if (v > top) top = v;
      view.maxRate = Math.max(view.maxRate, ratePerMin(top, c.covered_ms));
    }
    paintBands(d, g, x, y, rows, view.maxRate);
    for (const c of d.cells) {
      const x0 = x(c.start_ms);
      const x1 = Math.max(x0 + 1, x(c.end_ms));
      const layout = d.layoutRows[c.layout];
      const cell = { startMs: c.start_ms, endMs: c.end_ms, coveredMs: c.covered_ms, columns: c.columns, x0: x0, x1: x1 };
      Object.defineProperty(cell, 'bands', { get: () => bandsOf(c, layout, rows, y), enumerable: true });
      if (x1 - x0 >= 4) {
        // Band edges inside a wide cell: where this cell's boundaries were.
        ctx.fillStyle = 'rgba(0,0,0,0.35)';
        for (let j = 1; j < layout.length; j++) {
          const y0 = y(layout[j]);
          const y1 = j + 1 < layout.length ? y(layout[j + 1]) : y(rows);
          if (y1 - y0 >= 3) ctx.fillRect(x0, y0, x1 - x0, 1);
        }
      }
      view.cells.push(cell);
    }
    // Live route boundaries.
    ctx.fillStyle = 'rgba(255,255,255,0.22)';
    for (const r of d.routes) {
      const y0 = y(r.start_row);
      if (r.start_row > 0) ctx.fillRect(g.left, Math.round(y0), g.width, 1);
      view.routes.push({
        routeId: r.route_id, start: r.start, end: r.end, state: r.state, startRow: r.start_row, endRow: r.end_row,
        y0: y0, y1: y(r.end_row), tracked: r.tracked, score: r.score, consecutiveOver: r.consecutive_over,
        cooldownLeftMs: r.cooldown_left_ms,
      });
    }
    // Marks: a split at key K sits on the edge of K's row; a two-key
    // isolation spans the isolated row.
    for (const m of d.marks) {
      const rs = m.rows.filter((r) => r >= 0);
      if (rs.length === 0) continue;
      const xm = x(m.at_ms);
      const ya = y(Math.min(...rs));
      const yb = y(Math.max(...rs));
      const col = markColour(m.kind, m.origin);
      drawMark(xm, ya, yb, col, m.kind);
      view.marks.push({
        x: xm, y0: ya, y1: yb, kind: m.kind, origin: m.origin, keys: m.keys, rows: m.rows,
        atMs: m.at_ms, routeId: m.route_id, opId: m.op_id || 0, colour: col,
      });
    }
    axes(d, g, rows, x, y);
    state.paints++;
    view.paints = state.paints;
    // Milliseconds from navigation to the end of this paint (browser tests
    // measure rendering with it).
    view.paintedAtMs = performance.now();
    window.hotsplitView = view;
    canvas.dataset.paints = String(state.paints);
  }

  function drawMark(xm, ya, yb, col, kind) {
    ctx.save();
    ctx.lineWidth = 2;
    ctx.strokeStyle = '#000';
    ctx.beginPath();
    ctx.moveTo(xm, ya - 6);
    ctx.lineTo(xm, yb + 6);
    ctx.stroke();
    ctx.lineWidth = 1.5;
    ctx.strokeStyle = col;
    ctx.beginPath();
    ctx.moveTo(xm, ya - 6);
    ctx.lineTo(xm, yb + 6);
    ctx.stroke();
    ctx.fillStyle = col;
    ctx.strokeStyle = '#000';
    ctx.lineWidth = 1;
    ctx.beginPath();
    if (kind === 'merge') {
      ctx.rect(xm - 4, ya - 4, 8, 8); // a square for merges
    } else {
      ctx.moveTo(xm - 5, ya - 10); // a triangle pointing at the key
      ctx.lineTo(xm + 5, ya - 10);
      ctx.lineTo(xm, ya - 2);
      ctx.closePath();
    }
    ctx.fill();
    ctx.stroke();
    ctx.restore();
  }

  function fitText(s, width) {
    if (ctx.measureText(s).width <= width) return s;
    let n = s.length;
    while (n > 1 && ctx.measureText(s.slice(0, n) + '…').width > width) n--;
    return s.slice(0, n) + '…';
  }

  function axes(d, g, rows, x, y) {
    ctx.font = '11px ui-monospace, monospace';
    ctx.fillStyle = '#9a9aa8';
    ctx.textBaseline = 'top';
    const every = Math.max(1, Math.ceil(rows / Math.max(1, Math.floor(g.height / 14))));
    for (let r = 0; r < rows; r += every) {
      const k = d.keys[r] !== undefined ? d.keys[r] : '';
      ctx.fillText(fitText('"' + k + '"', g.left - 8), 4, y(r) + 1);
    }
    ctx.textBaseline = 'alphabetic';
    const span = d.to_ms - d.from_ms;
    for (let i = 0; i <= 5; i++) {
      const t = d.from_ms + span * i / 5;
      const label = fmtClock(t, span);
      const w = ctx.measureText(label).width;
      const xt = Math.min(Math.max(x(t) - w / 2, g.left), g.left + g.width - w);
      ctx.fillText(label, xt, g.top + g.height + 16);
    }
  }

  // ---- banner, legend, status ----

  function banner(sw) {
    const b = $('banner');
    b.dataset.enabled = sw.enabled ? 'true' : 'false';
    $('banner-state').textContent = 'automatic splitting ' + (sw.enabled ? 'ON' : 'OFF');
    const who = sw.actor ? 'by ' + sw.actor + (sw.note ? ' (' + sw.note + ')' : '') : '';
    const why = sw.reason ? ': ' + sw.reason : '';
    const src = sw.source && sw.source !== 'UNSPECIFIED' ? ' [' + sw.source.toLowerCase().replace(/_/g, ' ') + ']' : '';
    $('banner-detail').textContent = (who + why + src).trim();
  }

  function legend(d) {
    const lc = $('legend-scale');
    const lctx = lc.getContext('2d');
    const max = state.data ? (window.hotsplitView || {}).maxRate || 0 : 0;
    for (let i = 0; i < lc.width; i++) {
      // The scale's own log: pixel i shows the rate at that fraction.
      const rate = max > 0 ? Math.pow(10, Math.log10(1 + max) * (i + 1) / lc.width) - 1 : 0;
      lctx.fillStyle = max > 0 ? colour(rate, max) : PLOT_BG;
      lctx.fillRect(i, 0, 1, lc.height);
    }
    $('legend-min').textContent = '0';
    $('legend-max').textContent = fmtNum(max);
    $('legend-unit').textContent = d.metric + ' per minute, log scale';
  }

  function buildMarkLegend() {
    const ul = $('mark-legend');
    for (const [key, col] of Object.entries(MARK_COLOURS)) {
      const li = document.createElement('li');
      const sw = document.createElement('span');
      sw.className = 'swatch';
      sw.style.backgroundColor = col;
      li.appendChild(sw);
      li.appendChild(document.createTextNode(key.replace(':', ' ').toLowerCase().replace(/_/g, ' ')));
      li.dataset.mark = key;
      ul.appendChild(li);
    }
  }

  function status(d) {
    let s = d.read.served_by + ' · index ' + d.read.applied_index + ' · catalog v' + d.read.catalog_version;
    if (!d.history.enabled) {
      s += ' · no heat history: ' + (d.history.reason || 'the cluster is below version 3');
    } else if (d.cells.length === 0) {
      s += ' · no column in this range yet';
    } else {
      s += ' · ' + d.history.columns + ' columns kept since ' + fmtClock(d.history.from_ms, 86400000);
    }
    if (d.routes_omitted > 0) s += ' · ' + d.routes_omitted + ' routes in view: zoom in for route details';
    s += ' · updated ' + new Date().toLocaleTimeString();
    setStatus(s, false);
  }

  function setStatus(s, isError) {
    const el = $('status');
    el.textContent = s;
    el.classList.toggle('error', isError);
  }

  // ---- formatting ----

  function fmtNum(v) {
    if (!isFinite(v)) return String(v);
    const units = ['', 'k', 'M', 'G', 'T', 'P', 'E'];
    let i = 0;
    while (Math.abs(v) >= 1000 && i < units.length - 1) {
      v /= 1000;
      i++;
    }
    return (i === 0 ? (Math.round(v * 10) / 10) : v.toPrecision(3)) + units[i];
  }

  function fmtDur(ms) {
    if (ms < 1000) return ms + ' ms';
    const s = Math.round(ms / 1000);
    if (s < 120) return s + ' s';
    const m = Math.round(s / 60);
    if (m < 120) return m + ' min';
    return (Math.round(m / 6) / 10) + ' h';
  }

  function fmtClock(t, span) {
    const opts = { hour: '2-digit', minute: '2-digit' };
    if (span < 3600000) opts.second = '2-digit';
    const date = new Date(t);
    const clock = date.toLocaleTimeString([], opts);
    return span > 86400000 ? date.toLocaleDateString() + ' ' + clock : clock;
  }

  function quoted(k) {
    return '"' + k + '"';
  }

  function endText(k) {
    return k === '' ? '+inf' : quoted(k);
  }

  // ---- hover, click, zoom ----

  function pointer(ev) {
    const rect = canvas.getBoundingClientRect();
    return { px: ev.clientX - rect.left, py: ev.clientY - rect.top };
  }

  function hit(px, py) {
    const v = window.hotsplitView;
    if (!v) return null;
    const p = v.plot;
    if (px < p.left || px >= p.left + p.width || py < p.top || py >= p.top + p.height) return null;
    const row = Math.min(v.rows - 1, Math.floor((py - p.top) / p.height * v.rows));
    // The newest cell under the pointer: cells narrower than a pixel
    // overlap, and the newest is painted on top.
    const cell = v.cells.findLast((c) => px >= c.x0 && px < c.x1) || null;
    const band = cell ? cell.bands.find((b) => row >= b.row0 && row < b.row1) || null : null;
    const route = v.routes.find((r) => row >= r.startRow && row < Math.max(r.endRow, r.startRow + 1)) || null;
    const marks = v.marks.filter((m) => Math.abs(m.x - px) <= 6 && py >= m.y0 - 12 && py <= m.y1 + 8);
    return { row: row, cell: cell, band: band, route: route, marks: marks };
  }

  function showTooltip(px, py, h) {
    const v = window.hotsplitView;
    const d = state.data;
    const set = (id, s) => { $(id).textContent = s; };
    set('tooltip-time', h.cell
      ? fmtClock(h.cell.startMs, 0) + ' – ' + fmtClock(h.cell.endMs, 0) + (h.cell.columns > 1 ? ' (' + h.cell.columns + ' columns)' : '')
      : '');
    if (h.band) {
      const endKey = h.band.row1 < v.keys.length ? v.keys[h.band.row1] : v.end;
      set('tooltip-range', 'band [' + quoted(v.keys[h.band.row0]) + ', ' + endText(endKey) + ')');
      set('tooltip-value', v.metric + ': ' + fmtNum(h.band.rate) + '/min (' + fmtNum(h.band.value) + ' in ' + fmtDur(h.cell.coveredMs) + ')');
    } else {
      set('tooltip-range', 'keys from ' + quoted(v.keys[h.row]));
      set('tooltip-value', h.cell ? '' : 'no column here');
    }
    if (h.route) {
      const r = h.route;
      set('tooltip-route', 'route r' + r.routeId + ' [' + quoted(r.start) + ', ' + endText(r.end) + ')' + (r.state !== 'ACTIVE' ? ' ' + r.state : ''));
      set('tooltip-detector', r.tracked
        ? 'score ' + fmtNum(r.score) + '/min · consecutive ' + r.consecutiveOver + ' · cooldown left ' + fmtDur(r.cooldownLeftMs)
        : 'score 0 (not tracked: cold) · consecutive 0 · cooldown left 0 ms');
    } else {
      set('tooltip-route', d && d.routes_omitted > 0 ? d.routes_omitted + ' routes in view: zoom in for route details' : '');
      set('tooltip-detector', '');
    }
    set('tooltip-marks', h.marks.map((m) => m.kind + ' (' + m.origin.toLowerCase().replace(/_/g, ' ') + ') at ' +
      fmtClock(m.atMs, 0) + ': ' + m.keys.map(quoted).join(' and ') + ' in r' + m.routeId).join('\n'));
    tooltip.hidden = false;
    // Beside the pointer, on the side with room.
    const plot = $('plot').getBoundingClientRect();
    let left = px + 14;
    if (left + tooltip.offsetWidth > plot.width) left = Math.max(0, px - 14 - tooltip.offsetWidth);
    let top = py + 14;
    if (top + tooltip.offsetHeight > plot.height) top = Math.max(0, py - 14 - tooltip.offsetHeight);
    tooltip.style.left = left + 'px';
    tooltip.style.top = top + 'px';
  }

  function onMove(ev) {
    const { px, py } = pointer(ev);
    if (state.drag) {
      state.drag.x1 = px;
      state.drag.y1 = py;
      showSelection();
      return;
    }
    const h = hit(px, py);
    if (!h) {
      tooltip.hidden = true;
      return;
    }
    showTooltip(px, py, h);
  }

  function selection() {
    let el = $('selection');
    if (!el) {
      el = document.createElement('div');
      el.id = 'selection';
      el.style.position = 'absolute';
      el.style.border = '1px dashed #fff';
      el.style.background = 'rgba(255,255,255,0.08)';
      el.style.pointerEvents = 'none';
      $('plot').appendChild(el);
    }
    return el;
  }

  function showSelection() {
    const s = state.drag;
    const el = selection();
    el.hidden = false;
    el.style.left = Math.min(s.x0, s.x1) + 'px';
    el.style.top = Math.min(s.y0, s.y1) + 'px';
    el.style.width = Math.abs(s.x1 - s.x0) + 'px';
    el.style.height = Math.abs(s.y1 - s.y0) + 'px';
  }

  function onDown(ev) {
    if (ev.button !== 0) return;
    const { px, py } = pointer(ev);
    if (!hit(px, py)) return;
    state.drag = { x0: px, y0: py, x1: px, y1: py };
    ev.preventDefault();
  }

  function onUp(ev) {
    const s = state.drag;
    if (!s) return;
    state.drag = null;
    selection().hidden = true;
    const v = window.hotsplitView;
    const d = state.data;
    const dx = Math.abs(s.x1 - s.x0);
    const dy = Math.abs(s.y1 - s.y0);
    if (dx <= 5 && dy <= 5) {
      const h = hit(s.x0, s.y0);
      if (h && h.route) explain(h.route.routeId);
      return;
    }
    const p = v.plot;
    if (dx > 5) {
      const t = (px) => Math.round(v.fromMs + (Math.min(Math.max(px, p.left), p.left + p.width) - p.left) / p.width * (v.toMs - v.fromMs));
      state.fromMs = t(Math.min(s.x0, s.x1));
      state.toMs = Math.max(state.fromMs, t(Math.max(s.x0, s.x1)));
      setLive(false);
    }
    if (dy > 5) {
      const row = (py) => Math.min(v.rows - 1, Math.max(0, Math.floor((py - p.top) / p.height * v.rows)));
      const r0 = row(Math.min(s.y0, s.y1));
      const r1 = row(Math.max(s.y0, s.y1));
      state.start = v.keys[r0];
      state.end = r1 + 1 < v.keys.length ? v.keys[r1 + 1] : d.end;
    }
    refresh();
  }

  function resetZoom() {
    state.start = null;
    state.end = null;
    setLive(true);
    refresh();
  }

  function setLive(on) {
    state.live = on;
    $('live').setAttribute('aria-pressed', on ? 'true' : 'false');
  }

  // ---- explain panel ----

  function dl(pairs) {
    const el = document.createElement('dl');
    for (const [k, v] of pairs) {
      if (v === undefined || v === null || v === '') continue;
      const dt = document.createElement('dt');
      dt.textContent = k;
      const dd = document.createElement('dd');
      dd.textContent = String(v);
      el.appendChild(dt);
      el.appendChild(dd);
    }
    return el;
  }

  function heading(s) {
    const h = document.createElement('h3');
    h.textContent = s;
    return h;
  }

  function explanationPairs(e) {
    if (!e) return [];
    return [
      ['reason', e.reason], ['origin', e.origin], ['isolation', e.isolation_reason],
      ['score', e.score], ['consecutive', e.consecutive_over], ['since', e.first_at_ms ? fmtClock(e.first_at_ms, 86400001) : ''],
      ['split keys', (e.split_keys || []).map(quoted).join(', ')], ['hot key', e.hot_key ? quoted(e.hot_key) : ''],
      ['hot key share', e.hot_key_share_bp ? (e.hot_key_share_bp / 100) + '%' : ''],
      ['left / right', e.left_share_bp || e.right_share_bp ? (e.left_share_bp / 100) + '% / ' + (e.right_share_bp / 100) + '%' : ''],
      ['threshold', e.threshold],
    ];
  }

  async function explain(routeID) {
    const seq = ++state.explainSeq;
    const panel = $('explain');
    const body = $('explain-body');
    $('explain-title').textContent = 'route r' + routeID;
    panel.hidden = false;
    panel.dataset.routeId = String(routeID);
    body.replaceChildren(document.createTextNode('loading…'));
    let a;
    try {
      a = await getJSON('/api/v1/explain?route=' + encodeURIComponent(String(routeID)));
    } catch (err) {
      if (seq === state.explainSeq) body.replaceChildren(document.createTextNode('cannot explain: ' + err.message));
      return;
    }
    if (seq !== state.explainSeq) return;
    const parts = [];
    if (a.route) {
      parts.push(dl([
        ['range', '[' + quoted(a.route.start) + ', ' + endText(a.route.end) + ')'], ['state', a.route.state],
        ['group', a.route.group_id], ['parent', a.route.parent_route_id ? 'r' + a.route.parent_route_id : ''],
        ['split at', a.route.split_at_ms ? fmtClock(a.route.split_at_ms, 86400001) : ''],
      ]));
    } else {
      parts.push(document.createTextNode('the route no longer exists'));
    }
    parts.push(heading('detector'));
    if (a.tracked) {
      parts.push(dl([
        ['last score', a.tracked.last_score], ['consecutive', a.tracked.consecutive_over],
        ['cooldown left', fmtDur(a.tracked.cooldown_left_ms)], ['recent scores', a.tracked.recent_scores.join(' ')],
      ].concat(explanationPairs(a.tracked.explanation))));
    } else {
      parts.push(document.createTextNode(a.last_column_at_ms ? 'cold: no detector state' : 'no column committed yet'));
    }
    parts.push(dl([['automatic splitting', a.auto_split_enabled ? 'on' : 'off']]));
    if (a.ops.length > 0) {
      parts.push(heading('ops'));
      for (const op of a.ops) {
        parts.push(dl([
          ['op', op.op_id], ['state', op.state], ['origin', op.origin], ['keys', op.split_keys.map(quoted).join(', ')],
          ['step', op.next_step], ['abort', op.abort_reason], ['detail', op.detail],
        ]));
      }
    }
    if (a.decisions.length > 0) {
      parts.push(heading('decisions'));
      for (const dd of a.decisions.slice(-10).reverse()) {
        parts.push(dl([
          ['at', fmtClock(dd.at_ms, 86400001)], ['kind', dd.kind], ['reason', dd.reason], ['origin', dd.origin],
          ['keys', (dd.split_keys || []).map(quoted).join(', ')], ['by', dd.actor], ['detail', dd.detail],
        ]));
      }
    }
    body.replaceChildren(...parts);
  }

  // ---- wiring ----

  function setRange(ms) {
    state.rangeMs = ms;
    for (const b of document.querySelectorAll('#ranges button')) {
      b.setAttribute('aria-pressed', Number(b.dataset.rangeMs) === ms ? 'true' : 'false');
    }
    setLive(true);
    refresh();
  }

  function init() {
    buildMarkLegend();
    $('metric').addEventListener('change', (ev) => {
      state.metric = ev.target.value;
      refresh();
    });
    for (const b of document.querySelectorAll('#ranges button')) {
      b.addEventListener('click', () => setRange(Number(b.dataset.rangeMs)));
    }
    $('live').addEventListener('click', () => {
      setLive(!state.live);
      refresh();
    });
    $('reset-keys').addEventListener('click', () => {
      state.start = null;
      state.end = null;
      refresh();
    });
    $('explain-close').addEventListener('click', () => {
      $('explain').hidden = true;
    });
    canvas.addEventListener('mousemove', onMove);
    canvas.addEventListener('mouseleave', () => {
      if (!state.drag) tooltip.hidden = true;
    });
    canvas.addEventListener('mousedown', onDown);
    window.addEventListener('mouseup', onUp);
    canvas.addEventListener('dblclick', resetZoom);
    // Repaint when the canvas changes size (window, explain panel), so the
    // painted geometry always matches what hover and zoom measure.
    new ResizeObserver(() => {
      if (state.data) paint(state.data);
    }).observe(canvas);
    refresh();
  }

  init();
})();
