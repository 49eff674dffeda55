// The job list: rows from the server's snapshot stream, filtered here by phase, kind and name.
"use strict";
(function () {
  const { el, row, fill, initial, phaseBadge, stream, query, since } = window.t9k;
  const body = document.querySelector("#jobs tbody");
  const phase = document.getElementById("filter-phase");
  const kind = document.getElementById("filter-kind");
  const name = document.getElementById("filter-name");
  const problem = document.getElementById("problem");
  let jobs = initial().jobs;
  // Enter in the name box filters as typing does (the form is never sent).
  document.getElementById("filters").addEventListener("submit", function (ev) { ev.preventDefault(); render(); });

  function link(j) {
    const a = el("a", j.name);
    a.href = "/job/" + encodeURIComponent(j.kind) + "/" + encodeURIComponent(j.name) + query({ namespace: j.namespace });
    return a;
  }
  function render() {
    const p = phase.value, k = kind.value, n = name.value.trim().toLowerCase();
    const shown = jobs.filter((j) => (!p || j.phase === p) && (!k || j.kind === k) && (!n || j.name.toLowerCase().includes(n)));
    const anyNs = jobs.some((j) => j.namespace);
    const anyQueue = jobs.some((j) => j.queue !== null || j.priority !== null);
    document.querySelectorAll(".ns").forEach((c) => { c.hidden = !anyNs; });
    document.querySelectorAll(".q").forEach((c) => { c.hidden = !anyQueue; });
    fill(body, shown.map(function (j) {
      const tr = row([j.kind, link(j), j.namespace || "", phaseBadge(j.phase), j.ready, j.restarts, since(j.created),
        j.queue === null ? "" : j.queue, j.priority === null ? "" : j.priority, j.why || ""]);
      tr.dataset.phase = j.phase; tr.dataset.kind = j.kind; tr.dataset.name = j.name;
      tr.children[2].className = "ns"; tr.children[2].hidden = !anyNs;
      tr.children[7].className = "q"; tr.children[7].hidden = !anyQueue;
      tr.children[8].className = "q"; tr.children[8].hidden = !anyQueue;
      if (j.why) tr.children[9].className = "why";  // an empty cell is not tinted
      return tr;
    }));
    document.getElementById("count").textContent = shown.length + " of " + jobs.length;
    document.getElementById("empty").hidden = jobs.length > 0;
  }
  for (const input of [phase, kind]) input.addEventListener("change", render);
  name.addEventListener("input", render);
  stream("/api/jobs/events", {
    jobs: function (data) {
      jobs = data.jobs;
      problem.textContent = data.problem || "";
      problem.hidden = !data.problem;
      render();
    },
    problem: function (data) { problem.textContent = data.problem; problem.hidden = false; },
  });
  render();
})();
