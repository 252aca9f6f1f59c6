// The arena's views (mosaic match, mosaic league): the Leagues page (#/leagues) and a match's human
// seats on its run page. Everything shown comes as text through el() (dom.js); app.js routes here.
"use strict";

const Arena = (() => {
  const num = v => typeof v === "number" ? v.toFixed(3) : "–";
  const ci = c => Array.isArray(c) ? `[${num(c[0])}, ${num(c[1])}]` : "–";
  const human = {timer: null, run: null, seats: {}, turns: ""};

  // ---------------------------------------------------------------- the Leagues page
  async function openLeagues() {
    const host = document.querySelector("#leagues");
    let leagues;
    try { leagues = (await api("/api/leagues")).leagues; }
    catch (e) { host.replaceChildren(note(e.message)); return; }
    if (!leagues.length) { host.replaceChildren(note("no league under this runs root yet: `mosaic league SPEC.toml` writes one")); return; }
    host.replaceChildren(...leagues.map(leagueView));
  }

  function leagueView(lg) {
    const ranked = Object.entries(lg.ratings).sort((a, b) => b[1].mu - a[1].mu);
    const names = ranked.map(([name]) => name);
    const played = (lg.matches || []).filter(m => m.completed).length;
    const ratings = el("table", {class: "league-ratings"},
      el("thead", {}, el("tr", {}, ...["operator", "mu", "95% CI", "games"].map(h => el("th", {}, h)))),
      el("tbody", {}, ...ranked.map(([name, r]) => el("tr", {data: {operator: name}},
        el("td", {}, name, " ", el("small", {}, String(lg.operators[name] || ""))),
        el("td", {class: "mu"}, num(r.mu)), el("td", {class: "ci"}, ci(r.ci95)), el("td", {class: "games"}, String(r.games))))));
    const cell = (row, col) => {
      const c = (lg.cross_play[row] || {})[col];
      return el("td", {class: "cell", data: {row, column: col}}, c ? `${num(c.score)} ${ci(c.ci95)} (${c.games})` : "–");
    };
    const matrix = el("table", {class: "league-matrix"},
      el("thead", {}, el("tr", {}, el("th", {}, "row vs column"), ...names.map(n => el("th", {}, n)))),
      el("tbody", {}, ...names.map(row => el("tr", {}, el("th", {}, row), ...names.map(col => cell(row, col))))));
    return el("div", {class: "panel league", data: {league: lg.name}},
      el("h3", {}, `league ${lg.name} (${lg.env}): ${played} of ${(lg.matches || []).length} matches played, ${lg.games} games each`),
      el("div", {class: "note"}, String(lg.rating || "")), ratings,
      el("h4", {}, "cross-play: the row's score against the column (a win 1, a draw ½), 95% CI, games"), matrix);
  }

  // ---------------------------------------------------------------- a match's human seats
  function watchMatch(id, config) {
    stopMatch();
    const seats = Object.entries((config && config.seats) || {}).filter(([, spec]) => spec === "human");
    const panel = document.querySelector("#human-panel");
    panel.hidden = !seats.length;
    if (!seats.length) return;
    Object.assign(human, {run: id, seats: {}, turns: ""});
    panel.replaceChildren(el("h3", {}, "Your seat"), el("div", {id: "human-seats"}), el("div", {id: "human-note", class: "note"}));
    const poll = async () => {
      try { render(await api(`/api/runs/${encodeURIComponent(id)}/human`)); }
      catch (e) { document.querySelector("#human-note").textContent = e.message; }
    };
    poll();
    human.timer = setInterval(poll, 500);
  }

  function stopMatch() {
    if (human.timer) clearInterval(human.timer);
    human.timer = null; human.run = null;
  }

  function render(view) {
    const turns = Object.values(view.seats).map(s => s.turn ? s.turn.turn : 0).join(",");
    if (turns !== human.turns && /[1-9]/.test(turns))  // a new turn: the board it is played on
      showFrame(`/api/runs/${encodeURIComponent(human.run)}/frame.jpg?turns=${turns}`);
    human.turns = turns;
    human.seats = view.seats;
    const box = document.querySelector("#human-seats");
    box.replaceChildren(...Object.entries(view.seats).map(([seat, s]) => seatView(seat, s, view.status)));
    if (view.status && view.status !== "running") stopMatch();
  }

  function seatView(seat, s, status) {
    const turn = s.turn, legal = new Set(turn ? turn.legal : []);
    const outcomes = s.outcomes || [];
    const said = turn ? `${seat}: your move (turn ${turn.turn}); keys ${turn.buttons.map(b => b.key).filter(Boolean).join(" ")}`
      : status === "running" ? `${seat}: waiting for the other seats` : `${seat}: the match is ${status || "over"}`;
    const grid = el("div", {class: "human-buttons"});
    grid.style.gridTemplateColumns = `repeat(${turn ? turn.columns : 3}, 3em)`;
    for (const b of (turn ? turn.buttons : [])) {
      const button = el("button", {data: {action: b.action, seat}, disabled: !legal.has(b.action)}, b.label);
      button.addEventListener("click", () => move(seat, turn.turn, b.action));
      grid.append(button);
    }
    return el("div", {class: "human-seat", data: {seat, turn: turn ? turn.turn : "", outcomes: outcomes.join(",")}},
      el("div", {class: "human-say"}, said), grid,
      el("ol", {class: "human-outcomes"}, ...outcomes.map((o, k) => el("li", {}, `game ${k + 1}: ${seat} ${o === "win" ? "won" : o === "loss" ? "lost" : "drew"}`))));
  }

  async function move(seat, turn, action) {
    const said = document.querySelector("#human-note");
    try { await post(`/api/runs/${encodeURIComponent(human.run)}/human`, {seat, turn, action}); said.textContent = `played ${action}`; }
    catch (e) { said.textContent = `refused: ${e.message}`; }
  }

  // Keys 1-9 play the button of that key for the one seat whose turn is open; an illegal one is refused here.
  document.addEventListener("keydown", e => {
    const open = Object.entries(human.seats).find(([, s]) => s.turn);
    if (!human.run || !open || e.ctrlKey || e.metaKey || e.altKey) return;
    const [seat, s] = open, button = s.turn.buttons.find(b => b.key === e.key);
    if (!button) return;
    if (!s.turn.legal.includes(button.action)) { document.querySelector("#human-note").textContent = `refused: ${e.key} is not a legal move now`; return; }
    move(seat, s.turn.turn, button.action);
  });

  // The page closing gives up an open turn (the match waits a moment for a reloaded page).
  window.addEventListener("pagehide", () => {
    for (const [seat, s] of Object.entries(human.seats)) if (human.run && s.turn)
      fetch(`/api/runs/${encodeURIComponent(human.run)}/human`, {method: "POST", keepalive: true,
        headers: {"Content-Type": "application/json", "X-Mosaic-Dashboard": "1"}, body: JSON.stringify({seat, turn: s.turn.turn, leave: true})});
  });

  return {openLeagues, watchMatch, stopMatch};
})();
