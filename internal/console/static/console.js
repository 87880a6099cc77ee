// Marketplane console: live status, credentials on request, search as you type.
// No inline scripts (the Content-Security-Policy allows only this file).
(function () {
  "use strict";
  var csrf = function () {
    var m = document.querySelector('meta[name="csrf"]');
    return m ? m.getAttribute("content") : "";
  };

  // The instance page's live part: fetched every 2 s and swapped in. The
  // server renders the fragment with html/template, so it is escaped there.
  var live = document.getElementById("live");
  if (live && live.dataset.src) {
    var timer = null;
    var poll = function () {
      fetch(live.dataset.src, { credentials: "same-origin", cache: "no-store" })
        .then(function (r) {
          if (r.redirected || r.url.indexOf("/login") >= 0) { window.location = "/login"; return null; }
          return r.text();
        })
        .then(function (html) {
          if (html === null) { return; }
          live.innerHTML = html;
          if (document.getElementById("gone")) { clearInterval(timer); }
        })
        .catch(function () { /* the next poll tries again */ });
    };
    timer = setInterval(poll, 2000);
  }

  // Credentials: only on request, with a POST carrying the CSRF header, never
  // in a URL; shown in one panel outside the live part.
  var panel = document.getElementById("credentials");
  document.addEventListener("click", function (ev) {
    var t = ev.target;
    if (!(t instanceof HTMLElement)) { return; }
    if (t.classList.contains("show-credentials")) {
      fetch(t.dataset.url, { method: "POST", credentials: "same-origin", cache: "no-store", headers: { "X-CSRF-Token": csrf() } })
        .then(function (r) { return r.text().then(function (body) { return { ok: r.ok, body: body }; }); })
        .then(function (res) {
          var text = res.body;
          if (!res.ok) {
            try { text = "Error: " + JSON.parse(res.body).error; } catch (e) { text = "Error: " + res.body; }
          }
          document.getElementById("credentials-of").textContent = t.dataset.binding;
          document.getElementById("credentials-text").textContent = text;
          panel.hidden = false;
        });
    } else if (t.id === "copy-credentials") {
      var text = document.getElementById("credentials-text").textContent;
      if (navigator.clipboard) {
        navigator.clipboard.writeText(text).then(function () { t.textContent = "Copied"; }, function () { t.textContent = "Copy failed"; });
      }
    } else if (t.id === "hide-credentials") {
      document.getElementById("credentials-text").textContent = "";
      panel.hidden = true;
    }
  });

  // Search as you type on the offerings page (the form also works without
  // script, on the server).
  var search = document.getElementById("search");
  if (search && search.dataset.filter) {
    search.addEventListener("input", function () {
      var words = search.value.toLowerCase().split(/\s+/).filter(Boolean);
      document.querySelectorAll(search.dataset.filter).forEach(function (el) {
        var hay = el.dataset.search || "";
        el.hidden = !words.every(function (w) { return hay.indexOf(w) >= 0; });
      });
    });
  }
})();
