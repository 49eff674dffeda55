// A job's page: its state from the server's snapshot stream, its logs (followed live, or a page
// at a time, or searched on the server), its metrics plotted with uPlot, and the actions.
"use strict";
(function () {
  const { el, row, fill, initial, stream, query, since, ageOf } = window.t9k;
  const start = initial();
  const key = start.key;
  const base = "/api/job/" + encodeURIComponent(key.kind) + "/" + encodeURIComponent(key.name);
  const ns = { namespace: key.namespace };
  const MAX_LINES = 5000;
  let job = start.job;

  // ---------------------------------------------------------------- the job
  function text(id, value) { document.getElementById(id).textContent = value === null || value === undefined ? "" : String(value); }

  // "2026-11-27T18:00:00Z (3m20s ago)", the age counted on by the page.
  function createdValue(j) {
    const span = el("span", j.created);
    if (j.created_at !== null && j.created_at !== undefined) span.append(" (", since(j.created_at), " ago)");
    return span;
  }
  function render(j) {
    job = j;
    const problem = document.getElementById("problem");
    problem.textContent = j.problem || "";
    problem.hidden = !j.problem;
    const phase = document.getElementById("phase");
    phase.textContent = j.phase;
    phase.className = "phase phase-" + j.phase;
    document.getElementById("why").hidden = !j.why;
    text("why-text", j.why || "");
    const summary = [["Phase", j.phase], ["Ready", j.ready], ["Restarts", j.restarts], ["Backoff", j.backoff],
      ["Created", createdValue(j)], ["Run mode", j.run_mode]];
    if (j.namespace) summary.push(["Namespace", j.namespace]);
    if (j.queue !== null) summary.push(["Queue", j.queue]);
    if (j.priority !== null) summary.push(["Priority", j.priority]);
    if (j.run_dir) summary.push(["Run dir", j.run_dir]);
    if (j.pod_group) summary.push(["PodGroup", j.pod_group]);
    if (j.tensorboard) summary.push(["TensorBoard", j.tensorboard.object + (j.tensorboard.note ? ": " + j.tensorboard.note : "")]);
    const dl = document.getElementById("summary");
    dl.replaceChildren(...summary.flatMap(function ([k, v]) {
      const dd = el("dd");
      if (v instanceof Node) dd.append(v); else dd.textContent = v === null || v === undefined ? "" : String(v);
      return [el("dt", k), dd];
    }));
    if (j.tensorboard && j.tensorboard.url) {
      // --tensorboard-url: the server checked its scheme (http/https) and encoded the names.
      const a = el("a", "open TensorBoard");
      a.href = j.tensorboard.url;
      a.id = "tensorboard-link";
      a.rel = "noopener noreferrer";
      a.target = "_blank";
      const dd = el("dd");
      dd.append(a);
      dl.append(el("dt", ""), dd);
    }
    document.getElementById("spec").replaceChildren(...j.spec.map((line) => el("li", line)));
    fill(document.querySelector("#replicas tbody"), j.replicas.map(function (r) {
      const tr = row([r.name, window.t9k.phaseBadge(r.phase), r.restarts, r.exit_code, r.reason, r.node || "-"]);
      tr.dataset.replica = r.name; tr.dataset.phase = r.phase;
      return tr;
    }));
    fill(document.querySelector("#conditions tbody"), j.conditions.map((c) => row([c.type, c.status, c.reason, c.message])));
    fill(document.querySelector("#events tbody"), j.events.map((e) => row([e.when !== null && e.when !== undefined ? since(e.when) : e.at, e.type, e.reason, e.object, e.message])));
    document.getElementById("timeline").replaceChildren(...j.timeline.map(function (t) {
      const li = el("li");
      li.append(el("time", t.at), " ", el("b", t.what), " ", el("span", t.event));
      return li;
    }));
    text("describe", j.describe.join("\n"));
    renderActions(j.actions);
    renderSources(j.logs);
  }

  // ---------------------------------------------------------------- actions
  let pending = null;
  function renderActions(a) {
    document.getElementById("actions").hidden = !a.allowed;
    if (!a.allowed) return;
    document.getElementById("act-pause").disabled = !a.pause;
    document.getElementById("act-resume").disabled = !a.resume;
    document.getElementById("scale-box").hidden = !a.scale;
    const input = document.getElementById("scale-replicas");
    if (a.scale && document.activeElement !== input) {
      if (a.min_replicas !== null) input.min = a.min_replicas;
      if (a.max_replicas !== null) input.max = a.max_replicas;
      if (!input.value && a.expected_replicas !== null) input.value = a.expected_replicas;
    }
  }
  const what = key.kind + " " + key.name + (key.namespace ? " in namespace " + key.namespace : "");
  const warnings = {
    pause: "Pause " + what + "? Its replicas are stopped until it is resumed.",
    resume: "Resume " + what + "? Its replicas are started again.",
    scale: "Scale " + what + " to REPLICAS replicas (spec.elastic.expectedReplicas)?",
    delete: "Delete " + what + "? Its replicas are stopped; this cannot be undone.",
  };
  const dialog = document.getElementById("confirm");
  for (const button of document.querySelectorAll("#actions button[data-verb]")) {
    button.addEventListener("click", function () {
      const verb = button.dataset.verb;
      const replicas = document.getElementById("scale-replicas").value;
      pending = { verb: verb, replicas: replicas };
      text("confirm-text", warnings[verb].replace("REPLICAS", replicas));
      dialog.showModal();
    });
  }
  // The action is taken from the Confirm button itself, not from the dialog's "close" event: that
  // event is queued, so a Cancel's close could arrive after the next opening and drop its action.
  // Each opening sets `pending` afresh; Cancel and Escape just close.
  document.getElementById("confirm-ok").addEventListener("click", function (ev) {
    ev.preventDefault();
    const act = pending;
    pending = null;
    dialog.close("ok");
    if (!act) return;
    text("action-result", act.verb + "…");
    const body = act.verb === "scale" ? JSON.stringify({ replicas: act.replicas }) : "{}";
    fetch(base + "/actions/" + act.verb + query(ns), {
      method: "POST", headers: { "X-T9k-Dashboard": "1", "Content-Type": "application/json" }, body: body,
    }).then((r) => r.json().then((data) => [r.status, data]))
      .then(function ([code, data]) { outcome(code, data); })
      .catch(function (err) { text("action-result", "failed: " + err); });
  });
  // An action runs on the server on its own: 200 or an error says how it ended, 202 that it still
  // runs (a delete waits for the replicas' grace period), and its outcome is asked for each second.
  function outcome(code, data) {
    if (code === 202 || data.state === "running") {
      text("action-result", data.verb + " running… (the page stays live meanwhile)");
      setTimeout(function () {
        fetch("/api/actions/" + encodeURIComponent(data.action)).then((r) => r.json().then((d) => [r.status, d]))
          .then(function ([c, d]) { outcome(c === 200 ? (d.state === "failed" ? 409 : c) : c, d); })
          .catch(function (err) { text("action-result", "failed: " + err); });
      }, 1000);
      return;
    }
    text("action-result", data.state === "done" ? data.message : "refused: " + data.error);
  }

  // ---------------------------------------------------------------- logs
  const logBox = document.getElementById("log");
  const sourceSelect = document.getElementById("log-source");
  const filter = document.getElementById("log-search");
  const status = document.getElementById("log-status");
  let sources = [];
  let follower = null;
  let mode = "live";
  let page = null;

  function renderSources(list) {
    const labels = list.map((s) => s.label).join("\n");
    if (labels === sources.map((s) => s.label).join("\n")) return;
    const chosen = sourceSelect.selectedIndex >= 0 && sources[sourceSelect.selectedIndex] ? sources[sourceSelect.selectedIndex].label : null;
    sources = list;
    sourceSelect.replaceChildren(...list.map(function (s, i) { const o = el("option", s.label); o.value = String(i); return o; }));
    const again = list.findIndex((s) => s.label === chosen);
    sourceSelect.selectedIndex = again >= 0 ? again : 0;
    updateDownload();
  }
  function logParams(extra) {
    const s = sources[sourceSelect.selectedIndex] || {};
    return query(Object.assign({ namespace: key.namespace, type: s.type, index: s.index, container: s.container }, extra || {}));
  }
  function updateDownload() { document.getElementById("log-download").href = base + "/logs/download" + logParams(); }
  function matches(line) { const f = filter.value.toLowerCase(); return !f || line.toLowerCase().includes(f); }
  function addLine(line, number) {
    const div = el("div", null, "line");
    if (number !== undefined) div.append(el("span", number, "n"));
    div.append(document.createTextNode(line));
    div.dataset.text = line;
    div.hidden = !matches(line);
    logBox.appendChild(div);
  }
  function clearLog() { logBox.replaceChildren(); }
  function setMode(m) {
    mode = m;
    document.getElementById("log-live").className = m === "live" ? "on" : "";
    if (follower) { follower.close(); follower = null; }
  }
  function follow() {
    setMode("live");
    clearLog();
    text("log-page-label", "");
    status.textContent = "following the log as it is written (the last 1000 lines first)";
    follower = new EventSource(base + "/logs/follow" + logParams());
    follower.addEventListener("lines", function (ev) {
      const stick = logBox.scrollTop + logBox.clientHeight >= logBox.scrollHeight - 30;
      for (const line of JSON.parse(ev.data).lines) addLine(line);
      while (logBox.childElementCount > MAX_LINES) logBox.firstElementChild.remove();
      if (stick) logBox.scrollTop = logBox.scrollHeight;
    });
    follower.addEventListener("end", function () {
      status.textContent = "the job has finished: its log is complete";
      follower.close(); follower = null;
    });
    // A reconnection (the browser makes one by itself) starts again from the last lines.
    follower.onopen = function () { clearLog(); };
    follower.onerror = function () { status.textContent = "the log stream was interrupted: reconnecting"; };
  }
  function showPage(number) {
    setMode("page");
    status.textContent = "loading…";
    fetch(base + "/logs/page" + logParams({ page: number })).then((r) => r.json()).then(function (data) {
      if (data.error) { status.textContent = data.error; return; }
      page = data;
      clearLog();
      data.lines.forEach((line, i) => addLine(line, data.first + i));
      const last = data.first + data.lines.length - 1;
      text("log-page-label", "page " + (data.page + 1) + " of " + data.pages + " (lines " + (data.lines.length ? data.first + "–" + last : "none") + " of " + data.total + ")");
      status.textContent = "a page of the log as it was when loaded";
      logBox.scrollTop = 0;
    });
  }
  function searchAll() {
    const q = filter.value.trim();
    if (!q) { status.textContent = "type what to search for first"; return; }
    setMode("search");
    status.textContent = "searching…";
    fetch(base + "/logs/search" + logParams({ q: q })).then((r) => r.json()).then(function (data) {
      if (data.error) { status.textContent = data.error; return; }
      clearLog();
      for (const m of data.matches) addLine(m.line, m.number);
      text("log-page-label", "");
      status.textContent = data.matches.length + " line(s) of " + data.read + " match" + (data.more ? " (the first " + data.matches.length + " shown)" : "") + "; choose Live to follow again";
    });
  }
  filter.addEventListener("input", function () {
    for (const div of logBox.children) div.hidden = !matches(div.dataset.text);
  });
  filter.addEventListener("keydown", function (ev) { if (ev.key === "Enter") searchAll(); });
  document.getElementById("log-search-all").addEventListener("click", searchAll);
  document.getElementById("log-live").addEventListener("click", follow);
  document.getElementById("log-first").addEventListener("click", () => showPage(0));
  document.getElementById("log-prev").addEventListener("click", function () {
    showPage(mode === "page" && page ? Math.max(0, page.page - 1) : -1);
  });
  document.getElementById("log-next").addEventListener("click", function () {
    if (mode === "page" && page && page.page + 1 < page.pages) showPage(page.page + 1); else follow();
  });
  sourceSelect.addEventListener("change", function () { updateDownload(); if (mode === "page") showPage(0); else follow(); });

  // ---------------------------------------------------------------- metrics
  const metrics = { epochs: [], series: {} };   // series name -> {epoch: value}
  let plot = null;
  let plotKeys = "";
  function seriesName(p, replicas) { return replicas > 1 && p.replica ? p.replica + " " + p.metric : p.metric; }
  const raw = [];
  function addPoints(points) {
    for (const p of points) raw.push(p);
    const replicas = new Set(raw.map((p) => p.replica)).size;
    metrics.series = {};
    const epochs = new Set();
    for (const p of raw) {
      const name = seriesName(p, replicas);
      (metrics.series[name] = metrics.series[name] || {})[p.epoch] = p.value;
      epochs.add(p.epoch);
    }
    metrics.epochs = Array.from(epochs).sort((a, b) => a - b);
    drawMetrics();
  }
  function isLoss(name) { return name.toLowerCase().includes("loss"); }
  function drawMetrics() {
    const names = Object.keys(metrics.series).sort((a, b) => (isLoss(b) - isLoss(a)) || a.localeCompare(b));
    document.getElementById("metrics-empty").hidden = names.length > 0;
    const head = document.querySelector("#metrics thead tr");
    head.replaceChildren(el("th", "epoch"), ...names.map((n) => el("th", n)));
    fill(document.querySelector("#metrics tbody"), metrics.epochs.map((e) => row([e, ...names.map((n) => metrics.series[n][e] === undefined ? "" : metrics.series[n][e])])));
    if (!names.length || typeof uPlot === "undefined") return;
    const data = [metrics.epochs, ...names.map((n) => metrics.epochs.map((e) => metrics.series[n][e] === undefined ? null : metrics.series[n][e]))];
    const colors = ["#c0392b", "#2c7fb8", "#27ae60", "#8e44ad", "#d35400", "#16a085", "#7f8c8d", "#2c3e50"];
    const box = document.getElementById("plot");
    if (plot && plotKeys === names.join("\n")) { plot.setData(data); window.t9kDashboard.plot = plot; return; }
    if (plot) plot.destroy();
    plotKeys = names.join("\n");
    const hasLoss = names.some(isLoss), hasOther = names.some((n) => !isLoss(n));
    const axes = [{ label: "epoch", incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000] }];
    if (hasLoss) axes.push({ scale: "loss", label: "loss" });
    if (hasOther) axes.push({ scale: "acc", label: "accuracy", side: 1, grid: { show: !hasLoss } });
    plot = new uPlot({
      width: Math.max(320, box.clientWidth || 640), height: 260,
      scales: { x: { time: false } },
      series: [{ label: "epoch" }, ...names.map((n, i) => ({ label: n, scale: isLoss(n) ? "loss" : "acc", stroke: colors[i % colors.length], width: 2, points: { show: true, size: 6 } }))],
      axes: axes,
    }, data, box);
    window.t9kDashboard.plot = plot;
  }
  window.t9kDashboard = { metrics: metrics, plot: null };
  function followMetrics() {
    const source = new EventSource(base + "/metrics/follow" + query(ns));
    source.onopen = function () { raw.length = 0; };   // each connection sends every point from the start
    source.addEventListener("points", (ev) => addPoints(JSON.parse(ev.data).points));
    source.addEventListener("end", () => source.close());
  }

  // ---------------------------------------------------------------- start
  render(job);
  follow();
  followMetrics();
  stream(base + "/events" + query(ns), {
    job: render,
    gone: function (data) { const p = document.getElementById("problem"); p.textContent = data.problem; p.hidden = false; },
    problem: function (data) { const p = document.getElementById("problem"); p.textContent = data.problem; p.hidden = false; },
  });
})();
