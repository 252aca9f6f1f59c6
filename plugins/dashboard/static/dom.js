// Elements built from text, never from markup: whatever a run's files hold (names, metric keys,
// config values, log lines, error messages) reaches the page as text. Used by charts.js and app.js.
"use strict";

// el("td", {class: "x", title: t}, "text", childNode, ...): strings become text nodes; null,
// undefined and false children are left out. Boolean props (checked, selected, hidden) are set
// as properties; "on…" handlers are refused (attach them with addEventListener).
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined) continue;
    if (/^on/i.test(key)) throw new Error(`el: no inline handler (${key})`);
    if (key === "class") node.className = value;
    else if (key === "data") Object.assign(node.dataset, value);
    else if (typeof value === "boolean") node[key] = value;
    else node.setAttribute(key, String(value));
  }
  node.append(...children.filter(c => c !== null && c !== undefined && c !== false)
                         .map(c => c instanceof Node ? c : String(c)));
  return node;
}

