// The atoll-server admin console (docs/admin-api.md). Plain JavaScript, no library: every value
// that comes from data is put in the page with textContent or as an attribute value, never as HTML.
"use strict";

const API = "/api/admin/v1";
const state = { key: sessionStorage.getItem("atoll-admin-key") || "", app: "", view: "apps", timer: null,
                classes: [], query: { cls: "", text: "", args: "[]", offset: 0, limit: 20 }, selected: null };

// MARK: - Helpers

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (name === "onclick" || name === "onsubmit" || name === "oninput" || name === "onchange") node[name] = value;
    else if (name === "class") node.className = value;
    else node.setAttribute(name, value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); return node; }
function $(id) { return document.getElementById(id); }

// A value as people read it: EJSON dates, ObjectIds, UUIDs and numbers shown plainly.
function show(v) {
  if (v === null || v === undefined) return "null";
  if (typeof v === "object" && !Array.isArray(v)) {
    const keys = Object.keys(v);
    if (keys.length === 1) {
      const k = keys[0], x = v[k];
      if (k === "$date") {
        const ms = typeof x === "object" && x !== null ? Number(x.$numberLong) : (typeof x === "string" ? Date.parse(x) : Number(x));
        return isNaN(ms) ? JSON.stringify(v) : new Date(ms).toISOString();
      }
      if (k === "$oid") return "ObjectId(" + x + ")";
      if (k === "$uuid") return "UUID(" + x + ")";
      if (k === "$numberLong" || k === "$numberInt" || k === "$numberDouble" || k === "$numberDecimal") return String(x);
    }
  }
  if (typeof v === "string") return v;
  return JSON.stringify(v);
}

async function api(method, path, body) {
  const init = { method, headers: { "Authorization": "Bearer " + state.key } };
  if (body !== undefined) { init.headers["Content-Type"] = "application/json"; init.body = JSON.stringify(body); }
  const response = await fetch(API + path, init);
  let data = null;
  try { data = await response.json(); } catch (e) { data = null; }
  if (response.status === 401) { signOut("The admin key was refused: " + (data && data.error || "unauthorized")); throw new Error("unauthorized"); }
  if (!response.ok) {
    const error = new Error(data && data.error ? data.error : "HTTP " + response.status);
    error.code = data && data.error_code;
    throw error;
  }
  return data;
}

function message(id, text, kind) {
  const node = $(id);
  node.textContent = text;
  node.className = "message " + (kind || "");
}

function appPath(rest) { return "/apps/" + encodeURIComponent(state.app) + rest; }

function table(headers, rows, attrs) {
  return el("table", attrs || {},
    el("thead", {}, el("tr", {}, headers.map(h => el("th", {}, h)))),
    el("tbody", {}, rows));
}

// MARK: - Sign in and out

async function signIn(event) {
  event.preventDefault();
  state.key = $("login-key").value.trim();
  try {
    const info = await api("GET", "/info");
    sessionStorage.setItem("atoll-admin-key", state.key);
    await start(info);
  } catch (e) {
    if (e.message !== "unauthorized") message("login-error", e.message, "error");
  }
}

function signOut(reason) {
  state.key = "";
  sessionStorage.removeItem("atoll-admin-key");
  if (state.timer) clearInterval(state.timer);
  $("console").hidden = true;
  $("login").hidden = false;
  message("login-error", reason || "", reason ? "error" : "");
}

async function start(info) {
  $("login").hidden = true;
  $("console").hidden = false;
  const select = clear($("app-select"));
  for (const id of info.apps) select.append(el("option", { value: id }, id));
  state.app = state.app && info.apps.includes(state.app) ? state.app : info.apps[0];
  select.value = state.app;
  await showView(state.view);
}

// MARK: - Views

const views = { apps: renderApps, users: renderUsers, sync: renderSync, data: renderData, metrics: renderMetrics };
const refreshing = { sync: 2000, metrics: 5000 };

async function showView(name) {
  state.view = name;
  if (state.timer) { clearInterval(state.timer); state.timer = null; }
  for (const button of document.querySelectorAll("nav button")) button.classList.toggle("active", button.dataset.view === name);
  for (const section of document.querySelectorAll("main > section")) section.hidden = section.id !== "view-" + name;
  await run(views[name]);
  if (refreshing[name]) state.timer = setInterval(() => run(views[name]), refreshing[name]);
}

async function run(render) {
  try { await render(); } catch (e) { if (e.message !== "unauthorized") message("status", e.message, "error"); }
}

// Apps: providers, sync mode, schema, rules (editable), auth (editable, in force at once).
async function renderApps() {
  const a = await api("GET", appPath(""));
  const root = clear($("app-summary"));
  root.append(
    el("dl", {},
      el("dt", {}, "Sync mode"), el("dd", { id: "app-sync-mode" }, a.sync.mode + (a.sync.partitionKey ? " (partition key " + a.sync.partitionKey + ")" : "")),
      el("dt", {}, "Development mode"), el("dd", {}, a.developmentMode ? "on" : "off"),
      el("dt", {}, "Queryable fields"), el("dd", {}, a.sync.queryableFields ? a.sync.queryableFields.join(", ") : "any"),
      el("dt", {}, "Server version"), el("dd", {}, String(a.serverVersion)),
      el("dt", {}, "Auth providers"), el("dd", { id: "app-providers" }, a.auth.providers.map(p => p.type).join(", "))),
    el("h3", {}, "Schema"),
    table(["Class", "Primary key", "Properties"], a.schema.map(c =>
      el("tr", {}, el("td", {}, c.name + (c.embedded ? " (embedded)" : "")), el("td", {}, c.primaryKey || ""),
         el("td", {}, Object.entries(c.properties || {}).map(([n, t]) => n + ": " + typeText(t)).join(", "))))));
  if (document.activeElement !== $("rules-text")) $("rules-text").value = JSON.stringify(a.rules, null, 2);
  if (document.activeElement !== $("auth-text")) {
    $("auth-text").value = JSON.stringify(a.authSaved || { providers: a.auth.providers.map(p => p.type) }, null, 2);
  }
  $("rules-origin").textContent = a.rulesSavedByAdmin ? "saved from this console (in the app's data directory)" : "from the config file";
}

// A schema property as Realm JS writes it short: "int?", "string[]", "Dog?", "Dog<>".
function typeText(t) {
  if (typeof t === "string") return t;
  const inner = t.objectType || t.type;
  if (t.type === "list") return inner + "[]";
  if (t.type === "set") return inner + "<>";
  if (t.type === "dictionary") return inner + "{}";
  if (t.type === "linkingObjects") return "linkingObjects(" + t.objectType + "." + t.property + ")";
  return (t.type === "object" ? t.objectType : t.type) + (t.optional ? "?" : "");
}

// Saves the JSON of the editor `name` ("rules", "auth") to the app's `/name`.
async function saveJSON(name, saved) {
  let body;
  try { body = JSON.parse($(name + "-text").value); } catch (e) { message(name + "-message", "Not JSON: " + e.message, "error"); return; }
  try {
    await api("PUT", appPath("/" + name), body);
    message(name + "-message", saved, "ok");
  } catch (e) {
    message(name + "-message", "Refused: " + e.message, "error");
  }
}

// Users: search, disable, enable, revoke sessions, delete, API keys.
async function renderUsers() {
  const search = $("user-search").value;
  const users = await api("GET", appPath("/users?search=" + encodeURIComponent(search)));
  const rows = users.map(u => {
    const act = (label, method, path, confirmText) => el("button", { class: "small", onclick: async () => {
      if (confirmText && !confirm(confirmText)) return;
      try { await api(method, appPath("/users/" + encodeURIComponent(u._id) + path)); message("users-message", label + ": done for " + u._id, "ok"); }
      catch (e) { message("users-message", label + ": " + e.message, "error"); }
      await run(renderUsers);
    } }, label);
    return el("tr", { "data-user": u._id },
      el("td", { class: "mono" }, u._id),
      el("td", {}, u.email || ""),
      el("td", {}, u.identities.map(i => i.provider_type).join(", ")),
      el("td", {}, show(u.createdAt)),
      el("td", {}, u.disabled ? "disabled" : "enabled"),
      el("td", {}, String(u.sessions)),
      el("td", {}, el("button", { class: "small link", onclick: () => showKeys(u._id) }, String(u.apiKeys))),
      el("td", {},
        u.disabled ? act("Enable", "POST", "/enable") : act("Disable", "POST", "/disable"),
        act("Revoke sessions", "POST", "/revoke_sessions"),
        act("Delete", "DELETE", "", "Delete user " + u._id + " and its identities, keys and sessions?")));
  });
  const root = clear($("users-table"));
  root.append(table(["User", "Email", "Providers", "Created", "State", "Sessions", "API keys", ""], rows, { id: "users" }));
  $("users-count").textContent = users.length + (users.length === 1 ? " user" : " users");
}

async function showKeys(user) {
  const keys = await api("GET", appPath("/users/" + encodeURIComponent(user) + "/api_keys"));
  const root = clear($("keys"));
  root.append(el("h3", {}, "API keys of " + user),
    keys.length === 0 ? el("p", {}, "none") :
    table(["Id", "Name", "State", ""], keys.map(k => el("tr", {},
      el("td", { class: "mono" }, k._id), el("td", {}, k.name), el("td", {}, k.disabled ? "disabled" : "enabled"),
      el("td", {}, el("button", { class: "small", onclick: async () => {
        await api("DELETE", appPath("/users/" + encodeURIComponent(user) + "/api_keys/" + encodeURIComponent(k._id)));
        await showKeys(user);
      } }, "Delete"))))));
}

// Sync: connections with their sessions and subscriptions; recent errors.
async function renderSync() {
  const s = await api("GET", appPath("/sync"));
  $("sync-version").textContent = String(s.serverVersion);
  const rows = [];
  for (const c of s.connections) {
    for (const x of c.sessions) {
      rows.push(el("tr", { "data-user": c.user },
        el("td", { class: "mono" }, c.user), el("td", {}, c.address), el("td", {}, String(x.session)),
        el("td", {}, String(x.file)), el("td", {}, x.mode + (x.mode === "partition" ? " " + show(x.partition) : "")),
        el("td", {}, x.state),
        el("td", {}, x.subscriptions.length === 0 ? "—" : el("ul", {}, x.subscriptions.map(q =>
          el("li", {}, (q.name ? q.name + ": " : "") + q.class + " where " + q.query +
             (q.args.length ? " " + JSON.stringify(q.args) : ""))))),
        el("td", {}, String(x.objectsInView)),
        el("td", {}, x.uploadCursor + " / " + x.downloadCursor)));
    }
  }
  const root = clear($("connections"));
  root.append(rows.length === 0 ? el("p", { class: "empty" }, "No client is connected.") :
    table(["User", "Address", "Session", "File", "Mode", "State", "Subscriptions", "Objects", "Up / down cursor"], rows));
  $("connection-count").textContent = s.connections.length + (s.connections.length === 1 ? " connection" : " connections");
  const errors = clear($("sync-errors"));
  errors.append(s.errors.length === 0 ? el("p", { class: "empty" }, "No sync error since the server started.") :
    table(["Time", "User", "Session", "Code", "Action", "Message", "Compensating writes"], s.errors.map(e => el("tr", { "data-code": e.code },
      el("td", {}, show(e.time)), el("td", { class: "mono" }, e.user), el("td", {}, e.session === null ? "" : String(e.session)),
      el("td", {}, e.code), el("td", {}, e.action), el("td", {}, e.message),
      el("td", {}, e.compensatingWrites.map(w => w.class + " " + show(w.primaryKey) + ": " + w.reason).join("; "))))));
}

// Data: classes, an RQL query, pages of results, one object to view and edit.
async function renderData() {
  state.classes = await api("GET", appPath("/classes"));
  const select = $("query-class");
  const previous = select.value;
  clear(select);
  for (const c of state.classes.filter(c => !c.embedded)) select.append(el("option", { value: c.name }, c.name + " (" + c.count + ")"));
  if (previous && state.classes.some(c => c.name === previous)) select.value = previous;
  if (state.classes.length === 0) { clear($("results")).append(el("p", { class: "empty" }, "No class yet.")); return; }
  await runQuery();
}

async function runQuery(offset) {
  const q = state.query;
  q.cls = $("query-class").value;
  q.text = $("query-text").value;
  q.args = $("query-args").value || "[]";
  q.offset = offset || 0;
  let args;
  try { args = JSON.parse(q.args); } catch (e) { message("query-message", "Arguments are not a JSON array: " + e.message, "error"); return; }
  let page;
  try {
    page = await api("POST", appPath("/query"), { class: q.cls, query: q.text, args, offset: q.offset, limit: q.limit });
  } catch (e) { message("query-message", e.message, "error"); return; }
  message("query-message", "", "");
  const cls = state.classes.find(c => c.name === q.cls);
  const columns = cls ? cls.properties.map(p => p.name) : Object.keys(page.objects[0] || {});
  const rows = page.objects.map(o => el("tr", { class: "clickable", "data-pk": JSON.stringify(o[cls.primaryKey]),
    onclick: () => openObject(o[cls.primaryKey]) }, columns.map(c => el("td", {}, c in o ? show(o[c]) : ""))));
  clear($("results")).append(table(columns, rows, { id: "results-table" }));
  const last = Math.min(q.offset + page.objects.length, page.count);
  $("query-count").textContent = page.count === 0 ? "no object" : (q.offset + 1) + "–" + last + " of " + page.count;
  $("page-prev").disabled = q.offset === 0;
  $("page-next").disabled = last >= page.count;
}

async function openObject(pk) {
  const cls = state.classes.find(c => c.name === state.query.cls);
  const object = await api("POST", appPath("/object"), { class: cls.name, primaryKey: pk });
  state.selected = { cls, pk, object };
  const rows = cls.properties.map(p => {
    const value = object[p.name];
    const editable = p.name !== cls.primaryKey && !/[\[\]{}<>]/.test(p.type) && p.type !== "linkingObjects";
    const text = p.type.startsWith("string") && typeof value === "string" ? value : JSON.stringify(value === undefined ? null : value);
    return el("tr", {}, el("th", {}, p.name), el("td", { class: "type" }, p.type),
      el("td", {}, editable ? el("input", { "data-field": p.name, "data-type": p.type, value: text }) : el("span", { class: "mono" }, show(value))));
  });
  const root = clear($("object-editor"));
  root.hidden = false;
  root.append(el("h3", {}, cls.name + " " + show(pk)), el("table", { class: "object" }, el("tbody", {}, rows)),
    el("button", { id: "object-save", onclick: saveObject }, "Save"), el("span", { id: "object-message", class: "message" }));
}

async function saveObject() {
  const { cls, pk, object } = state.selected;
  const set = {};
  for (const input of document.querySelectorAll("#object-editor input[data-field]")) {
    const name = input.dataset.field;
    let value;
    if (input.dataset.type.startsWith("string") && !(input.dataset.type.endsWith("?") && input.value === "null")) value = input.value;
    else {
      try { value = JSON.parse(input.value); } catch (e) { message("object-message", name + ": not JSON: " + e.message, "error"); return; }
    }
    if (JSON.stringify(value) !== JSON.stringify(object[name] === undefined ? null : object[name])) set[name] = value;
  }
  if (Object.keys(set).length === 0) { message("object-message", "Nothing changed.", ""); return; }
  try {
    const r = await api("PATCH", appPath("/object"), { class: cls.name, primaryKey: pk, set });
    state.selected.object = r.object;
    message("object-message", "Saved at server version " + r.serverVersion + "; clients that see it get it now.", "ok");
    await runQuery(state.query.offset);
  } catch (e) {
    message("object-message", "Refused: " + e.message, "error");
  }
}

// Metrics: the last hour of the server's counters, as graphs.
async function renderMetrics() {
  const m = await api("GET", "/metrics");
  const s = m.samples;
  const rate = (field) => s.slice(1).map((x, i) => [x.time, Math.max(0, (x[field] - s[i][field]) / Math.max(0.001, (x.time - s[i].time) / 1000))]);
  const per = (num, den, scale) => s.slice(1).map((x, i) => {
    const d = x[den] - s[i][den];
    return [x.time, d > 0 ? (x[num] - s[i][num]) / d * scale : 0];
  });
  chart("chart-connections", [{ label: "connections", color: "#2563eb", points: s.map(x => [x.time, x.connections]) },
                              { label: "sessions", color: "#16a34a", points: s.map(x => [x.time, x.sessions]) }], "");
  chart("chart-transfers", [{ label: "uploads/s", color: "#dc2626", points: rate("uploads") },
                            { label: "downloads/s", color: "#2563eb", points: rate("downloads") }], "/s");
  chart("chart-latency", [{ label: "integration ms (mean)", color: "#9333ea", points: per("integrationSeconds", "uploads", 1000) }], " ms");
  chart("chart-bootstrap", [{ label: "bytes per bootstrap", color: "#ea580c", points: per("bootstrapBytes", "bootstraps", 1) }], " B");
  const now = s[s.length - 1];
  $("metrics-totals").textContent = "Totals since start: " + now.uploads + " uploads, " + now.downloads + " downloads, " +
    now.bootstraps + " bootstraps, " + now.rejectedWrites + " rejected writes (sampled every " + m.interval + " s; same counters as /metrics).";
}

function chart(id, series, unit) {
  const canvas = $(id);
  const ctx = canvas.getContext("2d");
  const w = canvas.width, h = canvas.height, left = 48, bottom = 20, top = 22;
  ctx.clearRect(0, 0, w, h);
  const all = series.flatMap(x => x.points);
  const now = Date.now(), t0 = now - 3600 * 1000;
  let max = Math.max(1, ...all.map(p => p[1]));
  ctx.strokeStyle = "#d4d4d8"; ctx.fillStyle = "#52525b"; ctx.font = "11px sans-serif";
  for (let i = 0; i <= 4; i++) {
    const y = top + (h - top - bottom) * i / 4;
    ctx.beginPath(); ctx.moveTo(left, y); ctx.lineTo(w - 4, y); ctx.stroke();
    const v = max * (1 - i / 4);
    ctx.fillText((v >= 100 ? v.toFixed(0) : v.toFixed(v >= 10 ? 1 : 2)) + unit, 2, y + 4);
  }
  ctx.fillText("−60 min", left, h - 4); ctx.fillText("now", w - 28, h - 4);
  let x0 = 0;
  for (const s of series) {
    ctx.strokeStyle = s.color; ctx.fillStyle = s.color; ctx.lineWidth = 2;
    ctx.beginPath();
    s.points.forEach((p, i) => {
      const x = left + (w - left - 4) * Math.max(0, (p[0] - t0)) / (now - t0);
      const y = top + (h - top - bottom) * (1 - p[1] / max);
      if (i === 0) ctx.moveTo(x, y); else ctx.lineTo(x, y);
    });
    ctx.stroke();
    ctx.lineWidth = 1;
    ctx.fillText(s.label, left + x0, 12);
    x0 += ctx.measureText(s.label).width + 16;
  }
}

// MARK: - Wiring

document.addEventListener("DOMContentLoaded", () => {
  $("login-form").onsubmit = signIn;
  $("sign-out").onclick = () => signOut("");
  for (const button of document.querySelectorAll("nav button")) button.onclick = () => showView(button.dataset.view);
  $("app-select").onchange = () => { state.app = $("app-select").value; showView(state.view); };
  $("rules-save").onclick = () => saveJSON("rules", "Rules saved and in force.");
  $("auth-save").onclick = () => saveJSON("auth", "Saved and in force.");
  $("user-search-form").onsubmit = (e) => { e.preventDefault(); run(renderUsers); };
  $("query-form").onsubmit = (e) => { e.preventDefault(); runQuery(0); };
  $("query-class").onchange = () => { $("query-text").value = ""; runQuery(0); };
  $("page-prev").onclick = () => runQuery(Math.max(0, state.query.offset - state.query.limit));
  $("page-next").onclick = () => runQuery(state.query.offset + state.query.limit);
  if (state.key) api("GET", "/info").then(start).catch(() => {});
});
