// The postmortem page's script: hover details, the linear and compressed
// time scales with zoom (wheel, drag, reset), and a finding's evidence on
// click. Every datum comes from the JSON block; text reaches the page only
// through textContent.
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("apm-data").textContent);
  var PLOT_W = data.plot_width, MIN_SPAN = { linear: 20, compressed: 1e-5 };
  var tip = document.getElementById("tip");
  var findings = {}, timelines = {}, selected = null;
  data.findings.forEach(function (f) { findings[f.id] = f; });

  // ---- time labels: nanoseconds after the origin, in full
  function pad(n, w) { n = String(n); while (n.length < w) n = "0" + n; return n; }
  function wall(t, digits) { // time of day (UTC) with digits of fraction
    var ns = data.t0_nsec + t, s = data.t0_sec + Math.floor(ns / 1e9), frac = ns - Math.floor(ns / 1e9) * 1e9;
    var out = new Date(s * 1000).toISOString().slice(11, 19);
    return digits ? out + "." + pad(Math.round(frac), 9).slice(0, digits) : out;
  }
  function day(t) {
    return new Date((data.t0_sec + Math.floor((data.t0_nsec + t) / 1e9)) * 1000).toISOString().slice(0, 10) + " UTC";
  }
  function dur(ns) { // like Go's time.Duration
    var a = Math.abs(ns), sign = ns < 0 ? "-" : "+";
    if (a < 1e3) return sign + Math.round(a) + "ns";
    if (a < 1e6) return sign + +(a / 1e3).toFixed(3) + "µs";
    if (a < 1e9) return sign + +(a / 1e6).toFixed(3) + "ms";
    return sign + +(a / 1e9).toFixed(6) + "s";
  }
  function digitsFor(step) { return step >= 1e9 ? 0 : step >= 1e6 ? 3 : step >= 1e3 ? 6 : 9; }

  // ---- one timeline: its view is [lo, hi] in the mode's units
  function Timeline(d) {
    this.d = d;
    this.svg = document.getElementById(d.id);
    this.plot = this.svg.querySelector("svg.plot");
    this.bg = this.plot.querySelector("rect.plot-bg"); // the plot's viewport
    this.ns = this.svg.namespaceURI;
    this.controls = document.querySelector('.controls[data-timeline="' + d.id + '"]');
    this.mode = "compressed";
    d.events = []; // the k-th event of a lane is the mark ev-QP-k
    d.lanes.forEach(function (l, n) {
      l.t.forEach(function (t, k) { d.events.push({ id: "ev-" + l.qp + "-" + k, lane: n, t: t, c: l.c[k] }); });
    });
    this.items = d.events.concat(d.findings.map(function (id) { return findings[id]; }));
    // the marks are drawn in this view already: the script's ticks (the
    // same as after a reset) and the caption are missing
    this.lo = data.compressed_view[0]; this.hi = data.compressed_view[1];
    this.ticks();
    this.caption();
  }
  Timeline.prototype.u = function (item) { return this.mode === "linear" ? item.t : item.c; };
  Timeline.prototype.x = function (u) { return (u - this.lo) / (this.hi - this.lo) * PLOT_W; };
  Timeline.prototype.reset = function () {
    if (this.mode === "compressed") {
      this.lo = data.compressed_view[0]; this.hi = data.compressed_view[1];
    } else {
      var ts = this.items.map(function (i) { return i.t; });
      this.d.bands.forEach(function (b) { ts.push(b.t[0], b.t[1]); });
      if (!ts.length) ts.push(0);
      var a = Math.min.apply(null, ts), b = Math.max.apply(null, ts), m = Math.max((b - a) * 0.03, 500);
      this.lo = a - m; this.hi = b + m;
    }
    this.draw();
  };
  Timeline.prototype.zoomTo = function (lo, hi) {
    var min = MIN_SPAN[this.mode];
    if (hi - lo < min) { var mid = (lo + hi) / 2; lo = mid - min / 2; hi = mid + min / 2; }
    this.lo = lo; this.hi = hi; this.draw();
  };
  Timeline.prototype.draw = function () {
    var self = this;
    this.d.events.forEach(function (e) { self.place(e.id, self.u(e), self.d.lanes[e.lane].y); });
    this.d.findings.forEach(function (id) { var f = findings[id]; self.place(id, self.u(f), self.d.lanes[f.lane].y - 20, f.stack * data.stack_dx); });
    this.d.bands.forEach(function (b) {
      var g = document.getElementById(b.id), x1 = self.x(self.u({ t: b.t[0], c: b.c[0] })), x2 = self.x(self.u({ t: b.t[1], c: b.c[1] }));
      g.setAttribute("transform", "translate(" + x1.toFixed(1) + " 0)");
      g.querySelector("rect").setAttribute("width", Math.max(x2 - x1, 2).toFixed(1));
      g.querySelector("text").setAttribute("x", Math.max(3, 3 - x1).toFixed(1)); // the label stays in view
    });
    this.plot.querySelectorAll(".point").forEach(function (p) { // its label on the side with room
      var x = self.x(self.u(p.datum)), text = p.querySelector("text"), right = x > PLOT_W / 2;
      p.setAttribute("transform", "translate(" + x.toFixed(1) + " 0)");
      text.setAttribute("x", right ? -4 : 4);
      text.setAttribute("text-anchor", right ? "end" : "start");
    });
    this.ticks();
    this.caption();
  };
  Timeline.prototype.caption = function () {
    this.controls.querySelector(".window").textContent = this.mode + " scale; " + this.describe();
    this.controls.querySelector('[data-act="mode"]').textContent = this.mode === "linear" ? "compressed scale" : "linear scale";
  };
  Timeline.prototype.place = function (id, u, y, dx) {
    document.getElementById(id).setAttribute("transform", "translate(" + (this.x(u) + (dx || 0)).toFixed(1) + " " + y + ")");
  };
  Timeline.prototype.describe = function () {
    if (this.mode === "linear") return "shown: " + dur(this.lo) + " to " + dur(this.hi) + " (" + dur(this.hi - this.lo).slice(1) + ")";
    var full = data.compressed_view[1] - data.compressed_view[0];
    return "shown: " + Math.round(100 * (this.hi - this.lo) / full) + "% of the timeline";
  };
  // ticks: evenly stepped times on the linear scale; on the compressed
  // scale, the marks nearest to evenly spaced positions
  Timeline.prototype.ticks = function () {
    var g = this.svg.querySelector("g.ticks"), self = this, ticks = [];
    while (g.firstChild) g.removeChild(g.firstChild);
    if (this.mode === "linear") {
      var raw = (this.hi - this.lo) / 8, p = Math.pow(10, Math.floor(Math.log10(raw))), step = p;
      [2, 5, 10].forEach(function (k) { if (step < raw) step = k * p; });
      for (var t = Math.ceil(this.lo / step) * step; t <= this.hi; t += step) ticks.push({ t: t, digits: digitsFor(step) });
    } else {
      var seen = {};
      for (var k = 0; k <= 5; k++) {
        var want = this.lo + (this.hi - this.lo) * (0.04 + 0.92 * k / 5), best = null;
        this.items.forEach(function (i) {
          if (i.c >= self.lo && i.c <= self.hi && (!best || Math.abs(i.c - want) < Math.abs(best.c - want))) best = i;
        });
        var near = best && ticks.some(function (tk) { return Math.abs(self.x(tk.c) - self.x(best.c)) < 120; });
        if (best && !seen[best.c] && !near) { seen[best.c] = true; ticks.push({ t: best.t, c: best.c, digits: 6 }); }
      }
    }
    ticks.forEach(function (tk) {
      var x = self.x(self.mode === "linear" ? tk.t : tk.c), anchor = x > PLOT_W - 50 ? "end" : "middle";
      x = x.toFixed(1);
      self.el(g, "line", { "class": "axis", x1: x, y1: 31, x2: x, y2: 39 });
      self.el(g, "text", { x: x, y: 12, "text-anchor": anchor }).textContent = wall(tk.t, tk.digits);
      self.el(g, "text", { x: x, y: 25, "text-anchor": anchor }).textContent = dur(tk.t);
    });
    this.svg.querySelector("text.date").textContent = day(ticks.length ? ticks[0].t : 0);
  };
  Timeline.prototype.el = function (parent, name, attrs) {
    var e = document.createElementNS(this.ns, name);
    Object.keys(attrs).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    parent.appendChild(e);
    return e;
  };
  Timeline.prototype.plotX = function (ev) {
    var r = this.bg.getBoundingClientRect();
    return (ev.clientX - r.left) * PLOT_W / r.width;
  };
  Timeline.prototype.listen = function () {
    var self = this, brush = null, x0 = 0;
    this.plot.addEventListener("wheel", function (ev) {
      ev.preventDefault();
      var f = ev.deltaY < 0 ? 0.8 : 1.25, u = self.lo + self.plotX(ev) / PLOT_W * (self.hi - self.lo);
      self.zoomTo(u - (u - self.lo) * f, u + (self.hi - u) * f);
    }, { passive: false });
    this.plot.addEventListener("mousedown", function (ev) {
      if (ev.button !== 0) return;
      x0 = self.plotX(ev);
      brush = self.el(self.plot, "rect", { "class": "brush", x: x0, y: 0, width: 0, height: self.svg.getAttribute("height") });
      ev.preventDefault();
    });
    window.addEventListener("mousemove", function (ev) {
      if (!brush) return;
      var x = self.plotX(ev);
      brush.setAttribute("x", Math.min(x, x0)); brush.setAttribute("width", Math.abs(x - x0));
    });
    window.addEventListener("mouseup", function (ev) {
      if (!brush) return;
      var x1 = self.plotX(ev), a = Math.min(x0, x1), b = Math.max(x0, x1), span = self.hi - self.lo;
      brush.remove(); brush = null;
      if (b - a > 4) self.zoomTo(self.lo + a / PLOT_W * span, self.lo + b / PLOT_W * span);
    });
    this.controls.addEventListener("click", function (ev) {
      var act = ev.target.getAttribute("data-act");
      if (act === "mode") { self.mode = self.mode === "linear" ? "compressed" : "linear"; self.reset(); focus(self); }
      if (act === "reset") self.reset();
    });
  };

  // ---- a finding's evidence: highlight, draw the points that are no
  // event, zoom to them all
  function clear() {
    document.querySelectorAll(".evidence, .selected").forEach(function (e) { e.classList.remove("evidence", "selected"); });
    document.querySelectorAll(".selecting").forEach(function (e) { e.classList.remove("selecting"); });
    document.querySelectorAll(".point").forEach(function (e) { e.remove(); });
    selected = null;
  }
  function select(id) {
    var was = selected;
    clear();
    if (was === id) return;
    selected = id;
    var f = findings[id], row = document.getElementById("row-" + id);
    if (row) row.classList.add("selected");
    if (!f.timeline) return;
    var tl = timelines[f.timeline];
    document.getElementById(id).classList.add("selected");
    tl.svg.classList.add("selecting");
    f.evidence.forEach(function (e) { document.getElementById(e).classList.add("evidence"); });
    f.points.forEach(function (p) {
      var g = tl.el(tl.plot, "g", { "class": "point evidence" }), y = tl.d.lanes[p.lane].y;
      g.datum = p;
      tl.el(g, "line", { x1: 0, y1: y - 27, x2: 0, y2: y + 27 });
      tl.el(g, "text", { x: 4, y: y + 24 }).textContent = p.what;
      tl.el(g, "title", {}).textContent = p.what;
    });
    focus(tl);
    tl.svg.scrollIntoView({ block: "center" });
  }
  // focus zooms a timeline to the selected finding and its evidence
  function focus(tl) {
    var f = selected && findings[selected];
    if (!f || f.timeline !== tl.d.id) return;
    var us = [tl.u(f)];
    f.evidence.forEach(function (id) { tl.d.events.forEach(function (e) { if (e.id === id) us.push(tl.u(e)); }); });
    f.points.forEach(function (p) { us.push(tl.u(p)); });
    var lo = Math.min.apply(null, us), hi = Math.max.apply(null, us), m = Math.max((hi - lo) * 0.15, MIN_SPAN[tl.mode] * 50);
    tl.zoomTo(lo - m, hi + m);
  }

  data.timelines.forEach(function (d) { var t = new Timeline(d); timelines[d.id] = t; t.listen(); });
  document.querySelectorAll("[data-finding]").forEach(function (row) {
    row.addEventListener("click", function () { select(row.getAttribute("data-finding")); });
    row.tabIndex = 0; // and from the keyboard: Tab to it, Enter or Space
    row.addEventListener("keydown", function (ev) {
      if (ev.key === "Enter" || ev.key === " ") { ev.preventDefault(); select(row.getAttribute("data-finding")); }
    });
  });
  data.findings.forEach(function (f) {
    var el = f.timeline && document.getElementById(f.id);
    if (el) el.addEventListener("click", function () { select(f.id); });
  });
  // hover: the mark's <title> at once in a box of our own (the title moves
  // into the box on the first hover, so the browser's own tooltip does not
  // show twice)
  document.querySelectorAll("svg.timeline").forEach(function (svg) {
    svg.addEventListener("mousemove", function (ev) {
      var el = ev.target.closest(".mark, .finding, .band, .point");
      if (!el) { tip.style.display = "none"; return; }
      var title = el.querySelector("title");
      if (title) { el.tipText = title.textContent; title.remove(); }
      tip.textContent = el.tipText;
      tip.style.display = "block";
      tip.style.left = (ev.clientX + 12) + "px";
      tip.style.top = (ev.clientY + 12) + "px";
    });
    svg.addEventListener("mouseleave", function () { tip.style.display = "none"; });
  });
  // last: the controls show only when everything above ran
  document.body.classList.add("js");
})();
