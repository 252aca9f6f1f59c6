// The MOSAIC dashboard page: hash routes #/ (runs), #/run/ID, #/compare/A,B, #/submit.
// Live data arrives over Server-Sent Events; frames are an MJPEG stream shown by an <img>.
"use strict";

const $ = sel => document.querySelector(sel);
const state = {daemon: null, runsSource: null, runSource: null, runs: [], selected: new Set(), compareTimer: null, logsTimer: null};

// The token arrives once in ?token=; the server answered with a cookie.
if (location.search.includes("token=")) history.replaceState(null, "", location.pathname + location.hash);

function notice(text, kind) {
  const box = $("#notice");
  box.hidden = !text; box.textContent = text || ""; box.className = "notice " + (kind || "");
}

async function api(path, options) {
  let response;
  try { response = await fetch(path, options); }
  catch (e) { throw new Error(`the dashboard server did not answer (${e.message})`); }
  let body = null;
  try { body = await response.json(); } catch (e) { /* not JSON */ }
  if (!response.ok) throw new Error((body && body.error) || `${path}: HTTP ${response.status}`);
  return body;
}

function post(path, data) {
  return api(path, {method: "POST", headers: {"Content-Type": "application/json", "X-Mosaic-Dashboard": "1"},
                    body: JSON.stringify(data || {})});
}

const esc = s => String(s ?? "").replace(/[&<>"']/g, c => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}[c]));
const fmt = v => v === null || v === undefined ? "–" : (typeof v === "number" ? (+v.toPrecision(5)).toString() : esc(v));
const when = t => t ? new Date(t * 1000).toLocaleString() : "–";
const kv = (table, obj) => { table.innerHTML = Object.entries(obj).map(([k, v]) => `<tr><td>${esc(k)}</td><td>${fmt(v)}</td></tr>`).join(""); };

function closeStreams() {
  if (state.runSource) { state.runSource.close(); state.runSource = null; }
  if (state.compareTimer) { clearInterval(state.compareTimer); state.compareTimer = null; }
  if (state.logsTimer) { clearInterval(state.logsTimer); state.logsTimer = null; }
  const img = $("#frame"); if (img.getAttribute("src")) img.removeAttribute("src");
}

function show(view) {
  for (const s of document.querySelectorAll("section")) s.hidden = s.id !== "view-" + view;
}

// ------------------------------------------------------------------ the run list
function startRunList() {
  if (state.runsSource) return;
  const source = new EventSource("/api/runs/stream");
  state.runsSource = source;
  source.addEventListener("runs", e => { state.runs = JSON.parse(e.data); $("#live").classList.remove("off"); renderRuns(); });
  source.onerror = () => { $("#live").classList.add("off"); };
}

function renderRuns() {
  const text = $("#filter").value.trim().toLowerCase(), status = $("#status-filter").value;
  const rows = state.runs.filter(r => (!status || r.status === status) &&
    (!text || [r.run_id, r.algo, r.env_id, r.worker].some(v => (v || "").toLowerCase().includes(text))));
  $("#runs tbody").innerHTML = rows.map(r => {
    const total = r.total_timesteps, step = r.global_step;
    const pct = total && step != null ? Math.min(100, 100 * step / total) : 0;
    const progress = step != null ? `<span class="bar"><span style="width:${pct.toFixed(1)}%"></span></span>${fmt(step)}${total ? " / " + fmt(total) : ""}` : "–";
    return `<tr data-run-id="${esc(r.run_id)}" data-status="${esc(r.status)}" data-step="${step ?? ""}">
      <td><input type="checkbox" class="pick" ${state.selected.has(r.run_id) ? "checked" : ""}></td>
      <td><a href="#/run/${encodeURIComponent(r.run_id)}">${esc(r.run_id)}</a></td>
      <td><span class="badge ${esc(r.status)}">${esc(r.status)}</span>${r.daemon_status ? ` <small>${esc(r.daemon_status)}</small>` : ""}</td>
      <td>${esc(r.worker || "–")}</td><td>${esc(r.algo || "–")}</td><td>${esc(r.env_id || "–")}</td>
      <td>${progress}</td><td>${fmt(r.last_return)}</td><td>${when(r.started_at)}</td></tr>`;
  }).join("");
  $("#runs-count").textContent = `${rows.length} of ${state.runs.length} runs`;
}

async function renderDaemonPanel() {
  const panel = $("#daemon-panel");
  try { state.daemon = await api("/api/daemon"); } catch (e) { panel.textContent = e.message; return; }
  const d = state.daemon;
  if (!d.configured) { panel.innerHTML = `<h3>Trainer daemon</h3><div class="note">${esc(d.error)}</div>`; return; }
  if (!d.ok) { panel.innerHTML = `<h3>Trainer daemon ${esc(d.target)}</h3><div class="note">${esc(d.error)}</div>`; return; }
  const queue = d.runs.filter(r => !["FAULT", "TERM"].includes(r.status));
  panel.innerHTML = `<h3>Trainer daemon ${esc(d.target)}</h3>
    <div id="queue-state">running ${d.health.running} · queued ${d.health.queued} · max ${d.health.max_concurrent}
    · ${d.health.accepting ? "accepting runs" : "not accepting runs"}</div>
    <table class="kv">${queue.map(r => `<tr><td>${esc(r.run_id)}</td><td>${esc(r.status)}</td></tr>`).join("")}</table>`;
}

// ------------------------------------------------------------------ one run
const runView = {curves: {}, events: 0, status: null};

function drawRunCharts() {
  const host = $("#charts"), weight = +$("#smoothing").value;
  const groups = {};
  Object.keys(runView.curves).sort(Charts.byImportance).forEach((name, i) => {
    const [id, title] = Charts.chartOf(name);
    (groups[id] = groups[id] || {title, series: []}).series.push(
      {label: name, color: Charts.PALETTE[i % Charts.PALETTE.length], points: runView.curves[name]});
  });
  if (!Object.keys(groups).length) groups["chart-return"] = {title: "Episodic return", series: []};
  for (const [id, g] of Object.entries(groups)) Charts.drawChart(Charts.chartElement(host, id, g.title), g.series, weight);
}

function addEvent(e) {
  runView.events += 1;
  const li = document.createElement("li");
  li.className = e.event;
  const stamp = e.timestamp ? new Date(e.timestamp * 1000).toLocaleTimeString() : "";
  li.textContent = `${stamp} ${e.event} ${JSON.stringify(e.payload || {}).slice(0, 300)}`;
  const list = $("#events");
  list.appendChild(li);
  while (list.children.length > 500) list.firstChild.remove();
  list.scrollTop = list.scrollHeight;
  $("#events-count").textContent = `(${runView.events})`;
  if (e.event === "heartbeat") kv($("#heartbeat"), {at: when(e.timestamp), ...flat(e.payload)});
  if (e.event === "checkpoint_saved") loadFiles();
  const ends = {run_completed: "completed", run_failed: "failed", run_cancelled: "cancelled"};
  if (ends[e.event]) setRunStatus(ends[e.event]);
  else if (e.event === "run_started" && !runView.status) setRunStatus("running");
}

function flat(payload) {
  const out = {};
  for (const [k, v] of Object.entries(payload || {})) if (typeof v !== "object" || v === null) out[k] = v;
  return out;
}

function setRunStatus(status) {
  runView.status = status;
  const badge = $("#run-status");
  badge.textContent = status; badge.className = "badge " + status;
  const daemonKnows = state.daemon && state.daemon.ok;
  $("#cancel").hidden = !(daemonKnows && (status === "running" || status === "queued"));
  const img = $("#frame");
  if (["completed", "failed", "cancelled"].includes(status) && img.getAttribute("src"))
    $("#frame-note").textContent = `the run has ${status}: this was its last frame`;
  if (status !== "running") delete img.dataset.live;
}

function showFrames(status) {
  const img = $("#frame"), note = $("#frame-note");
  if (!status.available) { note.textContent = status.reason; return; }
  $("#frame-mode").textContent = `(${status.mode}${status.slots > 1 ? `, ${status.slots} slots` : ""})`;
  note.textContent = status.ended ? "the run has ended: this is its last frame" : "";
  if (!status.ended && !img.dataset.live) {
    img.dataset.live = "1";
    img.src = `/api/runs/${encodeURIComponent(runView.id)}/frames.mjpg?t=${Date.now()}`;
  }
  const m = {frame: status.frame_number, step: status.global_step, episodes: status.episode_count,
             "rolling return": status.rolling_return, "steps/s": status.step_rate_hz, size: status.width ? `${status.width}×${status.height}` : null};
  kv($("#frame-metrics"), m);
  $("#frame-metrics").dataset.frameNumber = status.frame_number ?? "";
}

async function openRun(id) {
  closeStreams();
  show("run");
  Object.assign(runView, {id, curves: {}, events: 0, status: null});
  $("#run-title").textContent = id;
  for (const sel of ["#charts", "#events", "#heartbeat", "#frame-metrics", "#files", "#logs"]) $(sel).replaceChildren();
  $("#heartbeat").innerHTML = `<tr><td>none yet (the host sends one every 30 s)</td></tr>`;
  $("#frame-note").textContent = "waiting for FastLane"; $("#frame-mode").textContent = "";
  delete $("#frame").dataset.live;
  $("#manifest").textContent = "written when the run ends"; $("#config").textContent = "";
  if (!state.daemon) await renderDaemonPanel();
  try { renderFiles(await api(`/api/runs/${encodeURIComponent(id)}/files`)); }
  catch (e) { notice(e.message); $("#run-status").textContent = "unknown"; return; }
  notice("");
  const summary = state.runs.find(r => r.run_id === id);
  setRunStatus(summary ? summary.status : "running");
  loadLogs();
  state.logsTimer = setInterval(() => { if (runView.status === "running") loadLogs(); }, 5000);
  const source = new EventSource(`/api/runs/${encodeURIComponent(id)}/stream`);
  state.runSource = source;
  source.addEventListener("snapshot", e => {
    const snap = JSON.parse(e.data);
    $("#config").textContent = JSON.stringify(snap.config, null, 2);
    if (snap.manifest) $("#manifest").textContent = JSON.stringify(snap.manifest, null, 2);
    runView.curves = snap.curves;
    snap.events.forEach(addEvent);
    if (snap.config && snap.config.total_timesteps) runView.total = snap.config.total_timesteps;
    if (!snap.config || !(snap.config.extras || {}).fastlane && !(snap.config.extras || {}).fastlane_video_mode)
      $("#frame-note").textContent = "this run was started without FastLane (--extras '{\"fastlane\": true}')";
    drawRunCharts();
  });
  source.addEventListener("points", e => {
    for (const [name, point] of Object.entries(JSON.parse(e.data))) (runView.curves[name] = runView.curves[name] || []).push(point);
    const step = Object.values(JSON.parse(e.data))[0][0];
    $("#run-progress").textContent = runView.total ? `step ${step} / ${runView.total}` : `step ${step}`;
    drawRunCharts();
  });
  source.addEventListener("event", e => addEvent(JSON.parse(e.data)));
  source.addEventListener("manifest", e => { $("#manifest").textContent = JSON.stringify(JSON.parse(e.data), null, 2); loadFiles(); });
  source.addEventListener("fastlane", e => showFrames(JSON.parse(e.data)));
  source.addEventListener("gone", e => { notice(JSON.parse(e.data).message); setRunStatus("deleted"); source.close(); closeStreams(); });
  source.addEventListener("failure", e => { notice("the server stopped this stream: " + JSON.parse(e.data).message); source.close(); });
  source.onerror = () => { $("#live").classList.add("off"); };
  source.onopen = () => { $("#live").classList.remove("off"); };
}

function renderFiles(f) {
  const list = (items, show) => items.length ? `<ul>${items.map(i => `<li>${show(i)}</li>`).join("")}</ul>` : `<div class="note">none yet</div>`;
  $("#files").innerHTML = `<div class="note">${esc(f.run_dir)}</div>
    <b>Checkpoints</b>${list(f.checkpoints, c => `${esc(c.path)}${c.step != null ? ` (step ${c.step})` : ""}`)}
    <b>TensorBoard</b>${list(f.tensorboard, d => esc(d))}<div class="note">open with <code>${esc(f.tensorboard_command)}</code></div>
    <b>W&amp;B offline</b>${list(f.wandb, d => esc(d))}
    <b>Videos</b>${list(f.videos, v => esc(v.path))}`;
}

async function loadFiles() { try { renderFiles(await api(`/api/runs/${encodeURIComponent(runView.id)}/files`)); } catch (e) { notice(e.message); } }

async function loadLogs() {
  try {
    const {logs} = await api(`/api/runs/${encodeURIComponent(runView.id)}/logs`);
    $("#logs").innerHTML = Object.entries(logs).map(([name, text]) => `<h4>${esc(name)}</h4><pre>${esc(text) || "(empty)"}</pre>`).join("")
      || `<div class="note">no logs yet</div>`;
  } catch (e) { $("#logs").textContent = e.message; }
}

async function cancelRun() {
  const button = $("#cancel");
  button.disabled = true;
  try { const r = await post(`/api/runs/${encodeURIComponent(runView.id)}/cancel`); notice(`cancel sent: ${r.status || "ok"}`, "info"); }
  catch (e) { notice(`cancel failed: ${e.message}`); }
  finally { button.disabled = false; }
}

// ------------------------------------------------------------------ comparing runs
async function openCompare(ids) {
  closeStreams();
  show("compare");
  $("#compare-title").textContent = ids.join(", ");
  $("#compare-charts").replaceChildren();
  const refresh = async () => {
    const runs = [];
    for (const id of ids) {
      try { runs.push({id, curves: (await api(`/api/runs/${encodeURIComponent(id)}/curves`)).curves}); }
      catch (e) { notice(e.message); }
    }
    const weight = +$("#compare-smoothing").value, names = new Set(runs.flatMap(r => Object.keys(r.curves)));
    for (const name of [...names].sort(Charts.byImportance)) {
      const series = runs.map((r, i) => ({label: r.id, color: Charts.PALETTE[i % Charts.PALETTE.length], points: r.curves[name] || []}));
      Charts.drawChart(Charts.chartElement($("#compare-charts"), "cmp-" + name.replace(/\W/g, "_"), name), series, weight);
    }
  };
  await refresh();
  state.compareTimer = setInterval(refresh, 3000);
  $("#compare-smoothing").oninput = refresh;
}

// ------------------------------------------------------------------ submitting
async function openSubmit() {
  closeStreams();
  show("submit");
  const form = $("#submit-form"), info = $("#submit-daemon");
  await renderDaemonPanel();
  const d = state.daemon;
  if (!d || !d.ok) { form.hidden = true; info.textContent = d ? d.error : "no daemon"; return; }
  info.textContent = `daemon ${d.target}: running ${d.health.running}, queued ${d.health.queued}`;
  form.hidden = false;
  await loadForm($("#submit-worker").value || "", $("#submit-algo").value);
}

async function loadForm(worker, algo) {
  let schema;
  try { schema = await api(`/api/daemon/form?worker=${encodeURIComponent(worker)}&algo=${encodeURIComponent(algo || "")}`); }
  catch (e) { $("#submit-result").textContent = e.message; return; }
  $("#submit-worker").innerHTML = schema.workers.map(w => `<option ${w === schema.worker ? "selected" : ""}>${esc(w)}</option>`).join("");
  $("#submit-algo").innerHTML = schema.algos.map(a => `<option ${a === schema.algo ? "selected" : ""}>${esc(a)}</option>`).join("");
  const c = schema.capabilities || {};
  $("#submit-caps").textContent = `${schema.worker}: env families ${(c.env_families || []).join(", ")}; action spaces ${(c.action_spaces || []).join(", ")}; `
    + `checkpoints ${c.supports_checkpointing ? "yes" : "no"}; GPU ${c.requires_gpu ? "required" : "not required"}`;
  const box = $("#submit-fields");
  box.innerHTML = `<legend>${esc(schema.algo || "")} Args <small>${esc(schema.script || "")}</small></legend>`;
  for (const f of schema.fields) {
    const label = document.createElement("label");
    label.title = f.help || "";
    const def = typeof f.default === "string" ? f.default : JSON.stringify(f.default);
    let input;
    if (f.kind === "bool") { input = `<input type="checkbox" data-arg="${esc(f.name)}" ${f.default === true ? "checked" : ""}>`; }
    else if (f.kind === "literal" && f.choices) { input = `<select data-arg="${esc(f.name)}">${f.choices.map(c => `<option ${c === f.default ? "selected" : ""}>${esc(c)}</option>`).join("")}</select>`; }
    else { input = `<input data-arg="${esc(f.name)}" placeholder="${esc(f.default_text || def)}" data-kind="${esc(f.kind)}">`; }
    label.innerHTML = `${esc(f.name)} <small>${esc(f.annotation)}</small>${input}`;
    box.appendChild(label);
  }
}

async function submitForm(event) {
  event.preventDefault();
  const form = $("#submit-form"), data = Object.fromEntries(new FormData(form));
  data.fastlane = form.elements.fastlane.checked;
  data.args = {};
  for (const el of form.querySelectorAll("[data-arg]")) data.args[el.dataset.arg] = el.type === "checkbox" ? el.checked : el.value;
  $("#submit-result").textContent = "submitting…";
  try { const r = await post("/api/daemon/submit", data); $("#submit-result").innerHTML = `submitted <a href="#/run/${encodeURIComponent(r.run_id)}">${esc(r.run_id)}</a>`; }
  catch (e) { $("#submit-result").textContent = e.message; }
}

// ------------------------------------------------------------------ routing
function route() {
  notice("");
  const hash = decodeURIComponent(location.hash.slice(1) || "/");
  if (hash.startsWith("/run/")) return openRun(hash.slice(5));
  if (hash.startsWith("/compare/")) return openCompare(hash.slice(9).split(",").filter(Boolean));
  if (hash === "/submit") return openSubmit();
  closeStreams(); show("runs"); renderDaemonPanel();
}

$("#filter").oninput = renderRuns;
$("#status-filter").onchange = renderRuns;
$("#runs").addEventListener("change", e => {
  if (!e.target.classList.contains("pick")) return;
  const id = e.target.closest("tr").dataset.runId;
  e.target.checked ? state.selected.add(id) : state.selected.delete(id);
  $("#compare").disabled = state.selected.size < 1;
});
$("#compare").onclick = () => { location.hash = "#/compare/" + [...state.selected].map(encodeURIComponent).join(","); };
$("#smoothing").oninput = () => { $("#smoothing-value").textContent = (+$("#smoothing").value).toFixed(2); drawRunCharts(); };
$("#cancel").onclick = cancelRun;
$("#logs-refresh").onclick = loadLogs;
$("#submit-worker").onchange = () => loadForm($("#submit-worker").value, "");
$("#submit-algo").onchange = () => loadForm($("#submit-worker").value, $("#submit-algo").value);
$("#submit-form").onsubmit = submitForm;
$("#frame").onerror = () => { const img = $("#frame"); if (img.getAttribute("src")) { $("#frame-note").textContent = "the frame stream stopped (the run ended or its FastLane segment went away)"; delete img.dataset.live; } };
window.addEventListener("hashchange", route);
startRunList();
route();
