// wf inspector: the little JavaScript there is. Every page reads without it;
// with it, the instance list and an instance refresh themselves, and a running
// attempt's output streams in. No other script, no request leaves the server.
"use strict";
(function () {
  // Parts marked data-live="URL" are replaced by the HTML that URL gives,
  // every few seconds, while the page is visible.
  function refresh(el) {
    var url = el.getAttribute("data-live");
    if (!url || document.hidden) return;
    fetch(url, { credentials: "same-origin", headers: { "Accept": "text/html" } })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) {
        if (html === null || el.innerHTML === html) return;
        // Rows checked for an action stay checked.
        var picked = Array.prototype.map.call(el.querySelectorAll("input[name=pick]:checked"), function (c) { return c.value; });
        el.innerHTML = html;
        el.querySelectorAll("input[name=pick]").forEach(function (c) { if (picked.indexOf(c.value) >= 0) c.checked = true; });
        mark();
        // The instance ended: the page again, with what an ended one offers.
        if (el.querySelector("[data-ended]")) location.reload();
      })
      .catch(function () {});
  }
  // The list's keys: `/` to the search box, `j`/`k` through the rows (the
  // one chosen is kept across refreshes by its link), `Enter` opens it.
  var chosen = null;
  function rows() { return Array.prototype.slice.call(document.querySelectorAll("table.instances tbody tr")); }
  function link(row) { return row.querySelector("a[href^='/instances/']"); }
  function mark() {
    rows().forEach(function (r) {
      var on = chosen !== null && link(r) && link(r).getAttribute("href") === chosen;
      r.classList.toggle("chosen", !!on);
      if (on) r.setAttribute("aria-selected", "true"); else r.removeAttribute("aria-selected");
    });
  }
  document.addEventListener("keydown", function (ev) {
    if (ev.ctrlKey || ev.metaKey || ev.altKey) return;
    var t = ev.target, typing = t && (/^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName) || t.isContentEditable);
    if (typing) return;
    if (ev.key === "/") {
      var f = document.querySelector("form.search input[name=q]") || document.querySelector("form.filters input, form.filters select");
      if (f) { ev.preventDefault(); f.focus(); }
      return;
    }
    var list = rows();
    if (!list.length) return;
    var at = list.findIndex(function (r) { return link(r) && link(r).getAttribute("href") === chosen; });
    if (ev.key === "j" || ev.key === "k") {
      at = ev.key === "j" ? Math.min(list.length - 1, at + 1) : Math.max(0, at - 1);
      chosen = link(list[at]) ? link(list[at]).getAttribute("href") : null;
      mark();
      list[at].scrollIntoView({ block: "nearest" });
      ev.preventDefault();
    } else if (ev.key === "Enter" && at >= 0 && t === document.body) {
      ev.preventDefault();
      location.href = chosen;
    }
  });
  document.querySelectorAll("[data-live]").forEach(function (el) {
    var every = parseInt(el.getAttribute("data-every") || "3000", 10);
    setInterval(function () { refresh(el); }, every);
  });
  // An attempt's output, live: data-stream="API URL of ?follow=1".
  document.querySelectorAll("[data-stream]").forEach(function (box) {
    var out = box.querySelector(".out"), err = box.querySelector(".err"), state = box.querySelector(".state");
    var src = new EventSource(box.getAttribute("data-stream"));
    var add = function (el, e) { try { el.textContent += JSON.parse(e.data); } catch (x) {} };
    src.addEventListener("attempt", function (e) {
      out.textContent = ""; err.textContent = "";
      if (state) state.textContent = "attempt " + e.data + ": running";
    });
    src.addEventListener("stdout", function (e) { add(out, e); });
    src.addEventListener("stderr", function (e) { add(err, e); });
    src.addEventListener("end", function (e) {
      try { var d = JSON.parse(e.data); if (state) state.textContent = "attempt " + d.attempt + ": " + d.outcome; } catch (x) {}
      src.close();
    });
    src.addEventListener("error", function () { src.close(); });
  });
  // A file sent as a request's body: form[data-upload="API URL"] with a
  // file input; what the server answers is said in its [data-said].
  document.querySelectorAll("form[data-upload]").forEach(function (form) {
    form.addEventListener("submit", function (ev) {
      ev.preventDefault();
      var file = form.querySelector("input[type=file]").files[0];
      var said = form.querySelector("[data-said]");
      if (!file) return;
      said.textContent = "Importing…";
      fetch(form.getAttribute("data-upload"), { method: "POST", credentials: "same-origin", body: file })
        .then(function (r) { return r.json().then(function (j) { return [r.ok, j]; }); })
        .then(function (a) {
          said.textContent = a[0]
            ? "Imported " + a[1].written + " of " + a[1].records + " archived instance(s) (" + a[1].skipped + " held already)."
            : a[1].error.message;
        })
        .catch(function (e) { said.textContent = String(e); });
    });
  });
})();
