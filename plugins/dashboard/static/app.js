// The MOSAIC dashboard page: hash routes #/ (runs), #/run/ID, #/compare/A,B, #/submit, #/leagues (arena.js).
// Live data arrives over Server-Sent Events; frames are an MJPEG stream shown by an <img>.
// Everything from a run's files or the server is shown as text: elements come from el()
// (dom.js) and textContent, never from markup; the server's Content-Security-Policy forbids
// inline script, so handlers are attached here, never written into the page.
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

const fmt = v => v === null || v === undefined ? "–" : (typeof v === "number" ? (+v.toPrecision(5)).toString() : String(v));
const when = t => t ? new Date(t * 1000).toLocaleString() : "–";
const kv = (table, obj) => table.replaceChildren(...Object.entries(obj).map(([k, v]) => el("tr", {}, el("td", {}, k), el("td", {}, fmt(v)))));
const note = text => el("div", {class: "note"}, text);

function closeStreams() {
  if (state.runSource) { state.runSource.close(); state.runSource = null; }
  if (state.compareTimer) { clearInterval(state.compareTimer); state.compareTimer = null; }
  if (state.logsTimer) { clearInterval(state.logsTimer); state.logsTimer = null; }
  Arena.stopMatch();
  hideFrame();
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
  $("#runs tbody").replaceChildren(...rows.map(runRow));
  $("#runs-count").textContent = `${rows.length} of ${state.runs.length} runs`;
}

function runRow(r) {
  const total = r.total_timesteps, step = r.global_step;
  let progress = "–";
  if (step != null) {
    const fill = el("span");
    fill.style.width = `${(total ? Math.min(100, 100 * step / total) : 0).toFixed(1)}%`;
    progress = el("span", {}, el("span", {class: "bar"}, fill), fmt(step) + (total ? " / " + fmt(total) : ""));
  }
  return el("tr", {data: {runId: r.run_id, status: r.status, step: step ?? ""}},
    el("td", {}, el("input", {type: "checkbox", class: "pick", checked: state.selected.has(r.run_id)})),
    el("td", {}, el("a", {href: "#/run/" + encodeURIComponent(r.run_id)}, r.run_id)),
    el("td", {}, el("span", {class: "badge " + r.status}, r.status), r.daemon_status && " ", r.daemon_status && el("small", {}, r.daemon_status),
      r.untrusted && " ", r.untrusted && el("span", {class: "badge untrusted", title: "imported: nothing in it runs until `mosaic runs trust`"}, "imported, untrusted")),
    el("td", {}, r.worker || "–"), el("td", {}, r.algo || "–"), el("td", {}, r.env_id || "–"),
    el("td", {}, progress), el("td", {}, scoreCell(r)), el("td", {}, when(r.started_at)));
}

// The run's one score (runstore.score) once it has ended; while it runs, the live moving average, marked so.
function scoreCell(r) {
  if (r.score) return el("span", {title: r.score.source === "eval" ? "final evaluation, mean return" :
    "mean training return, last 10% of steps"}, fmt(r.score.value) + " " + r.score.source);
  if (r.last_return != null) return el("small", {title: "live: moving average of the last 100 episodes"}, "~" + fmt(r.last_return));
  return "–";
}

async function renderDaemonPanel() {
  const panel = $("#daemon-panel");
  try { state.daemon = await api("/api/daemon"); } catch (e) { panel.textContent = e.message; return; }
  const d = state.daemon;
  if (!d.configured) { panel.replaceChildren(el("h3", {}, "Trainer daemon"), note(d.error)); return; }
  if (!d.ok) { panel.replaceChildren(el("h3", {}, `Trainer daemon ${d.target}`), note(d.error)); return; }
  const queue = el("table", {class: "kv"});
  kv(queue, Object.fromEntries(d.runs.filter(r => !["FAULT", "TERM"].includes(r.status)).map(r => [r.run_id, r.status])));
  panel.replaceChildren(el("h3", {}, `Trainer daemon ${d.target}`),
    el("div", {id: "queue-state"}, `running ${d.health.running} · queued ${d.health.queued} · max ${d.health.max_concurrent}`
       + ` · ${d.health.accepting ? "accepting runs" : "not accepting runs"}`), queue);
}

// ------------------------------------------------------------------ one run
const runView = {curves: {}, events: 0, status: null, heartbeat: null, end: null};
const ENDED = ["completed", "failed", "cancelled", "lost"];

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
  if (!runView.scrolling) {  // once per frame: a fast run (a match's episodes) sends hundreds of events a second
    runView.scrolling = true;
    requestAnimationFrame(() => { runView.scrolling = false; list.scrollTop = list.scrollHeight; });
  }
  $("#events-count").textContent = `(${runView.events})`;
  if (e.event === "heartbeat") { runView.heartbeat = e; renderHeartbeat(); }
  if (e.event === "checkpoint_saved") loadFiles();
  const ends = {run_completed: "completed", run_failed: "failed", run_cancelled: "cancelled"};
  if (ends[e.event]) { runView.end = {status: ends[e.event], at: e.timestamp}; setRunStatus(ends[e.event]); }
  if (ends[e.event] && runView.match) showFrame(`/api/runs/${encodeURIComponent(runView.id)}/frame.jpg?end=${e.seq}`);
  else if (e.event === "run_started" && !runView.status) setRunStatus("running");
}

// A running run shows its newest heartbeat; a finished one shows its end (and its last heartbeat's time).
function renderHeartbeat() {
  const table = $("#heartbeat"), beat = runView.heartbeat, end = runView.end;
  if (end) kv(table, {[`run ${end.status}`]: when(end.at), ...(beat ? {"last heartbeat": when(beat.timestamp)} : {})});
  else if (beat) kv(table, {at: when(beat.timestamp), ...flat(beat.payload)});
  else table.replaceChildren(el("tr", {}, el("td", {}, "none yet (the host sends one every 30 s)")));
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
  if (ENDED.includes(status) && !runView.end) {  // no terminal event seen: the run list knows when it ended
    const summary = state.runs.find(r => r.run_id === runView.id);
    runView.end = {status, at: summary && summary.ended_at};
  }
  renderHeartbeat();
}

// The <img> is shown only while it has a stream to show: no request for a frame that does not exist.
function showFrame(src) {
  const img = $("#frame");
  img.src = src; img.hidden = false; $("#frame-none").hidden = true;
}

function hideFrame() {
  const img = $("#frame");
  if (img.getAttribute("src")) img.removeAttribute("src");
  img.hidden = true; $("#frame-none").hidden = false;
  delete img.dataset.live;
  delete img.dataset.board;
}

function showFrames(status) {
  const img = $("#frame"), note = $("#frame-note");
  if (!status.available) { note.textContent = status.reason; return; }
  $("#frame-mode").textContent = `(${status.mode}${status.slots > 1 ? `, ${status.slots} slots` : ""})`;
  note.textContent = status.ended ? "the run has ended: this is its last frame" : "";
  if (status.mode === "board") {  // a match's board changes a few times a second at most: a still per new one
    if (img.dataset.board !== String(status.frame_number)) {
      img.dataset.board = status.frame_number;
      showFrame(`/api/runs/${encodeURIComponent(runView.id)}/frame.jpg?n=${status.frame_number}`);
    }
  } else if (!status.ended && !img.dataset.live) {
    img.dataset.live = "1";
    showFrame(`/api/runs/${encodeURIComponent(runView.id)}/frames.mjpg?t=${Date.now()}`);
  }
  const m = {frame: status.frame_number, step: status.global_step, episodes: status.episode_count,
             "rolling return": status.rolling_return, "steps/s": status.step_rate_hz, size: status.width ? `${status.width}×${status.height}` : null};
  kv($("#frame-metrics"), m);
  $("#frame-metrics").dataset.frameNumber = status.frame_number ?? "";
}

async function openRun(id) {
  closeStreams();
  show("run");
  Object.assign(runView, {id, curves: {}, events: 0, status: null, heartbeat: null, end: null});
  $("#run-title").textContent = id;
  for (const sel of ["#charts", "#events", "#heartbeat", "#frame-metrics", "#files", "#logs"]) $(sel).replaceChildren();
  renderHeartbeat();
  $("#frame-note").textContent = "waiting for FastLane"; $("#frame-mode").textContent = "";
  $("#human-panel").hidden = true;
  hideFrame();
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
    runView.match = false;
    $("#config").textContent = JSON.stringify(snap.config, null, 2);
    if (snap.manifest) $("#manifest").textContent = JSON.stringify(snap.manifest, null, 2);
    runView.curves = snap.curves;
    snap.events.forEach(addEvent);
    if (snap.config && snap.config.total_timesteps) runView.total = snap.config.total_timesteps;
    if (!snap.live_frames)
      $("#frame-note").textContent = "this run was started without live frames (see `mosaic plugins --extras`)";
    if (snap.config && snap.config.kind === "match") {  // a match: its human seats, its last board once over
      runView.match = true;
      Arena.watchMatch(id, snap.config);
      if (runView.end) showFrame(`/api/runs/${encodeURIComponent(id)}/frame.jpg`);
    }
    drawRunCharts();
  });
  source.addEventListener("points", e => {
    for (const [name, point] of Object.entries(JSON.parse(e.data))) (runView.curves[name] = runView.curves[name] || []).push(point);
    const step = Object.values(JSON.parse(e.data))[0][0];
    $("#run-progress").textContent = runView.total ? `step ${step} / ${runView.total}` : `step ${step}`;
    drawRunCharts();
  });
  // the run's records (every episode, every iteration): new points appended, or all the curves again
  source.addEventListener("recorded", e => {
    for (const [name, points] of Object.entries(JSON.parse(e.data))) (runView.curves[name] = runView.curves[name] || []).push(...points);
    drawRunCharts();
  });
  source.addEventListener("curves", e => { runView.curves = JSON.parse(e.data).curves; drawRunCharts(); });
  source.addEventListener("event", e => addEvent(JSON.parse(e.data)));
  source.addEventListener("manifest", e => { $("#manifest").textContent = JSON.stringify(JSON.parse(e.data), null, 2); loadFiles(); });
  source.addEventListener("frames", e => showFrames(JSON.parse(e.data)));
  source.addEventListener("gone", e => { notice(JSON.parse(e.data).message); setRunStatus("deleted"); source.close(); closeStreams(); });
  source.addEventListener("failure", e => { notice("the server stopped this stream: " + JSON.parse(e.data).message); source.close(); });
  source.onerror = () => { $("#live").classList.add("off"); };
  source.onopen = () => { $("#live").classList.remove("off"); };
}

function renderFiles(f) {
  const list = (items, show) => items.length ? el("ul", {}, ...items.map(i => el("li", {}, show(i)))) : note("none yet");
  $("#files").replaceChildren(note(f.run_dir),
    el("b", {}, "Checkpoints"), list(f.checkpoints, c => c.path + (c.step != null ? ` (step ${c.step})` : "")),
    el("b", {}, "TensorBoard"), list(f.tensorboard, d => d), el("div", {class: "note"}, "open with ", el("code", {}, f.tensorboard_command)),
    el("b", {}, "W&B offline"), list(f.wandb, d => d),
    el("b", {}, "Videos"), list(f.videos, v => v.path));
}

async function loadFiles() { try { renderFiles(await api(`/api/runs/${encodeURIComponent(runView.id)}/files`)); } catch (e) { notice(e.message); } }

async function loadLogs() {
  try {
    const {logs} = await api(`/api/runs/${encodeURIComponent(runView.id)}/logs`);
    const shown = Object.entries(logs).flatMap(([name, text]) => [el("h4", {}, name), el("pre", {}, text || "(empty)")]);
    $("#logs").replaceChildren(...(shown.length ? shown : [note("no logs yet")]));
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
  $("#compare-bands").replaceChildren();
  const refresh = async () => {
    await refreshGroups(ids);
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

// Seed groups of the compared runs: IQM return over env steps with its CI band, the scores as runs finish.
async function refreshGroups(ids) {
  let view;
  try { view = await api("/api/groups?runs=" + ids.map(encodeURIComponent).join(",")); }
  catch (e) { notice(e.message); return; }
  const groups = view.groups.map((g, i) => ({...g, color: Charts.PALETTE[i % Charts.PALETTE.length]}));
  $("#compare-warnings").replaceChildren(...view.warnings.map(note));
  $("#compare-groups tbody").replaceChildren(...groups.map(g => el("tr", {data: {group: g.label}},
    el("td", {}, g.label, g.untrusted.length > 0 && " ", g.untrusted.length > 0 && el("span",
      {class: "badge untrusted", title: "imported: " + g.untrusted.join(", ")}, `${g.untrusted.length} imported, untrusted`)),
    el("td", {}, String(g.runs.length)), el("td", {}, String(g.finished)),
    el("td", {class: "score-iqm"}, fmt(g.score_iqm)), el("td", {class: "score-sources"}, sources(g.sources)),
    el("td", {class: "band-end"}, g.band.length ? fmt(g.band[g.band.length - 1][1]) : "–"))));
  Charts.drawBands(Charts.chartElement($("#compare-bands"), "cmp-bands",
    "Training score over env steps (mean return, last 10% of steps): IQM over seeds, 95% CI"), groups);
}

// "eval 2, train 1": where a group's scores come from.
function sources(names) {
  const counts = {};
  for (const n of names) counts[n] = (counts[n] || 0) + 1;
  return Object.entries(counts).map(([n, c]) => `${n} ${c}`).join(", ") || "–";
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
  const options = (names, chosen) => names.map(n => el("option", {selected: n === chosen}, n));
  $("#submit-worker").replaceChildren(...options(schema.workers, schema.worker));
  $("#submit-algo").replaceChildren(...options(schema.algos, schema.algo));
  const c = schema.capabilities || {};
  $("#submit-caps").textContent = `${schema.worker}: env families ${(c.env_families || []).join(", ")}; action spaces ${(c.action_spaces || []).join(", ")}; `
    + `checkpoints ${c.supports_checkpointing ? "yes" : "no"}; GPU ${c.requires_gpu ? "required" : "not required"}`;
  const box = $("#submit-fields");
  box.replaceChildren(el("legend", {}, `${schema.algo || ""} Args `, el("small", {}, schema.script || "")));
  for (const f of schema.fields) {
    const def = typeof f.default === "string" ? f.default : JSON.stringify(f.default);
    let input;
    if (f.kind === "bool") input = el("input", {type: "checkbox", data: {arg: f.name}, checked: f.default === true});
    else if (f.kind === "literal" && f.choices) input = el("select", {data: {arg: f.name}}, ...options(f.choices, f.default));
    else input = el("input", {data: {arg: f.name, kind: f.kind}, placeholder: f.default_text || def});
    box.appendChild(el("label", {title: f.help || ""}, f.name, " ", el("small", {}, f.annotation), input));
  }
}

async function submitForm(event) {
  event.preventDefault();
  const form = $("#submit-form"), data = Object.fromEntries(new FormData(form));
  data.live_frames = form.elements.live_frames.checked;
  data.args = {};
  for (const el of form.querySelectorAll("[data-arg]")) data.args[el.dataset.arg] = el.type === "checkbox" ? el.checked : el.value;
  $("#submit-result").textContent = "submitting…";
  try { const r = await post("/api/daemon/submit", data); $("#submit-result").replaceChildren("submitted ", el("a", {href: "#/run/" + encodeURIComponent(r.run_id)}, r.run_id)); }
  catch (e) { $("#submit-result").textContent = e.message; }
}

// ------------------------------------------------------------------ routing
function route() {
  notice("");
  const hash = decodeURIComponent(location.hash.slice(1) || "/");
  if (hash.startsWith("/run/")) return openRun(hash.slice(5));
  if (hash.startsWith("/compare/")) return openCompare(hash.slice(9).split(",").filter(Boolean));
  if (hash === "/submit") return openSubmit();
  if (hash === "/leagues") { closeStreams(); show("leagues"); return Arena.openLeagues(); }
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
$("#frame").onerror = () => {
  const img = $("#frame");
  if (!img.getAttribute("src")) return;
  $("#frame-note").textContent = "the frame stream stopped (the run ended or its FastLane segment went away)";
  if (img.naturalWidth) delete img.dataset.live; else hideFrame();  // keep a last frame; never a broken image
};
window.addEventListener("hashchange", route);
window.addEventListener("resize", () => { if (!$("#view-run").hidden) drawRunCharts(); });
startRunList();
route();
