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
        el.innerHTML = html;
        // The instance ended: the page again, with what an ended one offers.
        if (el.querySelector("[data-ended]")) location.reload();
      })
      .catch(function () {});
  }
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
})();
