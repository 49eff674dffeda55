// Shared by the dashboard's pages. Every string from a job or a log is written with textContent
// (el() below), never as HTML, so a name or a line with <script> shows as text.
"use strict";
window.t9k = (function () {
  function el(tag, text, cls) {
    const node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = String(text);
    if (cls) node.className = cls;
    return node;
  }
  function row(cells) {
    const tr = document.createElement("tr");
    for (const c of cells) {
      const td = document.createElement("td");
      if (c instanceof Node) td.appendChild(c); else td.textContent = c === null || c === undefined ? "" : String(c);
      tr.appendChild(td);
    }
    return tr;
  }
  function fill(tbody, rows) {
    tbody.replaceChildren(...rows);
  }
  function initial() {
    return JSON.parse(document.getElementById("initial").textContent);
  }
  function phaseBadge(phase, id) {
    const span = el("span", phase, "phase phase-" + phase);
    if (id) span.id = id;
    return span;
  }
  // An EventSource that says on the page whether it is live.
  function stream(url, handlers) {
    const live = document.getElementById("live");
    const source = new EventSource(url);
    source.onopen = function () { if (live) { live.textContent = "live"; live.className = "live on"; } };
    source.onerror = function () { if (live) { live.textContent = "reconnecting…"; live.className = "live off"; } };
    for (const [name, fn] of Object.entries(handlers)) {
      source.addEventListener(name, function (ev) { fn(JSON.parse(ev.data)); });
    }
    return source;
  }
  // show.human_age's words (kubectl's AGE column): 42s, 3m20s, 25m, 5h, 3d. The server sends
  // times (epoch seconds); the page counts the ages on, so nothing is sent just because time passed.
  function humanAge(seconds) {
    const s = Math.max(0, Math.floor(seconds));
    if (s < 120) return s + "s";
    if (s < 600) return Math.floor(s / 60) + "m" + (s % 60) + "s";
    if (s < 3 * 3600) return Math.floor(s / 60) + "m";
    if (s < 48 * 3600) return Math.floor(s / 3600) + "h";
    return Math.floor(s / 86400) + "d";
  }
  function ageOf(epoch) {
    return epoch === null || epoch === undefined ? "-" : humanAge(Date.now() / 1000 - epoch);
  }
  // Every element with data-since (epoch seconds) shows its age, counted on each second.
  function tickAges() {
    for (const node of document.querySelectorAll("[data-since]")) node.textContent = ageOf(Number(node.dataset.since));
  }
  setInterval(tickAges, 1000);
  function since(epoch) {
    const span = el("span", ageOf(epoch));
    if (epoch !== null && epoch !== undefined) span.dataset.since = String(epoch);
    return span;
  }
  function query(params) {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(params)) if (v !== null && v !== undefined && v !== "") q.set(k, v);
    const s = q.toString();
    return s ? "?" + s : "";
  }
  return { el, row, fill, initial, phaseBadge, stream, query, humanAge, ageOf, since, tickAges };
})();
