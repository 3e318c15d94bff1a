"use strict";
(function () {
  var table = document.getElementById("cases");
  var excerpts = {};
  var data = document.getElementById("excerpts");
  if (data) { try { excerpts = JSON.parse(data.textContent || "{}"); } catch (e) { excerpts = {}; } }

  function fill(root) {
    var pres = root.querySelectorAll("pre[data-x]:not([data-filled])");
    for (var i = 0; i < pres.length; i++) {
      var key = pres[i].getAttribute("data-x");
      pres[i].textContent = Object.prototype.hasOwnProperty.call(excerpts, key) ? excerpts[key] : "(excerpt missing)";
      pres[i].setAttribute("data-filled", "");
    }
  }
  document.addEventListener("toggle", function (ev) {
    var t = ev.target;
    if (t && t.tagName === "DETAILS" && t.open) { fill(t); }
  }, true);

  function reveal() {
    var id = decodeURIComponent(location.hash.slice(1));
    if (!id) { return; }
    var el = document.getElementById(id);
    if (!el) { return; }
    for (var p = el; p; p = p.parentElement) {
      if (p.tagName === "DETAILS") { p.open = true; fill(p); }
    }
    fill(el);
    el.scrollIntoView({block: "start"});
  }
  window.addEventListener("hashchange", reveal);

  var buttons = document.querySelectorAll("button[data-expand]");
  for (var b = 0; b < buttons.length; b++) {
    buttons[b].addEventListener("click", function (ev) {
      var sel = ev.currentTarget.getAttribute("data-expand");
      var open = ev.currentTarget.getAttribute("data-state") !== "open";
      var all = document.querySelectorAll(sel + " details");
      for (var i = 0; i < all.length; i++) { all[i].open = open; }
      ev.currentTarget.setAttribute("data-state", open ? "open" : "closed");
      ev.currentTarget.textContent = open ? "collapse all" : "expand all";
    });
  }

  if (table) {
    var tbody = table.tBodies[0];
    var rows = Array.prototype.slice.call(tbody.rows);
    var q = document.getElementById("q");
    var f = document.getElementById("f");
    var shown = document.getElementById("shown");
    var search = rows.map(function (r) { return (r.getAttribute("data-s") || "").toLowerCase(); });
    var flags = rows.map(function (r) { return " " + (r.getAttribute("data-flags") || "") + " "; });

    var applyFilter = function () {
      var needle = q.value.trim().toLowerCase();
      var flag = f.value;
      var n = 0;
      for (var i = 0; i < rows.length; i++) {
        var ok = (!needle || search[i].indexOf(needle) !== -1) &&
                 (!flag || flags[i].indexOf(" " + flag + " ") !== -1);
        rows[i].hidden = !ok;
        if (ok) { n++; }
      }
      shown.textContent = n + " of " + rows.length + " cases";
    };
    q.addEventListener("input", applyFilter);
    f.addEventListener("change", applyFilter);

    var heads = table.tHead.rows[0].cells;
    var sortBy = function (th) {
      var col = th.cellIndex;
      var numeric = th.getAttribute("data-sort") === "num";
      var dir = th.getAttribute("aria-sort") === "ascending" ? -1 : 1;
      for (var h = 0; h < heads.length; h++) { heads[h].removeAttribute("aria-sort"); }
      th.setAttribute("aria-sort", dir === 1 ? "ascending" : "descending");
      var keyed = rows.map(function (r, i) {
        var cell = r.cells[col];
        var raw = cell ? (cell.hasAttribute("data-v") ? cell.getAttribute("data-v") : cell.textContent.trim()) : "";
        var key = numeric ? (raw === "" ? null : parseFloat(raw)) : (raw === "" ? null : raw.toLowerCase());
        return {row: r, key: key, i: i};
      });
      keyed.sort(function (a, b) {
        if (a.key === null || b.key === null) {
          if (a.key === b.key) { return a.i - b.i; }
          return a.key === null ? 1 : -1;
        }
        if (a.key < b.key) { return -dir; }
        if (a.key > b.key) { return dir; }
        return a.i - b.i;
      });
      var frag = document.createDocumentFragment();
      rows = keyed.map(function (k) { frag.appendChild(k.row); return k.row; });
      search = rows.map(function (r) { return (r.getAttribute("data-s") || "").toLowerCase(); });
      flags = rows.map(function (r) { return " " + (r.getAttribute("data-flags") || "") + " "; });
      tbody.appendChild(frag);
    };
    for (var h = 0; h < heads.length; h++) {
      if (heads[h].hasAttribute("data-sort")) {
        heads[h].addEventListener("click", function (ev) { sortBy(ev.currentTarget); });
        heads[h].addEventListener("keydown", function (ev) {
          if (ev.key === "Enter" || ev.key === " ") { ev.preventDefault(); sortBy(ev.currentTarget); }
        });
      }
    }
    applyFilter();
  }
  reveal();
})();
