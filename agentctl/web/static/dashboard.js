// agentctl dashboard: live updates without page reloads, shipped in the package (no CDN).
// The server sends an event when the store changed; the page fetches itself again and
// swaps its <main>. What a person has entered in a form and not sent yet survives the
// swap: a form they changed is marked dirty, its fields are read just before the swap and
// written into the same form of the fresh page (docs/dashboard.md, "Live updates keep what
// you entered").
(function () {
  "use strict";
  var live = document.getElementById("live");
  var main = document.getElementById("main");
  if (!window.EventSource || !main) { return; }
  var first = true;
  var busy = false;
  var pending = false;
  function typing() {
    var el = document.activeElement;
    return el && el.form && (el.value || "").length > 0;
  }
  function openDetails() {
    var ids = [];
    document.querySelectorAll("main details[open][id]").forEach(function (d) { ids.push(d.id); });
    return ids;
  }
  // A form is known across two renderings by the card that holds it and where it posts.
  function formKey(form) {
    var holder = form.parentElement && form.parentElement.closest("[id]");
    var owner = holder && holder !== main ? holder.id : "";
    return owner + "|" + (form.getAttribute("action") || "");
  }
  function kept(el) {
    return el.name && el.type !== "hidden" && el.type !== "submit" && el.type !== "button";
  }
  function markDirty(event) {
    var el = event.target;
    if (el && el.form && main.contains(el.form) && kept(el)) { el.form.dataset.dirty = "1"; }
  }
  function unsent() {
    var forms = {};
    main.querySelectorAll("form[data-dirty]").forEach(function (form) {
      var fields = [];
      Array.prototype.forEach.call(form.elements, function (el) {
        if (!kept(el)) { return; }
        fields.push({ name: el.name, value: el.value, checked: el.checked,
                      focused: el === document.activeElement });
      });
      forms[formKey(form)] = fields;
    });
    return forms;
  }
  function restore(forms) {
    main.querySelectorAll("form").forEach(function (form) {
      var fields = forms[formKey(form)];
      if (!fields) { return; }
      form.dataset.dirty = "1";
      var seen = {};
      fields.forEach(function (saved) {
        var matches = Array.prototype.filter.call(form.elements, function (el) {
          return el.name === saved.name && kept(el);
        });
        var index = seen[saved.name] || 0;
        seen[saved.name] = index + 1;
        var el = matches[index];
        if (!el) { return; }
        if (el.type === "checkbox" || el.type === "radio") {
          el.checked = saved.checked;
        } else if (el.tagName === "SELECT") {
          var known = Array.prototype.some.call(el.options, function (o) { return o.value === saved.value; });
          if (known) { el.value = saved.value; }
        } else {
          el.value = saved.value;
        }
        if (saved.focused) { el.focus(); }
      });
    });
  }
  function refresh() {
    if (busy) {
      // The store changed again while this page was being fetched: fetch once more after.
      pending = true;
      document.body.dataset.pending = "1";
      return;
    }
    if (typing()) {
      // Put off, not dropped: it runs when the person leaves the field (focusout below).
      pending = true;
      document.body.dataset.pending = "1";
      return;
    }
    pending = false;
    delete document.body.dataset.pending;
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
        var forms = unsent();
        main.innerHTML = fresh.innerHTML;
        restore(forms);
        keep.forEach(function (id) {
          var d = document.getElementById(id);
          if (d) { d.open = true; }
        });
        document.title = doc.title;
        // The task graph (graph.js) draws itself again from the fresh page's data.
        document.dispatchEvent(new CustomEvent("agentctl:refreshed"));
        document.body.dataset.refreshed = String(Number(document.body.dataset.refreshed || 0) + 1);
      })
      .finally(function () {
        busy = false;
        if (pending) { refresh(); }
      });
  }
  document.addEventListener("input", markDirty, true);
  document.addEventListener("change", markDirty, true);
  // A refresh put off while someone typed happens once they leave the field.
  document.addEventListener("focusout", function () {
    if (pending) { window.setTimeout(refresh, 0); }
  }, true);
  var source = new EventSource("/events");
  source.onopen = function () { if (live) { live.classList.add("on"); } };
  source.onerror = function () { if (live) { live.classList.remove("on"); } };
  source.onmessage = function () {
    if (first) { first = false; return; }
    refresh();
  };
}());

// The reconcile form checks what it can before sending (the server checks it all again and,
// on a refusal, draws the form again with what was typed): a result or schema that is not
// JSON, and an "applied" conclusion without a result when none was recorded.
(function () {
  "use strict";
  function say(form, text) {
    var box = form.querySelector(".problem");
    if (!box) { return; }
    box.textContent = text;
    box.hidden = !text;
  }
  document.addEventListener("click", function (event) {
    var button = event.target.closest && event.target.closest("button.use-example");
    if (!button || !button.form) { return; }
    var form = button.form;
    form.elements.result.value = button.dataset.example;
    form.elements.status.value = "applied";
    form.dataset.dirty = "1";
    say(form, "");
  });
  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (!form.classList || !form.classList.contains("reconcile")) { return; }
    var status = form.elements.status.value;
    var problems = [];
    [["result", "result"], ["result_schema", "result schema"]].forEach(function (pair) {
      var text = form.elements[pair[0]].value.trim();
      if (!text) { return; }
      try { JSON.parse(text); } catch (error) {
        problems.push("The " + pair[1] + " field is not valid JSON (" + error.message + ").");
      }
    });
    if (status === "applied" && form.dataset.recordedResult === "no" &&
        !form.elements.result.value.trim()) {
      problems.push("“Applied” needs the result the operation produced: paste it in the " +
                    "result field (or use the example and edit it).");
    }
    if (problems.length) {
      event.preventDefault();
      say(form, problems.join(" "));
    } else {
      say(form, "");
    }
  }, true);
}());
