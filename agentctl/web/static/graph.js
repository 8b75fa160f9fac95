// agentctl dashboard: the run page's task graph, laid out left to right by dagre
// (dagre.min.js, vendored beside this file) from the document in <script id="graph-data">,
// the same one /runs/RUN/graph.json serves. Groups (foreach, matrix, loop children and
// sub-workflow steps) draw as boxes around their children and collapse into their
// aggregate task; what is collapsed survives live refreshes. Clicking a task opens it.
(function () {
  "use strict";
  var SVG = "http://www.w3.org/2000/svg";
  // A group with more children than this starts collapsed (a 1,000-item foreach is one box).
  var OPEN_UP_TO = 12;
  var collapsed = {};

  function el(name, attrs, parent) {
    var node = document.createElementNS(SVG, name);
    Object.keys(attrs).forEach(function (key) { node.setAttribute(key, attrs[key]); });
    if (parent) { parent.appendChild(node); }
    return node;
  }
  function text(parent, attrs, value) {
    var t = el("text", attrs, parent);
    t.textContent = value;
    return t;
  }
  function cut(value, size) {
    return value.length > size ? value.slice(0, size - 1) + "…" : value;
  }
  function openTask(id) {
    var details = document.getElementById("task-" + id);
    if (!details) { return; }
    details.open = true;
    details.scrollIntoView({ block: "start" });
    if (window.history && window.history.replaceState) {
      window.history.replaceState(null, "", "#task-" + id);
    }
  }

  function draw() {
    var holder = document.getElementById("graph");
    var source = document.getElementById("graph-data");
    if (!holder || !source || !window.dagre) { return; }
    var data = JSON.parse(source.textContent);
    var byId = {};
    data.nodes.forEach(function (n) { byId[n.id] = n; });
    var groups = {};
    data.groups.forEach(function (g) {
      groups[g.id] = g;
      g.counts = {};
      if (!(g.id in collapsed)) { collapsed[g.id] = g.size > OPEN_UP_TO; }
    });
    function parentOf(id) { var n = byId[id]; return n ? n.group : null; }
    // The box that stands for a task: itself, or the outermost collapsed group holding it.
    function shownAs(id) {
      var shown = id;
      for (var g = parentOf(id); g; g = parentOf(g)) {
        if (collapsed[g]) { shown = g; }
      }
      return shown;
    }
    data.nodes.forEach(function (n) {
      for (var g = n.group; g; g = parentOf(g)) {
        if (groups[g]) { groups[g].counts[n.state] = (groups[g].counts[n.state] || 0) + 1; }
      }
    });

    var graph = new window.dagre.graphlib.Graph({ compound: true });
    graph.setGraph({ rankdir: "LR", nodesep: 12, ranksep: 36, marginx: 10, marginy: 24 });
    graph.setDefaultEdgeLabel(function () { return {}; });
    var visible = data.nodes.filter(function (n) { return shownAs(n.id) === n.id; });
    visible.forEach(function (n) {
      var label = cut(n.label, 26);
      var folded = groups[n.id] && collapsed[n.id];
      var wide = Math.max(7.2 * label.length, 6 * Math.min(34, n.state.length));
      var width = Math.max(96, Math.min(230, wide + 24)) + (folded ? 34 : 0);
      graph.setNode(n.id, { width: width, height: 38, task: n, label: label, folded: folded });
    });
    Object.keys(groups).forEach(function (id) {
      if (collapsed[id] || shownAs(id) !== id) { return; }
      graph.setNode("cluster:" + id, { group: groups[id] });
    });
    visible.forEach(function (n) {
      if (n.group && groups[n.group] && !collapsed[n.group]) {
        graph.setParent(n.id, "cluster:" + n.group);
      }
    });
    Object.keys(groups).forEach(function (id) {
      var outer = parentOf(id);
      if (graph.hasNode("cluster:" + id) && outer && graph.hasNode("cluster:" + outer)) {
        graph.setParent("cluster:" + id, "cluster:" + outer);
      }
    });
    var drawn = {};
    data.edges.forEach(function (e) {
      var a = shownAs(e.from);
      var b = shownAs(e.to);
      if (a === b || drawn[a + "\n" + b]) { return; }
      drawn[a + "\n" + b] = true;
      graph.setEdge(a, b);
    });
    window.dagre.layout(graph);

    var size = graph.graph();
    var svg = el("svg", {
      width: Math.ceil(size.width), height: Math.ceil(size.height),
      viewBox: "0 0 " + Math.ceil(size.width) + " " + Math.ceil(size.height),
      role: "img", "aria-label": "task graph of " + data.nodes.length + " tasks",
    });
    var defs = el("defs", {}, svg);
    var marker = el("marker", { id: "arrow", viewBox: "0 0 10 10", refX: "10", refY: "5",
      markerWidth: "7", markerHeight: "7", orient: "auto-start-reverse" }, defs);
    el("path", { d: "M 0 0 L 10 5 L 0 10 z", class: "garrow" }, marker);

    graph.nodes().forEach(function (id) {
      var box = graph.node(id);
      if (!box.group) { return; }
      var g = box.group;
      var frame = el("g", { class: "gcluster", "data-group": g.id }, svg);
      el("rect", { x: box.x - box.width / 2, y: box.y - box.height / 2, width: box.width,
        height: box.height, rx: 8 }, frame);
      var toggle = text(frame, { x: box.x - box.width / 2 + 6, y: box.y - box.height / 2 - 6,
        class: "gtoggle", role: "button", tabindex: "0" },
        "▾ " + cut(g.label, 30) + " · " + g.size + " " + (g.kind === "subworkflow" ? "steps" : "items"));
      el("title", {}, toggle).textContent = "collapse " + g.id;
      toggle.addEventListener("click", function () { collapsed[g.id] = true; draw(); });
    });
    graph.edges().forEach(function (ref) {
      var points = graph.edge(ref).points;
      var d = points.map(function (p, i) { return (i ? "L" : "M") + p.x.toFixed(1) + " " + p.y.toFixed(1); });
      el("path", { class: "gedge", d: d.join(" "), "data-from": ref.v, "data-to": ref.w,
        "marker-end": "url(#arrow)" }, svg);
    });
    graph.nodes().forEach(function (id) {
      var box = graph.node(id);
      if (box.group) { return; }
      var n = box.task;
      var left = box.x - box.width / 2;
      var top = box.y - box.height / 2;
      var node = el("g", { class: "gnode s-" + n.state, "data-id": n.id, "data-state": n.state,
        "data-label": n.label, role: "link", tabindex: "0" }, svg);
      el("title", {}, node).textContent = n.id + " — " + n.state.replace(/_/g, " ");
      el("rect", { x: left, y: top, width: box.width, height: box.height, rx: 6 }, node);
      text(node, { x: left + 8, y: top + 15, class: "glabel" }, box.label);
      var sub = n.state.replace(/_/g, " ");
      if (box.folded) {
        var counts = groups[n.id].counts;
        sub = Object.keys(counts).sort().map(function (s) {
          return counts[s] + " " + s.replace(/_/g, " ");
        }).join(", ");
      }
      text(node, { x: left + 8, y: top + 30, class: "gstate" }, cut(sub, 34));
      node.addEventListener("click", function () { openTask(n.id); });
      node.addEventListener("keydown", function (event) {
        if (event.key === "Enter") { openTask(n.id); }
      });
      if (box.folded) {
        var expand = el("g", { class: "gexpand", role: "button", tabindex: "0" }, node);
        el("rect", { x: left + box.width - 30, y: top + 7, width: 24, height: 24, rx: 4 }, expand);
        text(expand, { x: left + box.width - 18, y: top + 24, "text-anchor": "middle" }, "+");
        el("title", {}, expand).textContent = "expand " + groups[n.id].size + " tasks";
        expand.addEventListener("click", function (event) {
          event.stopPropagation();
          collapsed[n.id] = false;
          draw();
        });
      }
    });
    holder.replaceChildren(svg);
    holder.dataset.drawn = String(Number(holder.dataset.drawn || 0) + 1);
  }

  window.agentctlGraph = { draw: draw, collapsed: collapsed };
  document.addEventListener("agentctl:refreshed", draw);
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", draw);
  } else {
    draw();
  }
}());
