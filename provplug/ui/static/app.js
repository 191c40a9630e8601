// provplug explorer: every page is built from its URL, with the DOM API only.
// Stored values are only ever put into the page as text (textContent, text
// nodes, attribute values): never parsed as markup.
"use strict";

const LARGE_ANSWER = 1500; // cells above which an answer opens summarised
const SLICE_PAGE = 200; // cells listed per "expand" of a summarised table
const COLUMN_WIDTH = 230, COLUMN_GAP = 110, NODE_GAP = 14, MARGIN = 16;

// -- small DOM helpers ---------------------------------------------------------
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "on") for (const [ev, fn] of Object.entries(value)) node.addEventListener(ev, fn);
    else if (key === "class") node.className = value;
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  append(node, children);
  return node;
}

function append(node, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    node.appendChild(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function svg(tag, attrs, text) {
  const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, String(value));
  if (text !== undefined) node.textContent = text;
  return node;
}

// A link to one of the explorer's own pages (never a URL taken from data).
function href(path, params) {
  const query = new URLSearchParams();
  for (const [key, value] of Object.entries(params || {})) {
    if (value === undefined || value === null || value === "" || value === false) continue;
    for (const v of Array.isArray(value) ? value : [value]) query.append(key, v === true ? "1" : String(v));
  }
  const text = query.toString();
  return text ? `${path}?${text}` : path;
}

function link(path, params, text, attrs) {
  return el("a", { ...(attrs || {}), href: href(path, params) }, text);
}

// A number written with a decimal point or exponent (35.0) stays so: JSON.parse would make it 35.
class Decimal {
  constructor(source) { this.source = source; }
  toString() { return this.source; }
}

function keepDecimals(key, value, context) {
  if (typeof value === "number" && Number.isInteger(value) && context && /[.eE]/.test(context.source)) return new Decimal(context.source);
  return value;
}

function shown(value) {
  if (value === null || value === undefined) return "null";
  if (value instanceof Decimal) return value.source;
  if (typeof value === "object") return JSON.stringify(value);
  return String(value);
}

function count(n) {
  return n === null || n === undefined ? "-" : Number(n).toLocaleString("en-US");
}

async function api(path, params) {
  const response = await fetch(href(path, params), { headers: { Accept: "application/json" } });
  const body = JSON.parse(await response.text(), keepDecimals);
  if (!response.ok) throw new Error(body.error || `${response.status} ${response.statusText}`);
  return body;
}

const app = () => document.getElementById("app");
const params = () => new URLSearchParams(location.search);

function page(title, ...children) {
  document.title = `${title} · provplug`;
  const root = app();
  root.replaceChildren(el("h1", {}, title), ...children.flat());
  return root;
}

function failure(error) {
  return el("div", { class: "error", role: "alert" }, error.message || String(error));
}

function table(headers, rows, numeric) {
  return el("table", { class: "grid" },
    el("thead", {}, el("tr", {}, headers.map((h) => el("th", {}, h)))),
    el("tbody", {}, rows.map((cells) => el("tr", {}, cells.map((c, i) =>
      el("td", { class: numeric && numeric[i] ? "num" : null }, c))))));
}

// -- runs and tables -------------------------------------------------------------
// How a run was started and the code's commit, as `provplug runs` prints them
// (provplug.explore.browse.entry_point_text and _git_text).
function entryText(r) {
  const e = r.entry_point || {};
  if (e.type === "script") return [`script ${String(e.path).split("/").pop()}`, ...(e.args || []).map(String)].join(" ");
  if (e.type === "kedro") return `kedro ${String(e.project || "").split("/").pop() || "?"} (${e.pipeline}, ${e.env || "local"})`;
  if (e.type === "python") return `python ${e.module}`;
  return r.kind === "import" ? "import" : "-";
}

function gitText(r) {
  return r.git ? `${String(r.git.commit).slice(0, 8)}${r.git.dirty ? "+dirty" : ""}` : "";
}

async function runsPage() {
  const runs = await api("/api/runs");
  const described = { label: (r) => r.label ?? "", entry_point: entryText, git: gitText, status: (r) => r.status ?? "" };
  const extra = Object.keys(described).filter((k) => runs.some((r) => r[k] !== undefined));
  page("Runs",
    el("p", { class: "muted" }, `${runs.length} committed run(s), oldest first.`),
    table(["#", "run", "kind", ...extra, "started", "committed", "tables", "ops", "values", "triples"],
      runs.map((r, i) => [String(r.number ?? i + 1), link("/tables", { run: r.run_id }, r.run_id), r.kind,
        ...extra.map((k) => described[k](r)), shown(r.started ?? "-"), r.committed,
        count(r.tables), count(r.ops), count(r.values), count(r.triples + (r.location_triples || 0))]),
      [true, false, false, ...extra.map(() => false), false, false, true, true, true, true]));
}

async function tablesPage() {
  const p = params();
  const run = p.get("run");
  const tables = await api("/api/tables", { run });
  const search = el("input", { type: "search", id: "search", placeholder: "search tables and columns", value: p.get("q") || "", class: "wide" });
  const holder = el("div", {});
  const render = () => {
    const q = search.value.trim().toLowerCase();
    const chosen = tables.filter((t) => !q || t.name.toLowerCase().includes(q) || t.columns.some((c) => c.toLowerCase().includes(q)));
    holder.replaceChildren(el("p", { class: "muted" }, `${chosen.length} of ${tables.length} table(s)`),
      table(["table", "run", "origin", "rows", "columns", ""],
        chosen.map((t) => [
          t.stored_rows ? link("/table", { name: t.name, run: t.run_id }, t.name, { class: "table-link", "data-table": t.name })
                        : el("span", { "data-table": t.name }, t.name),
          link("/runs", {}, t.run_id.slice(0, 12)), t.origin, count(t.rows), t.columns.join(", "),
          link("/graph", { run: t.run_id }, "workflow")]),
        [false, false, false, true, false, false]));
    history.replaceState(null, "", href("/tables", { run, q: search.value }));
  };
  search.addEventListener("input", render);
  page(run ? `Tables of run ${run}` : "Tables", el("div", { class: "controls" }, el("label", {}, "Search ", search)), holder);
  render();
}

// -- a table's rows ----------------------------------------------------------------
async function tablePage() {
  const p = params();
  const name = p.get("name"), run = p.get("run"), where = p.get("where") || "";
  const offset = Number(p.get("offset") || 0), limit = Number(p.get("limit") || 50);
  const whereBox = el("input", { type: "text", id: "where", class: "wide", value: where, placeholder: "SQL predicate, e.g. City = 'NY'" });
  const go = (changes) => location.assign(href("/table", { name, run, where: whereBox.value, offset: 0, limit, ...changes }));
  const controls = el("form", { class: "controls", on: { submit: (e) => { e.preventDefault(); go({}); } } },
    el("label", {}, "where ", whereBox), el("button", { type: "submit", class: "primary" }, "Filter"));
  page(`Table ${name}`, controls, el("p", { class: "muted" }, "Loading rows…"));
  let doc;
  try {
    doc = await api("/api/rows", { table: name, run, where, offset, limit });
  } catch (error) {
    page(`Table ${name}`, controls, failure(error));
    return;
  }
  const selected = new Set();
  const whatifButton = el("button", { id: "whatif-selected", disabled: true, on: { click: () => location.assign(
    href("/whatif", { run: doc.run_id, value_id: [...selected] })) } }, "What if the selected rows were deleted?");
  const headers = ["", "row", ...doc.columns.map((c) => el("span", {}, c, " ",
    link("/lineage", { table: doc.table, column: c, where, run: doc.run_id }, "⤴", { title: `lineage of ${c} in these rows` })))];
  const rows = doc.rows.map((r) => {
    const box = el("input", { type: "checkbox", "data-row": r.row, on: { change: (e) => {
      const first = r.value_ids ? r.value_ids[doc.columns[0]] : null;
      if (first === null) return;
      if (e.target.checked) selected.add(first); else selected.delete(first);
      whatifButton.disabled = selected.size === 0;
    } } });
    return [box, String(r.row), ...doc.columns.map((c) => r.value_ids
      ? link("/lineage", { value_id: r.value_ids[c], run: doc.run_id }, shown(r.values[c]),
        { class: "cell", "data-column": c, "data-row": r.row, title: `lineage of ${doc.table}.${c} (value ${r.value_ids[c]})` })
      : shown(r.values[c]))];
  });
  const last = Math.min(doc.offset + doc.rows.length, doc.total);
  const pager = el("div", { class: "pager" },
    el("button", { disabled: doc.offset === 0, on: { click: () => go({ offset: Math.max(0, doc.offset - doc.limit) }) } }, "◀ previous"),
    `${doc.total ? doc.offset + 1 : 0}–${last} of ${count(doc.total)} row(s)${where ? " where " + where : ""}`,
    el("button", { disabled: last >= doc.total, on: { click: () => go({ offset: doc.offset + doc.limit }) } }, "next ▶"));
  page(`Table ${doc.table}`, el("p", { class: "muted" }, `run ${doc.run_id} · click a cell for its lineage`),
    controls, pager, table(headers, rows), el("div", { class: "pager" }, whatifButton));
}

// -- lineage -----------------------------------------------------------------------
function lineageQuery(p) {
  return { table: p.get("table"), column: p.get("column"), where: p.get("where"), value_id: p.getAll("value_id"),
           direction: p.get("direction") || "up", run: p.get("run"), method: p.get("method") };
}

function queriedText(q) {
  if (q.table) return `${q.table}.${q.column}${q.where ? " where " + q.where : ""}`;
  return `value ${q.value_id.join(", ")}`;
}

async function lineagePage() {
  const p = params();
  const q = lineageQuery(p);
  const view = { depth: p.get("depth"), sources_only: p.get("sources_only") === "1", summary: p.get("summary") === "1" };
  const word = q.direction === "down" ? "Descendants" : "Ancestors";
  const title = `${word} of ${queriedText(q)}`;
  const controls = lineageControls(q, view, p);
  page(title, controls, el("p", { class: "muted", id: "status" }, "Querying…"));
  const started = performance.now();
  let summary;
  try {
    summary = await api("/api/lineage", { ...q, ...view, summary: true });
  } catch (error) {
    page(title, controls, failure(error));
    return;
  }
  if (view.summary || (summary.cells > LARGE_ANSWER && p.get("full") !== "1")) {
    page(title, controls, summaryView(q, view, summary, !view.summary));
  } else {
    const doc = await api("/api/lineage", { ...q, ...view });
    const graph = lineageGraph(doc, p);
    page(title, controls, graph.elements);
    graph.draw(); // once in the page: the layout measures the nodes' heights
  }
  document.body.dataset.ready = "lineage";
  document.body.dataset.openedMs = String(Math.round(performance.now() - started));
}

function lineageControls(q, view, p) {
  const current = Object.fromEntries([...p.entries()].filter(([k]) => k !== "value_id"));
  const go = (changes) => location.assign(href("/lineage", { ...current, value_id: q.value_id, ...changes }));
  const depth = el("input", { type: "number", min: 0, id: "depth", value: view.depth || "", placeholder: "all" });
  const direction = el("select", { id: "direction", on: { change: () => go({ direction: direction.value }) } },
    el("option", { value: "up", selected: q.direction === "up" }, "ancestors (up)"),
    el("option", { value: "down", selected: q.direction === "down" }, "descendants (down)"));
  const check = (id, label, on) => el("label", {}, el("input", { type: "checkbox", id, checked: on,
    on: { change: (e) => go({ [id]: e.target.checked ? 1 : null }) } }), label);
  return el("form", { class: "controls", on: { submit: (e) => { e.preventDefault(); go({ depth: depth.value }); } } },
    el("label", {}, "direction ", direction),
    el("label", {}, "depth ", depth), el("button", { type: "submit", id: "apply-depth" }, "Apply"),
    check("sources_only", " sources only", view.sources_only),
    check("summary", " summary", view.summary),
    link("/api/lineage", { ...current, value_id: q.value_id }, "JSON", { title: "this answer as provplug lineage --json prints it" }));
}

// Cells grouped into rows (one node per stored row, or per cell without one),
// placed in columns by their fewest triples from the queried cells.
function buildGraph(doc) {
  const cells = new Map();
  for (const c of doc.query) cells.set(c.value_id, { ...c, queried: true });
  for (const c of doc.lineage) if (!cells.has(c.value_id)) cells.set(c.value_id, { ...c, queried: false });
  const nodes = new Map();
  for (const c of cells.values()) {
    const key = c.row !== null && c.row !== undefined ? `r${c.row}` : `v${c.value_id}`;
    if (!nodes.has(key)) nodes.set(key, { key, table: c.table, row: c.row, cells: [], queried: false });
    const node = nodes.get(key);
    node.cells.push(c);
    node.queried = node.queried || c.queried;
    c.node = key;
  }
  const up = doc.direction !== "down";
  const next = new Map(); // value -> [{op, other}] away from the query
  const back = new Map();
  for (const e of doc.edges) {
    const [from, to] = up ? [e.dst, e.src] : [e.src, e.dst];
    if (!next.has(from)) next.set(from, []);
    next.get(from).push({ op: e.op, other: to });
    if (!back.has(to)) back.set(to, []);
    back.get(to).push({ op: e.op, other: from });
  }
  const hops = new Map(doc.query.map((c) => [c.value_id, 0]));
  let frontier = doc.query.map((c) => c.value_id);
  while (frontier.length) {
    const found = [];
    for (const v of frontier) for (const { other } of next.get(v) || []) {
      if (!hops.has(other)) { hops.set(other, hops.get(v) + 1); found.push(other); }
    }
    frontier = found;
  }
  for (const node of nodes.values()) {
    // A cell no triple reaches (a sources-only view has none) sits one step from the query.
    node.level = Math.min(...node.cells.map((c) => hops.get(c.value_id) ?? (c.queried ? 0 : 1)));
    node.cells.sort((a, b) => String(a.column).localeCompare(String(b.column)));
  }
  return { cells, nodes, next, back, up, rows: doc.rows };
}

function reachable(graph, collapsed) {
  // Nodes seen from the queried ones, going no further than a collapsed node
  // (and those no triple leads to: a sources-only view has no triples).
  const linked = (n) => n.cells.some((c) => graph.back.has(c.value_id));
  const seen = new Set([...graph.nodes.values()].filter((n) => n.queried || !linked(n)).map((n) => n.key));
  let frontier = [...seen];
  while (frontier.length) {
    const found = [];
    for (const key of frontier) {
      if (collapsed.has(key)) continue;
      for (const c of graph.nodes.get(key).cells) for (const { other } of graph.next.get(c.value_id) || []) {
        const to = graph.cells.get(other)?.node;
        if (to && !seen.has(to)) { seen.add(to); found.push(to); }
      }
    }
    frontier = found;
  }
  return seen;
}

function focusedCells(graph, column) {
  // The cells of Table.Column and every cell linked to them, either way.
  const start = [...graph.cells.values()].filter((c) => `${c.table}.${c.column}` === column).map((c) => c.value_id);
  const keep = new Set(start);
  for (const links of [graph.next, graph.back]) {
    let frontier = [...start];
    while (frontier.length) {
      const found = [];
      for (const v of frontier) for (const { other } of links.get(v) || []) if (!keep.has(other)) { keep.add(other); found.push(other); }
      frontier = found;
    }
  }
  for (const c of graph.cells.values()) if (c.queried && keep.has(c.value_id)) keep.add(c.value_id);
  return keep;
}

function lineageGraph(doc, p) {
  const graph = buildGraph(doc);
  const collapsed = new Set();
  const state = { focus: p.get("focus") || "", path: null };
  const columns = [...new Set([...graph.cells.values()].map((c) => `${c.table}.${c.column}`))].sort();
  const focus = el("select", { id: "focus", on: { change: () => {
    state.focus = focus.value;
    const url = new URL(location.href);
    if (state.focus) url.searchParams.set("focus", state.focus); else url.searchParams.delete("focus");
    history.replaceState(null, "", url.pathname + url.search);
    draw();
  } } }, el("option", { value: "" }, "every column"), columns.map((c) => el("option", { value: c, selected: c === state.focus }, c)));
  const canvas = el("div", { class: "graph", id: "graph" });
  const word = graph.up ? "ancestors" : "descendants";
  const stats = el("div", { class: "stats", id: "answer-stats" },
    `${count(doc.lineage.length)} ${word}, ${count(doc.edges.length)} triples; method ${doc.method} on ${doc.stats.path}, `
    + `${Number(doc.stats.seconds).toFixed(3)} s. Click a cell to highlight its path to the queried cells; `
    + "↑ / ↓ trace from it; − / + collapse or expand a row's further lineage.");

  function draw() {
    const visible = reachable(graph, collapsed);
    const kept = state.focus ? focusedCells(graph, state.focus) : null;
    const placed = [...graph.nodes.values()].filter((n) => visible.has(n.key)
      && (!kept || n.cells.some((c) => kept.has(c.value_id))));
    drawGraph(canvas, graph, placed, kept, collapsed, state, draw);
  }
  return { draw, elements: [el("div", { class: "controls" }, el("label", {}, "focus on ", focus)), stats, canvas] };
}

function nodeContext(graph, node) {
  const row = node.row !== null && node.row !== undefined ? graph.rows[node.row] : null;
  if (!row) return null;
  const shownColumns = new Set(node.cells.map((c) => c.column));
  const rest = Object.entries(row).filter(([k]) => !shownColumns.has(k));
  return rest.length ? rest.map(([k, v]) => `${k}=${shown(v)}`).join(", ") : null;
}

function drawGraph(canvas, graph, placed, kept, collapsed, state, redraw) {
  const levels = Math.max(0, ...placed.map((n) => n.level));
  const columnOf = (n) => (graph.up ? levels - n.level : n.level);
  const byColumn = new Map();
  for (const n of placed) {
    const x = columnOf(n);
    if (!byColumn.has(x)) byColumn.set(x, []);
    byColumn.get(x).push(n);
  }
  const edgesLayer = svg("svg", { class: "edges" });
  canvas.replaceChildren(edgesLayer);
  const cellElements = new Map();
  const nodeElements = new Map();
  for (const n of placed) {
    const hasMore = n.cells.some((c) => (graph.next.get(c.value_id) || []).length);
    const row = n.row !== null && n.row !== undefined ? `row ${n.row.split(":")[1]}` : `value ${n.cells[0].value_id}`;
    const toggle = hasMore && !n.queried ? el("button", { class: "toggle", title: collapsed.has(n.key) ? "expand" : "collapse",
      on: { click: () => { if (collapsed.has(n.key)) collapsed.delete(n.key); else collapsed.add(n.key); redraw(); } } },
      collapsed.has(n.key) ? "+" : "−") : null;
    const box = el("div", { class: `node${n.queried ? " queried" : ""}${hasMore ? "" : " source"}`, "data-table": n.table, "data-node": n.key },
      el("div", { class: "head" }, el("span", { class: "name", title: n.table }, n.table), el("span", { class: "muted" }, row), toggle));
    const context = nodeContext(graph, n);
    if (context) box.appendChild(el("div", { class: "context", title: context }, context));
    for (const c of n.cells) {
      if (kept && !kept.has(c.value_id)) continue;
      const cell = el("div", { class: "c", "data-value-id": c.value_id, "data-column": c.column ?? "", "data-value": shown(c.value),
        on: { click: (e) => { if (e.target.tagName !== "A") { state.path = state.path === c.value_id ? null : c.value_id; redraw(); } } } },
        el("span", { class: "v" }, c.column !== null && c.column !== undefined ? el("b", {}, c.column) : "", c.column !== null ? " = " : "", shown(c.value)),
        el("span", { class: "go" },
          link("/lineage", { value_id: c.value_id, direction: "up" }, "↑", { title: "ancestors of this cell" }),
          link("/lineage", { value_id: c.value_id, direction: "down" }, "↓", { title: "descendants of this cell" })));
      cellElements.set(c.value_id, cell);
      box.appendChild(cell);
    }
    if (collapsed.has(n.key)) box.appendChild(el("div", { class: "collapsed-note" }, "further lineage collapsed"));
    nodeElements.set(n.key, box);
    canvas.appendChild(box);
  }
  // Order each column by where its neighbours sit in the column before it (fewer crossings).
  const y = new Map();
  let height = 0;
  const order = [...byColumn.keys()].sort((a, b) => (graph.up ? b - a : a - b));
  for (const x of order) {
    const nodes = byColumn.get(x);
    const score = (n) => {
      const ys = [];
      for (const c of n.cells) for (const { other } of graph.back.get(c.value_id) || []) {
        const at = y.get(graph.cells.get(other)?.node);
        if (at !== undefined) ys.push(at);
      }
      return ys.length ? ys.reduce((a, b) => a + b, 0) / ys.length : Infinity;
    };
    const scores = new Map(nodes.map((n) => [n.key, score(n)]));
    nodes.sort((a, b) => (scores.get(a.key) - scores.get(b.key)) || a.table.localeCompare(b.table) || a.key.localeCompare(b.key, undefined, { numeric: true }));
    let top = MARGIN;
    for (const n of nodes) {
      const box = nodeElements.get(n.key);
      box.style.left = `${MARGIN + x * (COLUMN_WIDTH + COLUMN_GAP)}px`;
      box.style.top = `${top}px`;
      y.set(n.key, top + box.offsetHeight / 2);
      top += box.offsetHeight + NODE_GAP;
    }
    height = Math.max(height, top);
  }
  const width = MARGIN * 2 + (levels + 1) * COLUMN_WIDTH + levels * COLUMN_GAP;
  edgesLayer.setAttribute("width", width);
  edgesLayer.setAttribute("height", height + MARGIN);
  drawEdges(edgesLayer, canvas, graph, cellElements, pathOf(graph, state.path));
  canvas.style.height = `${Math.min(Math.max(height + MARGIN, 140), Math.max(400, window.innerHeight - 200))}px`;
}

function pathOf(graph, start) {
  // The cells and triples from a clicked cell back to a queried cell (fewest triples).
  if (start === null || !graph.cells.has(start)) return { cells: new Set(), edges: new Set() };
  const previous = new Map([[start, null]]);
  let frontier = [start], end = graph.cells.get(start).queried ? start : null;
  while (frontier.length && end === null) {
    const found = [];
    for (const v of frontier) for (const { other } of graph.back.get(v) || []) {
      if (previous.has(other)) continue;
      previous.set(other, v);
      if (graph.cells.get(other)?.queried) { end = other; break; }
      found.push(other);
    }
    frontier = found;
  }
  const cells = new Set([start]), edges = new Set();
  for (let v = end; v !== null && v !== undefined && previous.get(v) !== undefined; v = previous.get(v)) {
    cells.add(v);
    const before = previous.get(v);
    if (before !== null) edges.add(`${before}>${v}`), edges.add(`${v}>${before}`);
  }
  return { cells, edges };
}

function drawEdges(layer, canvas, graph, cellElements, path) {
  const box = canvas.getBoundingClientRect();
  const anchor = (element, side) => {
    const r = element.getBoundingClientRect();
    return { x: (side === "right" ? r.right : r.left) - box.left + canvas.scrollLeft, y: r.top + r.height / 2 - box.top + canvas.scrollTop };
  };
  const labels = new Set();
  for (const [v, links] of graph.back) {
    // Edges run left to right: from the cell further from the query... in data-flow order.
    for (const { op, other } of links) {
      const a = cellElements.get(v), b = cellElements.get(other);
      if (!a || !b) continue;
      const [from, to] = graph.up ? [a, b] : [b, a]; // data flows from source (left) to result (right)
      const p1 = anchor(from, "right"), p2 = anchor(to, "left");
      const bend = Math.max(30, (p2.x - p1.x) / 2);
      const hl = path.edges.has(`${v}>${other}`);
      layer.appendChild(svg("path", { d: `M${p1.x},${p1.y} C${p1.x + bend},${p1.y} ${p2.x - bend},${p2.y} ${p2.x},${p2.y}`,
        class: hl ? "hl" : "", "data-op": op }));
      const key = `${graph.cells.get(v).node}|${graph.cells.get(other).node}|${op}`;
      if (!labels.has(key) || hl) {
        labels.add(key);
        layer.appendChild(svg("text", { x: (p1.x + p2.x) / 2, y: (p1.y + p2.y) / 2 - 3, "text-anchor": "middle", class: hl ? "hl edge-label" : "edge-label" }, op));
      }
    }
  }
  for (const [v, element] of cellElements) element.classList.toggle("hl", path.cells.has(v));
}

// A large answer: counts per table and column; a table's cells on request.
function summaryView(q, view, s, large) {
  const word = s.direction === "down" ? "descendants" : "ancestors";
  const head = el("div", { class: "stats", id: "answer-stats" },
    `${count(s.cells)} ${word} of ${count(s.query.length)} queried cell(s), ${count(s.triples)} triples, `
    + `${count(s.source_cells)} ${s.direction === "down" ? "final" : "source"} cells.`
    + (large ? ` Summarised (more than ${count(LARGE_ANSWER)} cells): expand a table or column to list its cells.` : ""));
  const cards = el("div", { class: "cards", id: "summary" }, s.tables.map((t) => summaryCard(q, view, t)));
  const ops = el("div", { class: "card" }, el("h3", {}, "ops"),
    el("ul", {}, s.ops.map((o) => el("li", {}, `${o.op}: ${count(o.triples)} triples`))));
  const full = large && s.cells <= 20000 ? el("p", {}, link("/lineage", { ...Object.fromEntries(params()), value_id: q.value_id, full: 1 },
    "draw the whole graph anyway")) : null;
  return [head, full, cards, el("h2", {}, "ops"), ops];
}

function summaryCard(q, view, t) {
  const list = el("div", { class: "cells" });
  const expand = (column, offset) => async () => {
    const slice = await api("/api/lineage/slice", { ...q, ...view, summary: null, of_table: t.table, of_column: column, offset, limit: SLICE_PAGE });
    if (offset === 0) list.replaceChildren();
    const rows = slice.lineage.map((c) => el("tr", {},
      el("td", {}, c.column ?? "-"), el("td", { class: "value" }, shown(c.value)),
      el("td", { class: "muted" }, c.row && slice.rows[c.row] ? Object.entries(slice.rows[c.row]).map(([k, v]) => `${k}=${shown(v)}`).join(", ") : `value ${c.value_id}`),
      el("td", {}, link("/lineage", { value_id: c.value_id, direction: q.direction }, "trace"))));
    let body = list.querySelector("tbody");
    if (!body) {
      body = el("tbody", {});
      list.appendChild(el("table", { class: "grid slice", "data-table": t.table }, el("thead", {}, el("tr", {}, ["column", "value", "row", ""].map((h) => el("th", {}, h)))), body));
    }
    append(body, rows);
    list.querySelector(".more")?.remove();
    const done = slice.offset + slice.lineage.length;
    list.appendChild(done < slice.total
      ? el("button", { class: "more", on: { click: expand(column, done) } }, `show more (${count(done)} of ${count(slice.total)})`)
      : el("p", { class: "muted more" }, `${count(slice.total)} cell(s)`));
  };
  return el("div", { class: "card", "data-table": t.table },
    el("h3", {}, t.table),
    el("div", { class: "muted" }, `${count(t.cells)} cells${t.rows ? `, ${count(t.rows)} rows` : ""}`),
    el("ul", {}, Object.entries(t.columns).map(([c, n]) => el("li", {}, `${c}: ${count(n)} `,
      el("button", { class: "expand-column", "data-column": c, on: { click: expand(c === "(no column)" ? null : c, 0) } }, "expand")))),
    el("button", { class: "expand", on: { click: expand(null, 0) } }, "expand table"), list);
}

// -- what-if ------------------------------------------------------------------------
async function whatifPage() {
  const p = params();
  const run = p.get("run");
  const tables = await api("/api/tables", { run });
  const chosen = p.getAll("delete"), wheres = p.getAll("where"), values = p.getAll("value_id");
  const tableSelect = el("select", { id: "delete-table" }, tables.filter((t) => t.stored_rows).map((t) =>
    el("option", { value: t.name, selected: chosen[0] === t.name }, t.name)));
  const whereBox = el("input", { type: "text", id: "delete-where", class: "wide", value: wheres[0] || "", placeholder: "which rows, e.g. Name = 'Mark' (empty: all)" });
  const form = el("form", { class: "controls", on: { submit: (e) => { e.preventDefault();
    location.assign(href("/whatif", { run, delete: tableSelect.value, where: whereBox.value })); } } },
    el("label", {}, "delete rows of ", tableSelect), el("label", {}, "where ", whereBox),
    el("button", { type: "submit", class: "primary", id: "delete-rows" }, "Delete (what if)"));
  const intro = el("p", { class: "muted" }, "Nothing is deleted: the store is only read. Select rows here, or tick rows on a table's page.");
  if (!chosen.length && !values.length) { page("What if rows were deleted?", intro, form); return; }
  page("What if rows were deleted?", intro, form, el("p", { class: "muted" }, "Propagating…"));
  try {
    const doc = await api("/api/whatif", { run, delete: chosen, where: wheres, value_id: values });
    page("What if rows were deleted?", intro, form, el("div", { id: "effects" }, doc.tables.map(effectCard)));
    document.body.dataset.ready = "whatif";
  } catch (error) {
    page("What if rows were deleted?", intro, form, failure(error));
  }
}

function rowText(values) {
  return values ? Object.entries(values).map(([k, v]) => `${k}=${shown(v)}`).join(", ") : "(row not stored)";
}

function effectCard(t) {
  const kinds = [["deleted", "deleted"], ["vanished", "vanishes"], ["changed", "changes"], ["unknown", "unknown"]];
  const counts = kinds.filter(([k]) => t[k].length).map(([k, verb]) => `${t[k].length} ${verb}`);
  if (t.untouched !== null) counts.push(`${count(t.untouched)} untouched`);
  const items = [];
  for (const r of t.deleted) items.push(el("li", { class: "deleted" }, "deleted: ", rowText(r.values)));
  for (const r of t.vanished) items.push(el("li", { class: "vanished" }, "vanishes: ", rowText(r.values)));
  for (const r of t.changed) items.push(el("li", { class: "changed" }, rowText(r.values), ": ",
    Object.entries(r.cells).map(([c, change]) => el("span", { class: "change", "data-column": c }, `${c} `,
      el("span", { class: "old" }, shown(change.old)), " → ",
      change.known ? el("span", { class: "new" }, shown(change.new)) : el("span", { class: "unknown" }, "changed, value unknown"), " "))));
  for (const r of t.unknown) items.push(el("li", { class: "unknown" }, "unknown: ", rowText(r.values), r.reason ? ` (${r.reason})` : ""));
  return el("div", { class: "card effect", "data-table": t.table },
    el("h3", {}, t.table, t.op ? el("span", { class: "tag" }, t.op) : null),
    el("div", { class: "muted" }, t.every_row_unknown ? `every row unknown: ${t.every_row_unknown}` : counts.join(", ") || "nothing changes"),
    el("ul", {}, items), t.rows_may_appear ? el("div", { class: "unknown" }, `rows may appear: ${t.rows_may_appear}`) : null);
}

// -- diff ---------------------------------------------------------------------------
async function diffPage() {
  const p = params();
  const runs = await api("/api/runs");
  const pick = (id, value) => el("select", { id }, runs.map((r) => el("option", { value: r.run_id, selected: r.run_id === value }, `${r.run_id} (${r.committed})`)));
  const a = pick("run-a", p.get("a") || runs[Math.max(0, runs.length - 2)]?.run_id);
  const b = pick("run-b", p.get("b") || runs[runs.length - 1]?.run_id);
  const tableBox = el("input", { type: "text", id: "diff-table", value: p.get("table") || "", placeholder: "every table" });
  const form = el("form", { class: "controls", on: { submit: (e) => { e.preventDefault();
    location.assign(href("/diff", { a: a.value, b: b.value, table: tableBox.value })); } } },
    el("label", {}, "run A ", a), el("label", {}, "run B ", b), el("label", {}, "table ", tableBox),
    el("button", { type: "submit", class: "primary" }, "Compare"));
  if (!p.get("a") || !p.get("b")) { page("Diff of two runs", form); return; }
  try {
    const doc = await api("/api/diff", { a: p.get("a"), b: p.get("b"), table: p.get("table"), column: p.get("column"), where: p.get("where"), key: p.get("key") });
    page("Diff of two runs", form, diffView(doc));
  } catch (error) {
    page("Diff of two runs", form, failure(error));
  }
}

function diffView(doc) {
  const keyText = (k) => Object.entries(k || {}).map(([c, v]) => `${c}=${shown(v)}`).join(", ");
  const out = [];
  if (doc.only_in_a.length) out.push(el("p", {}, `only in run A: ${doc.only_in_a.join(", ")}`));
  if (doc.only_in_b.length) out.push(el("p", {}, `only in run B: ${doc.only_in_b.join(", ")}`));
  if (doc.explained !== true) out.push(el("p", { class: "unknown" }, String(doc.explained)));
  for (const t of doc.tables) {
    out.push(el("div", { class: "card effect", "data-table": t.table }, el("h3", {}, t.table),
      el("div", { class: "muted" }, `${count(t.matched_rows)} matched rows by ${t.key.join(", ") || "position"}; `
        + `${t.changed.length} changed cell(s), ${t.added.length} added, ${t.removed.length} removed row(s)`),
      el("ul", {}, t.changed.map((c) => el("li", { class: "changed" }, `${keyText(c.key)}: ${c.column} `,
        el("span", { class: "old" }, shown(c.old)), " → ", el("span", { class: "new" }, shown(c.new)),
        c.because.length ? el("ul", {}, c.because.map((k) => el("li", { class: "muted" },
          `because ${k.table}.${k.column} (${keyText(k.key)}) ${k.status}: ${shown(k.old)} → ${shown(k.new)}`))) : null)),
      t.added.map((r) => el("li", {}, `added: ${rowText(r.row)}`)),
      t.removed.map((r) => el("li", {}, `removed: ${rowText(r.row)}`)))));
  }
  return out.length ? out : [el("p", {}, "no differences")];
}

// -- workflow graph -----------------------------------------------------------------
async function graphPage() {
  const p = params();
  const run = p.get("run");
  const wf = await api("/api/graph", { run });
  const panel = el("div", { class: "panel card", id: "op-panel" }, "Click an op for what it read and wrote; a table for its rows.");
  const canvas = el("div", { class: "graph wf", id: "workflow" });
  page(run ? `Workflow of run ${run}` : "Workflow",
    el("p", { class: "legend" }, `${wf.tables.length} tables, ${wf.ops.length} ops. Blue: tables (rows); yellow: ops (triples).`), canvas, panel);
  const nodes = new Map();
  for (const t of wf.tables) nodes.set(`t:${t.name}`, { key: `t:${t.name}`, kind: "table", name: t.name, text: t.rows_text, preds: [] });
  for (const o of wf.ops) nodes.set(`o:${o.name}`, { key: `o:${o.name}`, kind: "op", name: o.name, text: `${count(o.triples)} triples`, preds: [] });
  const edges = [];
  for (const r of wf.reads) { edges.push([`t:${r.table}`, `o:${r.op}`]); nodes.get(`o:${r.op}`)?.preds.push(`t:${r.table}`); }
  for (const w of wf.writes) { edges.push([`o:${w.op}`, `t:${w.table}`]); nodes.get(`t:${w.table}`)?.preds.push(`o:${w.op}`); }
  const level = new Map();
  const depthOf = (key, seen = new Set()) => {
    if (level.has(key)) return level.get(key);
    if (seen.has(key)) return 0; // a cycle (a table an op both reads and writes)
    seen.add(key);
    const node = nodes.get(key);
    const d = node && node.preds.length ? 1 + Math.max(...node.preds.map((k) => depthOf(k, seen))) : 0;
    level.set(key, d);
    return d;
  };
  const byLevel = new Map();
  for (const key of nodes.keys()) {
    const d = depthOf(key);
    if (!byLevel.has(d)) byLevel.set(d, []);
    byLevel.get(d).push(nodes.get(key));
  }
  const layer = svg("svg", { class: "edges" });
  canvas.replaceChildren(layer);
  const boxes = new Map();
  let height = 0;
  const columnWidth = 200, gap = 70;
  for (const [d, list] of [...byLevel.entries()].sort((x, y) => x[0] - y[0])) {
    let top = MARGIN;
    for (const n of list) {
      const box = el("div", { class: `node ${n.kind}`, "data-name": n.name, title: n.name,
        on: { click: () => (n.kind === "table" ? location.assign(href("/table", { name: n.name, run })) : showOp(panel, wf, n.name, run)) } },
        el("div", { class: "head" }, el("span", { class: "name" }, n.name)), el("div", { class: "body muted" }, n.text));
      box.style.width = `${columnWidth}px`;
      box.style.left = `${MARGIN + d * (columnWidth + gap)}px`;
      box.style.top = `${top}px`;
      canvas.appendChild(box);
      boxes.set(n.key, box);
      top += box.offsetHeight + 18;
    }
    height = Math.max(height, top);
  }
  const width = MARGIN * 2 + (byLevel.size) * (columnWidth + gap);
  layer.setAttribute("width", width);
  layer.setAttribute("height", height + MARGIN);
  canvas.style.height = `${height + MARGIN}px`;
  for (const [from, to] of edges) {
    const a = boxes.get(from), b = boxes.get(to);
    if (!a || !b) continue;
    const x1 = a.offsetLeft + a.offsetWidth, y1 = a.offsetTop + a.offsetHeight / 2, x2 = b.offsetLeft, y2 = b.offsetTop + b.offsetHeight / 2;
    const bend = Math.max(25, (x2 - x1) / 2);
    layer.appendChild(svg("path", { d: `M${x1},${y1} C${x1 + bend},${y1} ${x2 - bend},${y2} ${x2},${y2}` }));
  }
  document.body.dataset.ready = "graph";
}

function showOp(panel, wf, op, run) {
  const info = wf.ops.find((o) => o.name === op);
  const reads = wf.reads.filter((r) => r.op === op), writes = wf.writes.filter((w) => w.op === op);
  const tableLink = (name) => link("/table", { name, run }, name);
  panel.replaceChildren(el("h3", {}, `op ${op}`),
    el("div", { class: "muted" }, `${count(info.triples)} triples; runs ${info.runs.join(", ")}`),
    el("div", {}, "reads: ", reads.length ? reads.map((r, i) => [i ? ", " : "", tableLink(r.table), r.triples ? ` (${count(r.triples)} triples)` : ""]) : "-"),
    el("div", {}, "writes: ", writes.length ? writes.map((w, i) => [i ? ", " : "", tableLink(w.table), w.triples ? ` (${count(w.triples)} triples)` : ""]) : "-"));
}

// -- routing --------------------------------------------------------------------------
const PAGES = { "/": tablesPage, "/runs": runsPage, "/tables": tablesPage, "/table": tablePage, "/lineage": lineagePage,
                "/whatif": whatifPage, "/diff": diffPage, "/graph": graphPage };

document.addEventListener("DOMContentLoaded", () => {
  const render = PAGES[location.pathname] || tablesPage;
  render().catch((error) => page("Error", failure(error))).finally(() => {
    if (!document.body.dataset.ready) document.body.dataset.ready = "page";
  });
});
