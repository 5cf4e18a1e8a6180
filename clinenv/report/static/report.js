// clinenv run report: renders the JSON data island (id "report-data") on demand.
// Text from the logs reaches the document only through textContent (never markup);
// the episode list is drawn one page at a time and an episode only when opened.
(function () {
  "use strict";
  var PAGE_SIZE = 50;
  var D = JSON.parse(document.getElementById("report-data").textContent);
  var S = D.strings;
  var EP = D.episodes;
  var AV = D.meta.availability;
  var timings = (window.__reportTimings = { start: performance.now() });

  function s(i) { return i === null || i === undefined ? null : S[i]; }

  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== null && text !== undefined) node.textContent = String(text);
    return node;
  }

  function add(parent) {
    for (var i = 1; i < arguments.length; i++) {
      if (arguments[i]) parent.appendChild(arguments[i]);
    }
    return parent;
  }

  function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); }

  function num(x, digits) {
    if (x === null || x === undefined) return "–";
    return digits === undefined ? String(x) : Number(x).toFixed(digits);
  }

  function label(ep) { return D.runs[ep.r].label; }

  function availability(code) {
    var key = s(code);
    return key === null ? "" : (AV[key] || key);
  }

  // ------------------------------------------------------------------ header
  function renderHeader() {
    var warn = document.getElementById("warnings");
    D.meta.warnings.forEach(function (w) { add(warn, el("p", "warning", "Warning: " + w)); });
    var runs = document.getElementById("runs");
    var list = el("ul", "runs");
    D.runs.forEach(function (run) {
      var text = run.label + " on " + run.dataset + " (" + run.env_id + "): " +
        run.n_episodes + " of " + run.n_scheduled + " scheduled episodes logged; " +
        run.paths.join(", ");
      add(list, el("li", null, text));
    });
    add(runs, list);
  }

  // ------------------------------------------------------------------ tables, figures
  function renderTable(t) {
    var box = el("div", "table-box");
    add(box, el("h3", null, t.title));
    var table = el("table", "stats");
    var head = el("tr");
    t.header.forEach(function (h, i) { add(head, el("th", t.numeric[i] ? "num" : null, h)); });
    add(table, add(el("thead"), head));
    var body = el("tbody");
    t.rows.forEach(function (row) {
      var tr = el("tr");
      row.forEach(function (c, i) { add(tr, el("td", t.numeric[i] ? "num" : null, c)); });
      add(body, tr);
    });
    add(table, body);
    add(box, table);
    if (t.notes.length) {
      var ul = el("ul", "notes");
      t.notes.forEach(function (n) { add(ul, el("li", null, n)); });
      add(box, ul);
    }
    return box;
  }

  function renderSummary() {
    var tables = document.getElementById("tables");
    D.tables.forEach(function (t) { add(tables, renderTable(t)); });
    var figs = document.getElementById("figures");
    if (!D.figures.length) add(figs, el("p", "muted", "No figures (built without them; figures need matplotlib: pip install 'clinenv[plot]')."));
    D.figures.forEach(function (f) {
      var fig = el("figure");
      var img = el("img");
      img.id = f.id;
      img.alt = f.title;
      img.src = f.src;
      add(fig, img, el("figcaption", null, f.title));
      add(figs, fig);
    });
  }

  // ------------------------------------------------------------------ filters
  var state = { method: "", dataset: "", verdict: "", flag: "", stratum: "", caseText: "",
                page: 0, matches: [] };

  function distinct(values) {
    var seen = {};
    var out = [];
    values.forEach(function (v) {
      if (v !== null && !Object.prototype.hasOwnProperty.call(seen, v)) {
        seen[v] = true; out.push(v);
      }
    });
    return out.sort();
  }

  function select(id, name, values, key) {
    var wrap = el("label", "filter", name + " ");
    var sel = el("select");
    sel.id = id;
    var all = el("option", null, "all");
    all.value = "";
    add(sel, all);
    values.forEach(function (v) {
      var o = el("option", null, v);
      o.value = v;
      add(sel, o);
    });
    sel.addEventListener("change", function () { state[key] = sel.value; applyFilters(); });
    return add(wrap, sel);
  }

  function renderFilters() {
    var box = document.getElementById("filters");
    var flags = [], strata = [];
    EP.forEach(function (ep) {
      ep.f.forEach(function (i) { flags.push(S[i]); });
      ep.g.forEach(function (i) { strata.push(S[i]); });
    });
    add(box,
      select("filter-method", "Method", distinct(D.runs.map(function (r) { return r.label; })), "method"),
      select("filter-dataset", "Dataset", distinct(D.runs.map(function (r) { return r.dataset; })), "dataset"),
      select("filter-verdict", "Verdict", distinct(EP.map(function (e) { return s(e.v); })), "verdict"),
      select("filter-flag", "Flag", distinct(flags), "flag"),
      select("filter-stratum", "Stratum", distinct(strata), "stratum"));
    var wrap = el("label", "filter", "Case ");
    var input = el("input");
    input.id = "filter-case";
    input.type = "search";
    input.placeholder = "case id contains";
    input.addEventListener("input", function () { state.caseText = input.value.trim().toLowerCase(); applyFilters(); });
    add(box, add(wrap, input));
    add(box, el("span", "count", ""));
  }

  function hasString(refs, text) {
    for (var i = 0; i < refs.length; i++) if (S[refs[i]] === text) return true;
    return false;
  }

  function matches(ep) {
    var run = D.runs[ep.r];
    if (state.method && run.label !== state.method) return false;
    if (state.dataset && run.dataset !== state.dataset) return false;
    if (state.verdict && s(ep.v) !== state.verdict) return false;
    if (state.flag && !hasString(ep.f, state.flag)) return false;
    if (state.stratum && !hasString(ep.g, state.stratum)) return false;
    if (state.caseText && String(s(ep.c)).toLowerCase().indexOf(state.caseText) < 0) return false;
    return true;
  }

  function applyFilters() {
    state.matches = [];
    for (var i = 0; i < EP.length; i++) if (matches(EP[i])) state.matches.push(i);
    state.page = 0;
    renderList();
  }

  // ------------------------------------------------------------------ episode list
  function pager(nPages) {
    var nav = el("div", "pager");
    var prev = el("button", null, "‹ previous");
    prev.id = "page-prev";
    prev.disabled = state.page === 0;
    prev.addEventListener("click", function () { state.page -= 1; renderList(); });
    var next = el("button", null, "next ›");
    next.id = "page-next";
    next.disabled = state.page >= nPages - 1;
    next.addEventListener("click", function () { state.page += 1; renderList(); });
    return add(nav, prev, el("span", null, "page " + (state.page + 1) + " of " + Math.max(nPages, 1)), next);
  }

  function renderList() {
    var box = document.getElementById("episode-list");
    clear(box);
    var total = state.matches.length;
    document.querySelector("#filters .count").textContent =
      total + " of " + EP.length + " episodes";
    var nPages = Math.ceil(total / PAGE_SIZE);
    var table = el("table", "episodes");
    var head = el("tr");
    ["method", "dataset", "case", "rep.", "verdict", "answer", "target", "turns", "flags"]
      .forEach(function (h) { add(head, el("th", null, h)); });
    add(table, add(el("thead"), head));
    var body = el("tbody");
    var first = state.page * PAGE_SIZE;
    state.matches.slice(first, first + PAGE_SIZE).forEach(function (i) {
      var ep = EP[i];
      var tr = el("tr", "episode-row verdict-" + s(ep.v));
      tr.tabIndex = 0;
      tr.dataset.episode = String(i);
      [label(ep), D.runs[ep.r].dataset, s(ep.c), ep.i, s(ep.v), s(ep.a), s(ep.t), num(ep.n[0]),
       ep.f.map(function (f) { return S[f]; }).join(", ")]
        .forEach(function (c) { add(tr, el("td", null, c === null ? "–" : c)); });
      tr.addEventListener("click", function () { showEpisode(i); });
      tr.addEventListener("keydown", function (ev) { if (ev.key === "Enter") showEpisode(i); });
      add(body, tr);
    });
    add(table, body);
    add(box, pager(nPages), table);
    if (total && document.getElementById("episode-detail").dataset.episode === undefined) {
      showEpisode(state.matches[0]);
    }
  }

  // ------------------------------------------------------------------ one episode
  function kv(dl, key, value) {
    if (value === null || value === undefined || value === "") return;
    add(dl, el("dt", null, key), el("dd", null, value));
  }

  function transcriptItem(item) {
    var kind = item[0], turn = item[1];
    var row = el("li", "item item-" + kind);
    var who, text;
    if (kind === "Q") { who = "Doctor asks"; text = s(item[2]); }
    else if (kind === "R") { who = "Doctor requests"; text = s(item[2]); }
    else if (kind === "D") { who = "Doctor's diagnosis"; text = s(item[2]); }
    else if (kind === "O") { who = "Doctor (" + s(item[2]) + ")"; text = s(item[3]); }
    else if (kind === "P") {
      who = item[3] === null ? "Patient" : "Patient (asked: " + s(item[3]) + ")";
      text = s(item[2]);
    } else if (kind === "M") {
      var av = availability(item[5]);
      who = "Result " + [s(item[2]), s(item[3])].filter(function (x) { return x; }).join(" ") +
        " [" + av + "]";
      text = s(item[5]) === "not_recorded" ? "not recorded" : s(item[4]);
      row.className += " availability-" + s(item[5]);
    } else { who = "Interface (" + s(item[2]) + ")"; text = s(item[3]); }
    add(row, el("span", "turn", turn === null ? "" : "turn " + turn), el("span", "who", who),
      el("div", "text", text === null ? "" : text));
    return row;
  }

  function transcript(ep) {
    var ol = el("ol", "transcript");
    ep.x.forEach(function (item) { add(ol, transcriptItem(item)); });
    return ol;
  }

  function evidenceBlock(ep) {
    var box = el("div", "evidence");
    if (!ep.e) { add(box, el("p", "muted", "No evidence interface in this log line.")); return box; }
    add(box, el("h4", null, "Objective (S0)"), el("p", null, s(ep.e[0])));
    if (ep.e[1]) {
      add(box, el("h4", null, "Candidate labels"));
      var ol = el("ol", "candidates");
      ep.e[1].forEach(function (c) { add(ol, el("li", null, s(c))); });
      add(box, ol);
    }
    add(box, el("h4", null, "Acquired observations"));
    if (!ep.e[2].length) add(box, el("p", "muted", "(none)"));
    var table = el("table", "observations");
    var head = el("tr");
    ["obs.", "source", "turn", "exam", "asked / examination", "content", "availability"]
      .forEach(function (h) { add(head, el("th", null, h)); });
    if (ep.e[2].length) add(table, head);
    ep.e[2].forEach(function (o) {
      var tr = el("tr", "availability-" + s(o[5]));
      [s(o[0]), s(o[1]), o[2], s(o[6]), s(o[3]), s(o[5]) === "not_recorded" ? "not recorded" : s(o[4]), availability(o[5])]
        .forEach(function (c) { add(tr, el("td", null, c === null ? "" : c)); });
      add(table, tr);
    });
    add(box, table);
    return box;
  }

  function interventions(ep) {
    if (ep.k === undefined) return null;
    var box = el("div", "cdeg");
    add(box, el("h4", null, "CDEG interventions (" + ep.k.length + "; " + ep.kn + " checks without one)"));
    var table = el("table", "interventions");
    var head = el("tr");
    ["turn", "kind", "reason", "proposed", "evidence", "action"].forEach(function (h) { add(head, el("th", null, h)); });
    add(table, head);
    ep.k.forEach(function (k) {
      var tr = el("tr");
      [k[0], s(k[1]), s(k[2]), s(k[3]), s(k[4]), s(k[5])].forEach(function (c) {
        add(tr, el("td", null, c === null ? "" : c));
      });
      add(table, tr);
    });
    return add(box, table);
  }

  function llmBlock(ep) {
    if (!ep.l) return null;
    var box = el("div", "llm");
    add(box, el("h4", null, "Model calls"));
    add(box, el("p", null, "calls " + num(ep.l[0]) + ", prompt tokens " + num(ep.l[1]) +
      ", completion tokens " + num(ep.l[2]) + ", latency " + num(ep.l[3], 2) + " s"));
    if (ep.la) {
      var table = el("table", "agents");
      var head = el("tr");
      ["agent", "calls", "prompt tokens", "completion tokens", "latency (s)"].forEach(function (h) { add(head, el("th", null, h)); });
      add(table, head);
      ep.la.forEach(function (a) {
        var tr = el("tr");
        [s(a[0]), a[1], a[2], a[3], num(a[4], 2)].forEach(function (c) { add(tr, el("td", "num", c)); });
        add(table, tr);
      });
      add(box, table);
    }
    if (ep.p) {
      var det = el("details", "prompts");
      add(det, el("summary", null, "Exact prompts (" + ep.p.length + " logged calls, --log-messages)"));
      ep.p.forEach(function (p) {
        var call = el("details", "call");
        add(call, el("summary", null, s(p[0]) + " · " + (s(p[1]) || "") + " · turn " + num(p[2])));
        p[3].forEach(function (m) { add(call, el("div", "role", s(m[0])), el("pre", "message", s(m[1]))); });
        (p[4] || []).forEach(function (r) { add(call, el("div", "role", "raw reply"), el("pre", "message raw", s(r))); });
        add(det, call);
      });
      add(box, det);
    }
    return box;
  }

  function componentValue(x) {
    if (x === null || x === undefined) return "–";
    return Number.isInteger(x) ? String(x) : Number(x).toFixed(3);
  }

  function componentsBlock(ep) {
    var box = el("div", "components");
    box.id = "episode-components";
    add(box, el("h4", null, "Reward components"));
    if (ep.rc === undefined) {
      add(box, el("p", "muted", "None: the line has no reward_components and its case could not be found to compute them."));
      return box;
    }
    var table = el("table", "components");
    var head = el("tr"), row = el("tr");
    D.meta.components.forEach(function (name, k) {
      add(head, el("th", "num", name));
      add(row, el("td", "num", componentValue(ep.rc[k])));
    });
    add(table, add(el("thead"), head), add(el("tbody"), row));
    return add(box, table);
  }

  function pairOf(i) {
    for (var p = 0; p < D.pairs.length; p++) {
      var rows = D.pairs[p].rows;
      for (var r = 0; r < rows.length; r++) {
        if (rows[r][0] === i || rows[r][1] === i) return [p, r];
      }
    }
    return null;
  }

  function showEpisode(i) {
    var ep = EP[i];
    var box = document.getElementById("episode-detail");
    clear(box);
    box.dataset.episode = String(i);
    add(box, el("h3", null, label(ep) + " · " + s(ep.c) + " · repetition " + ep.i));
    var dl = el("dl", "outcome");
    kv(dl, "verdict", s(ep.v));
    kv(dl, "answer", s(ep.a) === null ? "(no answer)" : s(ep.a));
    kv(dl, "scored answer", s(ep.sa));
    kv(dl, "target", s(ep.t));
    kv(dl, "scored by", s(ep.s) + (ep.ms === null ? "" : " (match score " + num(ep.ms, 1) + ")"));
    kv(dl, "judge verdict", s(ep.j));
    kv(dl, "answer status", s(ep.st));
    kv(dl, "turns / exams / invalid actions", ep.n.map(function (x) { return num(x); }).join(" / "));
    kv(dl, "flags", ep.f.map(function (f) { return S[f]; }).join(", "));
    kv(dl, "strata", ep.g.map(function (g) { return S[g]; }).join("; "));
    kv(dl, "backend error", s(ep.err));
    kv(dl, "log line", s(ep.src));
    add(box, dl, componentsBlock(ep));
    var pair = pairOf(i);
    if (pair) {
      var button = el("button", "side-button", "Show side by side");
      button.id = "show-side-by-side";
      button.addEventListener("click", function () { showPair(pair[0], pair[1]); });
      add(box, button);
    }
    add(box, el("h4", null, "Transcript (as the doctor saw it)"), transcript(ep),
      el("h4", null, "Evidence interface e_T"), evidenceBlock(ep), interventions(ep), llmBlock(ep));
    if (timings.firstEpisode === undefined) timings.firstEpisode = performance.now();
  }

  // ------------------------------------------------------------------ side by side
  var pairState = { pair: 0, row: 0 };

  function byTurn(ep) {
    var turns = {};
    ep.x.forEach(function (item) {
      var t = item[1] === null ? 0 : item[1];
      (turns[t] = turns[t] || []).push(item);
    });
    return turns;
  }

  function renderPairControls() {
    var box = document.getElementById("pair-controls");
    if (!D.pairs.length) { add(box, el("p", "muted", "No compared runs: give logs of two methods on one dataset.")); return; }
    var sel = el("select");
    sel.id = "pair-select";
    D.pairs.forEach(function (p, k) {
      var o = el("option", null, D.runs[p.method].label + " vs " + D.runs[p.base].label + " on " + D.runs[p.base].dataset);
      o.value = String(k);
      add(sel, o);
    });
    var only = el("input");
    only.type = "checkbox";
    only.id = "pair-differing";
    function step(delta) {
      var rows = D.pairs[pairState.pair].rows;
      for (var r = pairState.row + delta; r >= 0 && r < rows.length; r += delta) {
        if (!only.checked || rows[r][2] !== null) { pairState.row = r; renderPair(); return; }
      }
    }
    var prev = el("button", null, "‹ previous case");
    prev.id = "pair-prev";
    prev.addEventListener("click", function () { step(-1); });
    var next = el("button", null, "next case ›");
    next.id = "pair-next";
    next.addEventListener("click", function () { step(1); });
    sel.addEventListener("change", function () { pairState.pair = Number(sel.value); pairState.row = 0; renderPair(); });
    add(box, add(el("label", "filter", "Pair "), sel), prev, next,
      add(el("label", "filter"), only, document.createTextNode(" only cases whose acquisition differs")));
    box.sync = function () { sel.value = String(pairState.pair); };
  }

  function showPair(p, r) {
    pairState.pair = p; pairState.row = r;
    var box = document.getElementById("pair-controls");
    if (box.sync) box.sync();
    renderPair();
    document.getElementById("side-by-side").scrollIntoView();
  }

  function renderPair() {
    var view = document.getElementById("pair-view");
    clear(view);
    if (!D.pairs.length) return;
    var pair = D.pairs[pairState.pair];
    var row = pair.rows[pairState.row];
    if (!row) { add(view, el("p", "muted", "These runs share no episode.")); return; }
    var a = EP[row[0]], b = EP[row[1]];
    add(view, el("p", "pair-position", "case " + (pairState.row + 1) + " of " + pair.rows.length +
      ": " + s(a.c) + ", repetition " + a.i));
    add(view, el("p", "divergence", row[2] === null
      ? "Their questions and requested exams are the same at every turn."
      : "First turn where their questions or requested exams differ: turn " + row[2] + "."));
    var ta = byTurn(a), tb = byTurn(b);
    var turns = Object.keys(ta).concat(Object.keys(tb)).map(Number);
    turns = distinct(turns).sort(function (x, y) { return x - y; });
    var table = el("table", "pair");
    var head = el("tr");
    add(head, el("th", null, "turn"));
    [a, b].forEach(function (ep) {
      add(head, el("th", null, label(ep) + ": " + s(ep.v) + " (answer: " + (s(ep.a) || "none") + ")"));
    });
    add(table, head);
    turns.forEach(function (t) {
      var tr = el("tr", t === row[2] ? "diverge" : null);
      if (t === row[2]) tr.id = "diverge-turn";
      add(tr, el("td", "turn", t));
      [ta, tb].forEach(function (turnsOf) {
        var td = el("td");
        var ol = el("ol", "transcript");
        (turnsOf[t] || []).forEach(function (item) { add(ol, transcriptItem(item)); });
        add(td, ol);
        add(tr, td);
      });
      add(table, tr);
    });
    add(view, table);
  }

  renderHeader();
  renderSummary();
  renderFilters();
  renderPairControls();
  applyFilters();
  renderPair();
  timings.ready = performance.now();
  document.body.dataset.ready = "1";
})();
