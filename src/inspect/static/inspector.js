// mnemo inspect: follows a session live. The server sends each new turn as
// HTML it rendered and escaped itself; this only places it on the page.
(function () {
  "use strict";
  var list = document.getElementById("turns");
  if (!list || !list.dataset.events) { return; }
  var status = document.getElementById("live-status");
  var say = function (text) { if (status) { status.textContent = text; } };
  var source = new EventSource(list.dataset.events);
  source.addEventListener("open", function () { say("live"); });
  source.addEventListener("turn", function (e) {
    list.insertAdjacentHTML("beforeend", e.data);
    var count = document.getElementById("turn-count");
    if (count) { count.textContent = String(Number(count.textContent) + 1); }
  });
  source.addEventListener("notice", function (e) {
    var notices = document.getElementById("live-notices");
    if (notices) { notices.insertAdjacentHTML("beforeend", e.data); }
  });
  source.addEventListener("end", function (e) {
    say(e.data);
    source.close();
  });
  source.addEventListener("error", function () { say("reconnecting…"); });
}());
