// Line charts in plain SVG: no library, no build step. Used by app.js. Titles and series names
// come from a run's metrics (``losses/<key>``, ``episodic_return@<agent>``): text only (dom.js).
"use strict";

const SVG_NS = "http://www.w3.org/2000/svg";
const PALETTE = ["#4ea1ff", "#f0883e", "#3fb950", "#d2a8ff", "#ff7b72", "#e3b341", "#56d4dd", "#db61a2"];

// TensorBoard's smoothing: an exponential moving average, debiased at the start.
function smooth(points, weight) {
  if (!weight) return points;
  let last = 0, n = 0;
  return points.map(([x, y]) => {
    n += 1; last = last * weight + (1 - weight) * y;
    return [x, last / (1 - Math.pow(weight, n))];
  });
}

function svgNode(tag, attrs, parent) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (parent) parent.appendChild(node);
  return node;
}

function formatNumber(v) {
  const a = Math.abs(v);
  if (a !== 0 && (a >= 1e5 || a < 1e-3)) return v.toExponential(1);
  return (+v.toPrecision(4)).toString();
}

// A chart element for `id`, created on first use inside `host`.
function chartElement(host, id, title) {
  let box = document.getElementById(id);
  if (!box) {
    box = document.createElement("div");
    box.className = "chart"; box.id = id;
    box.append(el("h4", {}, title), el("div", {class: "legend"}));
    svgNode("svg", {viewBox: "0 0 600 200", preserveAspectRatio: "none"}, box);
    host.appendChild(box);
  }
  return box;
}

// series: [{label, color, points: [[x, y], ...]}]; draws raw (faint) and smoothed lines.
function drawChart(box, series, weight) {
  const svg = box.querySelector("svg");
  svg.replaceChildren();
  const all = series.flatMap(s => s.points);
  const legend = box.querySelector(".legend");
  legend.replaceChildren(...series.map(s => {
    const swatch = el("i");
    swatch.style.background = s.color;  // CSSOM, not a style attribute: allowed by the page's CSP
    return el("span", {}, swatch, s.label);
  }));
  if (!all.length) { svgNode("text", {x: 300, y: 100, "text-anchor": "middle"}, svg).textContent = "waiting for data"; return; }
  let [x0, x1] = [Math.min(...all.map(p => p[0])), Math.max(...all.map(p => p[0]))];
  let [y0, y1] = [Math.min(...all.map(p => p[1])), Math.max(...all.map(p => p[1]))];
  if (x1 === x0) x1 = x0 + 1;
  if (y1 === y0) { y0 -= 1; y1 += 1; }
  const L = 48, R = 592, T = 8, B = 182;
  const sx = x => L + (x - x0) / (x1 - x0) * (R - L), sy = y => B - (y - y0) / (y1 - y0) * (B - T);
  svgNode("path", {d: `M${L},${T}V${B}H${R}`, stroke: "#2a313b", fill: "none"}, svg);
  for (const [y, anchor] of [[y0, B], [y1, T + 8]]) svgNode("text", {x: L - 4, y: anchor, "text-anchor": "end"}, svg).textContent = formatNumber(y);
  svgNode("text", {x: L, y: 196}, svg).textContent = formatNumber(x0);
  svgNode("text", {x: R, y: 196, "text-anchor": "end"}, svg).textContent = formatNumber(x1) + " steps";
  const line = pts => pts.map(([x, y], i) => `${i ? "L" : "M"}${sx(x).toFixed(1)},${sy(y).toFixed(1)}`).join("");
  for (const s of series) {
    if (!s.points.length) continue;
    if (weight > 0) svgNode("path", {d: line(s.points), stroke: s.color, "stroke-opacity": 0.25, fill: "none", "vector-effect": "non-scaling-stroke"}, svg);
    svgNode("path", {d: line(smooth(s.points, weight)), stroke: s.color, fill: "none", "stroke-width": 1.6,
                     "vector-effect": "non-scaling-stroke", "data-series": s.label, "data-points": s.points.length}, svg);
  }
}

// groups: [{label, color, band: [[step, iqm, low, high], ...]}]; each group's CI band (shaded) and IQM line.
function drawBands(box, groups) {
  const svg = box.querySelector("svg");
  svg.replaceChildren();
  const legend = box.querySelector(".legend");
  legend.replaceChildren(...groups.map(g => {
    const swatch = el("i");
    swatch.style.background = g.color;
    return el("span", {}, swatch, g.label);
  }));
  const all = groups.flatMap(g => g.band);
  if (!all.length) { svgNode("text", {x: 300, y: 100, "text-anchor": "middle"}, svg).textContent = "waiting for data"; return; }
  let [x0, x1] = [Math.min(...all.map(p => p[0])), Math.max(...all.map(p => p[0]))];
  let [y0, y1] = [Math.min(...all.map(p => p[2])), Math.max(...all.map(p => p[3]))];
  if (x1 === x0) x1 = x0 + 1;
  if (y1 === y0) { y0 -= 1; y1 += 1; }
  const L = 48, R = 592, T = 8, B = 182;
  const sx = x => (L + (x - x0) / (x1 - x0) * (R - L)).toFixed(1), sy = y => (B - (y - y0) / (y1 - y0) * (B - T)).toFixed(1);
  svgNode("path", {d: `M${L},${T}V${B}H${R}`, stroke: "#2a313b", fill: "none"}, svg);
  for (const [y, anchor] of [[y0, B], [y1, T + 8]]) svgNode("text", {x: L - 4, y: anchor, "text-anchor": "end"}, svg).textContent = formatNumber(y);
  svgNode("text", {x: L, y: 196}, svg).textContent = formatNumber(x0);
  svgNode("text", {x: R, y: 196, "text-anchor": "end"}, svg).textContent = formatNumber(x1) + " steps";
  for (const g of groups) {
    if (!g.band.length) continue;
    const upper = g.band.map(([x, , , hi], i) => `${i ? "L" : "M"}${sx(x)},${sy(hi)}`).join("");
    const lower = g.band.slice().reverse().map(([x, , lo]) => `L${sx(x)},${sy(lo)}`).join("");
    svgNode("path", {d: upper + lower + "Z", fill: g.color, "fill-opacity": 0.2, stroke: "none", "data-band": g.label}, svg);
    svgNode("path", {d: g.band.map(([x, m], i) => `${i ? "L" : "M"}${sx(x)},${sy(m)}`).join(""), stroke: g.color, fill: "none",
                     "stroke-width": 1.8, "vector-effect": "non-scaling-stroke", "data-series": g.label, "data-points": g.band.length}, svg);
  }
}

// Which chart each series name goes to: returns, losses, speed, episode length.
function chartOf(name) {
  if (name.startsWith("episodic_return")) return ["chart-return", "Episodic return"];
  if (name.startsWith("losses/")) return ["chart-loss-" + name.slice(7).replace(/\W/g, "_"), name];
  if (name === "sps") return ["chart-sps", "Steps per second (SPS)"];
  if (name === "episodic_length") return ["chart-length", "Episode length"];
  return ["chart-other", "Other"];
}

// Returns first, then speed, episode length, losses; alphabetical within each.
function byImportance(a, b) {
  const rank = n => n.startsWith("episodic_return") ? 0 : n === "sps" ? 1 : n === "episodic_length" ? 2 : 3;
  return rank(a) - rank(b) || a.localeCompare(b);
}

window.Charts = {smooth, drawChart, drawBands, chartElement, chartOf, byImportance, PALETTE};
