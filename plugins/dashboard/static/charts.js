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
    svgNode("svg", {}, box);
    host.appendChild(box);
  }
  return box;
}

function drawLegend(box, items) {
  box.querySelector(".legend").replaceChildren(...items.map(item => {
    const swatch = el("i");
    swatch.style.background = item.color;  // CSSOM, not a style attribute: allowed by the page's CSP
    return el("span", {}, swatch, item.label);
  }));
}

// The chart's axes for x in [x0, x1], y in [y0, y1], drawn in the svg's own pixels (its viewBox is
// its size on the page: nothing is stretched, every chart's labels are the same size); returns
// the scales {sx, sy}, or null (and a note) when there is nothing to draw.
function drawAxes(svg, x0, x1, y0, y1) {
  const W = Math.round(svg.clientWidth) || 600, H = Math.round(svg.clientHeight) || 170;
  svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
  svg.replaceChildren();
  if (x0 === null) { svgNode("text", {x: W / 2, y: H / 2, "text-anchor": "middle"}, svg).textContent = "waiting for data"; return null; }
  if (x1 === x0) x1 = x0 + 1;
  if (y1 === y0) { y0 -= 1; y1 += 1; }
  const L = 48, R = W - 8, T = 8, B = H - 16;
  const sx = x => (L + (x - x0) / (x1 - x0) * (R - L)).toFixed(1), sy = y => (B - (y - y0) / (y1 - y0) * (B - T)).toFixed(1);
  svgNode("path", {d: `M${L},${T}V${B}H${R}`, stroke: "#2a313b", fill: "none"}, svg);
  for (const [y, anchor] of [[y0, B], [y1, T + 8]]) svgNode("text", {x: L - 4, y: anchor, "text-anchor": "end", class: "axis"}, svg).textContent = formatNumber(y);
  svgNode("text", {x: L, y: H - 3, class: "axis"}, svg).textContent = formatNumber(x0);
  svgNode("text", {x: R, y: H - 3, "text-anchor": "end", class: "axis"}, svg).textContent = formatNumber(x1) + " steps";
  return {sx, sy};
}

const extent = values => values.length ? [Math.min(...values), Math.max(...values)] : [null, null];

// series: [{label, color, points: [[x, y], ...]}]; draws raw (faint) and smoothed lines.
function drawChart(box, series, weight) {
  const svg = box.querySelector("svg"), all = series.flatMap(s => s.points);
  drawLegend(box, series);
  const axes = drawAxes(svg, ...extent(all.map(p => p[0])), ...extent(all.map(p => p[1])));
  if (!axes) return;
  const line = pts => pts.map(([x, y], i) => `${i ? "L" : "M"}${axes.sx(x)},${axes.sy(y)}`).join("");
  for (const s of series) {
    if (!s.points.length) continue;
    if (weight > 0) svgNode("path", {d: line(s.points), stroke: s.color, "stroke-opacity": 0.25, fill: "none"}, svg);
    svgNode("path", {d: line(smooth(s.points, weight)), stroke: s.color, fill: "none", "stroke-width": 1.6,
                     "data-series": s.label, "data-points": s.points.length}, svg);
  }
}

// groups: [{label, color, band: [[step, iqm, low, high], ...]}]; each group's CI band (shaded) and IQM line.
function drawBands(box, groups) {
  const svg = box.querySelector("svg"), all = groups.flatMap(g => g.band);
  drawLegend(box, groups);
  const [y0] = extent(all.map(p => p[2])), [, y1] = extent(all.map(p => p[3]));
  const axes = drawAxes(svg, ...extent(all.map(p => p[0])), y0, y1);
  if (!axes) return;
  const {sx, sy} = axes;
  for (const g of groups) {
    if (!g.band.length) continue;
    const upper = g.band.map(([x, , , hi], i) => `${i ? "L" : "M"}${sx(x)},${sy(hi)}`).join("");
    const lower = g.band.slice().reverse().map(([x, , lo]) => `L${sx(x)},${sy(lo)}`).join("");
    svgNode("path", {d: upper + lower + "Z", fill: g.color, "fill-opacity": 0.2, stroke: "none", "data-band": g.label}, svg);
    svgNode("path", {d: g.band.map(([x, m], i) => `${i ? "L" : "M"}${sx(x)},${sy(m)}`).join(""), stroke: g.color, fill: "none",
                     "stroke-width": 1.8, "data-series": g.label, "data-points": g.band.length}, svg);
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
