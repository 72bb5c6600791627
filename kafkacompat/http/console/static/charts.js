// Charts of the broker's last hour (GET /console/charts/data), drawn with uPlot and refreshed
// every sample interval without reloading the page. Values are shown in human units.
(function () {
  "use strict";
  var COLORS = ["#1f6feb", "#d9480f", "#2f9e44"];

  function size(v) {
    var units = ["B", "KiB", "MiB", "GiB", "TiB"], i = 0;
    while (Math.abs(v) >= 1024 && i < units.length - 1) { v /= 1024; i++; }
    return (i === 0 ? Math.round(v) : v.toFixed(1)) + " " + units[i];
  }
  function count(v) {
    if (Math.abs(v) >= 1e6) return (v / 1e6).toFixed(1) + " M";
    if (Math.abs(v) >= 1e4) return (v / 1e3).toFixed(1) + " k";
    return Math.abs(v) < 10 && v % 1 ? v.toFixed(2) : String(Math.round(v));
  }
  function duration(s) {
    if (s < 60) return Math.round(s) + " s";
    if (s < 3600) return Math.floor(s / 60) + " min" + (s % 60 >= 1 ? " " + Math.floor(s % 60) + " s" : "");
    if (s < 86400) return Math.floor(s / 3600) + " h" + (s % 3600 >= 60 ? " " + Math.floor((s % 3600) / 60) + " min" : "");
    return Math.floor(s / 86400) + " d" + (s % 86400 >= 3600 ? " " + Math.floor((s % 86400) / 3600) + " h" : "");
  }
  var FORMATS = {
    "msg/s": function (v) { return count(v) + " msg/s"; },
    "B/s": function (v) { return size(v) + "/s"; },
    "B": size,
    "msg": function (v) { return count(v) + " msg"; },
    "s": duration
  };

  // axis labels that would read the same (ticks a few seconds apart on a 2 h lag) are written exactly instead
  function distinct(ticks, format) {
    var labels = ticks.map(format);
    var same = labels.some(function (label, i) { return i > 0 && label === labels[i - 1]; });
    return same ? ticks.map(function (v) { return String(Math.round(v * 100) / 100); }) : labels;
  }

  function latest(values) {
    for (var i = values.length - 1; i >= 0; i--) if (values[i] !== null) return values[i];
    return null;
  }

  function colour(i) {
    return i < COLORS.length ? COLORS[i] : "hsl(" + Math.round((i * 137.5) % 360) + ", 65%, 40%)";
  }

  function Chart(figure) {
    this.figure = figure;
    // "size_p*": one line per series of the data named size_p<suffix> (a partition, a link), labelled
    // with data-names followed by the suffix; the lines follow the data (a partition added, a link removed)
    this.prefix = /\*$/.test(figure.dataset.series) ? figure.dataset.series.slice(0, -1) : null;
    this.series = this.prefix === null ? figure.dataset.series.split(",") : [];
    this.names = this.prefix === null ? figure.dataset.names.split(",") : [];
    this.format = FORMATS[figure.dataset.unit] || count;
    this.plot = null;
  }
  Chart.prototype.follow = function (data) {
    if (this.prefix === null) return false;
    var prefix = this.prefix, label = this.figure.dataset.names;
    var found = Object.keys(data.series).filter(function (name) { return name.indexOf(prefix) === 0; });
    found.sort(function (a, b) {
      var x = a.slice(prefix.length), y = b.slice(prefix.length);
      return /^\d+$/.test(x) && /^\d+$/.test(y) ? x - y : (x < y ? -1 : x > y ? 1 : 0);
    });
    if (found.join("\n") === this.series.join("\n")) return false;
    this.series = found;
    this.names = found.map(function (name) { return label + name.slice(prefix.length); });
    return true;
  };
  Chart.prototype.columns = function (data) {
    // a lone first sample gets an empty one five minutes before it, so its axis reads as minutes, not years
    var lone = data.times.length === 1, times = lone ? [data.times[0] - 300, data.times[0]] : data.times;
    var cols = [times];
    this.series.forEach(function (name) {
      var values = data.series[name] || data.times.map(function () { return null; });
      cols.push(lone ? [null].concat(values) : values);
    });
    return cols;
  };
  Chart.prototype.update = function (data) {
    if (this.follow(data) && this.plot) { this.plot.destroy(); this.plot = null; }
    var cols = this.columns(data), format = this.format, box = this.figure.querySelector(".plot");
    var now = this.names.map(function (label, i) {
      var v = latest(cols[i + 1]);
      return label + " " + (v === null ? "–" : format(v));
    });
    var peak = this.names.map(function (label, i) {
      var values = cols[i + 1].filter(function (v) { return v !== null; });
      return label + " " + (values.length ? format(Math.max.apply(null, values)) : "–");
    });
    this.figure.querySelector(".latest").textContent = "now: " + (now.join(", ") || "–");
    this.figure.querySelector(".peak").textContent = "peak: " + (peak.join(", ") || "–");
    if (this.plot) { this.plot.setData(cols); return; }
    var self = this;
    this.plot = new uPlot({
      width: Math.max(box.clientWidth, 200), height: 160,
      legend: { show: false },
      cursor: { drag: { x: false, y: false } },
      series: [{}].concat(this.names.map(function (label, i) {
        return { label: label, stroke: colour(i), width: 2, spanGaps: false,
                 value: function (u, v) { return v === null ? "–" : format(v); } };
      })),
      axes: [{}, { size: 80, values: function (u, ticks) { return distinct(ticks, format); } }]
    }, cols, box);
    if (!this.resizing) {
      this.resizing = true;
      window.addEventListener("resize", function () {
        if (self.plot) self.plot.setSize({ width: Math.max(box.clientWidth, 200), height: 160 });
      });
    }
  };

  function start(section) {
    var status = section.querySelector(".chart-status");
    if (typeof window.uPlot !== "function") {
      status.textContent = "Charts cannot be drawn: the chart library did not load.";
      return;
    }
    var charts = Array.prototype.map.call(section.querySelectorAll("figure.chart"), function (f) { return new Chart(f); });
    var every = 10000;
    function refresh() {
      fetch(section.dataset.chartSrc, { credentials: "same-origin", cache: "no-store" })
        .then(function (answer) {
          if (!answer.ok) throw new Error("the broker answered " + answer.status);
          return answer.json();
        })
        .then(function (data) {
          every = Math.max(data.interval, 1) * 1000;
          charts.forEach(function (chart) { chart.update(data); });
          section.dataset.samples = String(data.times.length);
          status.textContent = "A sample every " + duration(data.interval) + ", updated live (" +
            data.times.length + " sample" + (data.times.length === 1 ? "" : "s") + " so far).";
        })
        .catch(function (error) { status.textContent = "Charts are not updating: " + error.message; })
        .then(function () { window.setTimeout(refresh, every); });
    }
    refresh();
  }

  document.querySelectorAll("section[data-chart-src]").forEach(start);
})();
