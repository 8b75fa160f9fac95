// agentctl dashboard: live updates without page reloads, shipped in the package (no CDN).
// The server sends an event when the store changed; the page fetches itself again and
// swaps its <main>, unless the person is typing in one of its forms.
(function () {
  "use strict";
  var live = document.getElementById("live");
  if (!window.EventSource) { return; }
  var first = true;
  var busy = false;
  function typing() {
    var el = document.activeElement;
    return el && el.form && (el.value || "").length > 0;
  }
  function openDetails() {
    var ids = [];
    document.querySelectorAll("main details[open][id]").forEach(function (d) { ids.push(d.id); });
    return ids;
  }
  function refresh() {
    if (busy || typing()) { return; }
    busy = true;
    var keep = openDetails();
    var url = window.location.pathname + window.location.search.replace(/([?&])notice=[^&]*/, "$1");
    fetch(url, { credentials: "same-origin", headers: { "Accept": "text/html" } })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) {
        if (html === null) { return; }
        var doc = new DOMParser().parseFromString(html, "text/html");
        var fresh = doc.getElementById("main");
        if (!fresh) { return; }
        var notice = fresh.querySelector(".notice[role=status]");
        if (notice) { notice.remove(); }
        document.getElementById("main").innerHTML = fresh.innerHTML;
        keep.forEach(function (id) {
          var d = document.getElementById(id);
          if (d) { d.open = true; }
        });
        document.title = doc.title;
      })
      .finally(function () { busy = false; });
  }
  var source = new EventSource("/events");
  source.onopen = function () { if (live) { live.classList.add("on"); } };
  source.onerror = function () { if (live) { live.classList.remove("on"); } };
  source.onmessage = function () {
    if (first) { first = false; return; }
    refresh();
  };
}());
