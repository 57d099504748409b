// npa-workflow console: live updates by server-sent events. The pages read fine without this script;
// with it, the run page follows the run (one stream per page, fed by the server's one watcher per run)
// and the log page follows a running step's log.
(function () {
  "use strict";
  var CLASSES = ["st-SUCCEEDED", "st-FAILED", "st-RUNNING", "st-CANCELLED", "st-none"];

  function setStatus(node, status) {
    var wanted = status ? "st-" + status : "st-none";
    CLASSES.forEach(function (c) { if (c !== wanted) node.classList.remove(c); });
    node.classList.add(wanted);
  }

  function applyRun(update) {
    if (update.missing) return;
    var statuses = update.statuses || {};
    document.querySelectorAll("svg.graph g.node[data-state]").forEach(function (node) {
      var name = node.getAttribute("data-state");
      setStatus(node, statuses[name]);
    });
    document.querySelectorAll("svg.graph [data-status-of]").forEach(function (text) {
      text.textContent = statuses[text.getAttribute("data-status-of")] || "not reached";
    });
    var rounds = update.rounds || {};
    document.querySelectorAll("svg.graph [data-round-of]").forEach(function (text) {
      var value = rounds[text.getAttribute("data-round-of")];
      if (value !== undefined) text.textContent = value;
    });
    var sections = update.sections || {};
    Object.keys(sections).forEach(function (name) {
      var el = document.querySelector('[data-section="' + name + '"]');
      if (el) el.innerHTML = sections[name];
    });
    document.body.setAttribute("data-run-status", update.status || "");
  }

  var run = document.getElementById("run");
  if (run && window.EventSource) {
    var source = new EventSource(run.getAttribute("data-events"));
    source.addEventListener("run", function (e) { applyRun(JSON.parse(e.data)); });
    source.addEventListener("open", function () { document.body.setAttribute("data-live", "yes"); });
  }

  var log = document.getElementById("log");
  if (log && log.getAttribute("data-follow") && window.EventSource) {
    var follow = new EventSource(log.getAttribute("data-follow"));
    follow.addEventListener("log", function (e) {
      var atBottom = log.scrollTop + log.clientHeight >= log.scrollHeight - 4;
      log.appendChild(document.createTextNode(JSON.parse(e.data)));
      if (atBottom) log.scrollTop = log.scrollHeight;
    });
    follow.addEventListener("end", function () {
      follow.close();
      var state = document.getElementById("follow-state");
      if (state) state.textContent = "the step ended";
      document.body.setAttribute("data-log-ended", "yes");
    });
  }
})();
