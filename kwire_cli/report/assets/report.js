// kwire report: draws the page from the summary JSON embedded in it (id kwire-data). Text from the
// capture is inserted as text (textContent), never as markup, and shown with visible escapes for
// control and invisible characters (as kwire's terminal output).
(function () {
  "use strict";
  var D = JSON.parse(document.getElementById("kwire-data").textContent);
  var S = D.summary;
  var SER = S.series || {};
  var UNSAFE = /[\\\u0000-\u001f\u007f-\u009f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff\ufff9-\ufffb\ud800-\udfff]/g;

  function vis(v) {
    if (v === null || v === undefined) { return ""; }
    var s = String(v);
    return s.replace(UNSAFE, function (c) {
      if (c === "\\") { return "\\\\"; }
      if (c === "\t") { return "\\t"; }
      if (c === "\n") { return "\\n"; }
      if (c === "\r") { return "\\r"; }
      var n = c.charCodeAt(0);
      return n < 0x100 ? "\\x" + ("0" + n.toString(16)).slice(-2) : "\\u" + ("000" + n.toString(16)).slice(-4);
    });
  }

  // text for a tooltip (ECharts tooltips are HTML): escaped as text
  function h(v) {
    return vis(v).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;").replace(/'/g, "&#39;");
  }

  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    if (attrs) { for (var k in attrs) { e.setAttribute(k, attrs[k]); } }
    if (text !== undefined && text !== null) { e.textContent = text; }
    return e;
  }

  function section(id) { return document.getElementById(id); }

  function utc(ts) {
    if (typeof ts !== "number") { return ""; }
    return new Date(ts * 1000).toISOString().replace("T", " ").replace("Z", "");
  }

  // a sortable table: columns [[header, function(row) -> value, kind]]; kind "time" formats a ts
  function table(parent, caption, rows, columns) {
    var wrap = el("div", {"class": "tablewrap"});
    var t = el("table", {"class": "sortable"});
    t.appendChild(el("caption", null, caption + " (" + rows.length + ")"));
    var thead = el("thead"), tr = el("tr");
    columns.forEach(function (c, i) {
      var th = el("th", {"data-col": String(i), "title": "click to sort"}, c[0]);
      th.addEventListener("click", function () { sortBy(t, i); });
      tr.appendChild(th);
    });
    thead.appendChild(tr);
    t.appendChild(thead);
    var tb = el("tbody");
    rows.forEach(function (r) {
      var row = el("tr");
      columns.forEach(function (c) {
        var v = c[1](r);
        var td = el("td");
        if (typeof v === "number") {
          td.setAttribute("data-v", String(v));
          td.className = "num";
        }
        td.textContent = c[2] === "time" ? utc(v) : (typeof v === "object" && v !== null ? vis(JSON.stringify(v)) : vis(v));
        row.appendChild(td);
      });
      tb.appendChild(row);
    });
    t.appendChild(tb);
    wrap.appendChild(t);
    parent.appendChild(wrap);
    return t;
  }

  function sortBy(t, i) {
    var th = t.tHead.rows[0].cells[i];
    var dir = th.getAttribute("data-sort") === "asc" ? "desc" : "asc";
    Array.prototype.forEach.call(t.tHead.rows[0].cells, function (c) { c.removeAttribute("data-sort"); });
    th.setAttribute("data-sort", dir);
    var body = t.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    function key(r) {
      var c = r.cells[i];
      var v = c.getAttribute("data-v");
      return v !== null ? [0, parseFloat(v), ""] : [c.textContent === "" ? 2 : 1, 0, c.textContent];
    }
    rows.sort(function (a, b) {
      var x = key(a), y = key(b), s;
      if (x[0] !== y[0]) { return x[0] - y[0]; }  // numbers, then text, then empty cells
      s = x[0] === 0 ? x[1] - y[1] : (x[2] < y[2] ? -1 : (x[2] > y[2] ? 1 : 0));
      return dir === "asc" ? s : -s;
    });
    rows.forEach(function (r) { body.appendChild(r); });
  }

  var charts = [];
  function chart(parent, title, option) {
    var box = el("div", {"class": "chart", "role": "img", "aria-label": title});
    parent.appendChild(box);
    var c = echarts.init(box, null, {renderer: "canvas"});
    var base = {
      animation: false,
      useUTC: true,
      title: {text: title, left: "center", textStyle: {fontSize: 13}},
      tooltip: {trigger: "axis", confine: true},
      legend: {type: "scroll", bottom: 0},
      grid: {left: 70, right: 40, top: 40, bottom: 70, containLabel: false},
      toolbox: {feature: {dataZoom: {}, restore: {}}},
      dataZoom: [{type: "inside", filterMode: "none"}]
    };
    for (var k in option) { base[k] = option[k]; }
    c.setOption(base);
    charts.push(c);
    return c;
  }
  window.addEventListener("resize", function () { charts.forEach(function (c) { c.resize(); }); });

  function timeAxis() {
    return {type: "time", name: "time (UTC)", nameLocation: "middle", nameGap: 28};
  }
  function valueAxis(name) {
    return {type: "value", name: name, nameLocation: "middle", nameGap: 50};
  }
  function pts(points, field) {
    return points.map(function (p) { return [p.ts * 1000, p[field]]; });
  }
  function none(parent, what) {
    parent.appendChild(el("p", {"class": "none"}, "No " + what + " in this capture."));
  }

  // header: what was read
  (function () {
    var h = section("overview");
    var cap = S.capture || {};
    var files = (D.sources || []).map(vis).join(", ");
    var rows = [["source", files], ["frames", S.frames], ["decoded", S.decoded], ["undecodable", S.undecodable],
                ["first packet (UTC)", utc(cap.first_ts)], ["last packet (UTC)", utc(cap.last_ts)],
                ["time bucket of the charts", SER.bucket_ms !== undefined ? SER.bucket_ms + " ms (at most " + SER.max_points + " points per series)" : ""]];
    var dl = el("dl");
    rows.forEach(function (r) { dl.appendChild(el("dt", null, r[0])); dl.appendChild(el("dd", null, r[1] === undefined ? "" : String(r[1]))); });
    h.appendChild(dl);
  })();

  // latency: percentiles per API over time; the per broker/client table
  (function () {
    var s = section("latency");
    var series = [];
    (SER.latency || []).forEach(function (l) {
      series.push({name: vis(l.api_name) + " p50", type: "line", showSymbol: true, symbolSize: 4, data: pts(l.points, "p50_ms")});
      series.push({name: vis(l.api_name) + " p99", type: "line", showSymbol: true, symbolSize: 4, lineStyle: {type: "dashed"}, data: pts(l.points, "p99_ms")});
    });
    chart(s, "Response time per API (p50 solid, p99 dashed), ms", {xAxis: timeAxis(), yAxis: valueAxis("response time (ms)"), series: series});
    table(s, "Latency by API, version, broker and client id", S.latency || [], [
      ["API", function (r) { return r.api_name; }], ["version", function (r) { return r.api_version; }],
      ["broker", function (r) { return r.broker; }], ["client id", function (r) { return r.client_id; }],
      ["count", function (r) { return r.count; }], ["min ms", function (r) { return r.min_ms; }],
      ["p50 ms", function (r) { return r.p50_ms; }], ["p90 ms", function (r) { return r.p90_ms; }],
      ["p99 ms", function (r) { return r.p99_ms; }], ["max ms", function (r) { return r.max_ms; }],
      ["errors", function (r) { return r.errors; }], ["throttled", function (r) { return r.throttled; }]]);
  })();

  // throughput: bytes and records per topic over time, produce and fetch
  (function () {
    var s = section("throughput");
    var bytes = [], records = [];
    (SER.throughput || []).forEach(function (t) {
      var name = t.direction + " " + vis(t.topic);
      bytes.push({name: name, type: "bar", stack: t.direction, data: pts(t.points, "bytes")});
      records.push({name: name, type: "bar", stack: t.direction, data: pts(t.points, "records")});
    });
    chart(s, "Record batch bytes per topic (Produce requests, Fetch answers)", {xAxis: timeAxis(), yAxis: valueAxis("bytes per bucket"), series: bytes});
    chart(s, "Records per topic (Produce requests, Fetch answers)", {xAxis: timeAxis(), yAxis: valueAxis("records per bucket"), series: records});
    var parts = [];
    (S.producers || []).forEach(function (p) {
      (p.partitions || []).forEach(function (q) { parts.push([p, q]); });
    });
    table(s, "Producers by partition", parts, [
      ["producer id", function (r) { return r[0].producer_id; }], ["epoch", function (r) { return r[0].producer_epoch; }],
      ["transactional id", function (r) { return r[0].transactional_id; }], ["client ids", function (r) { return (r[0].client_ids || []).join(", "); }],
      ["topic", function (r) { return r[1].topic; }], ["partition", function (r) { return r[1].partition; }],
      ["batches", function (r) { return r[1].batches; }], ["records", function (r) { return r[1].records; }],
      ["bytes", function (r) { return r[1].bytes; }], ["compression ratio", function (r) { return r[1].compression_ratio; }],
      ["p99 ms", function (r) { return r[1].p99_ms; }]]);
  })();

  // groups: a timeline per group, generations as bands, events as marks
  (function () {
    var s = section("groups");
    var groups = S.groups || [];
    var names = groups.map(function (g) { return vis(g.group_id); });
    var bands = [], events = {};
    groups.forEach(function (g, gi) {
      (g.generations || []).forEach(function (gen) {
        var members = (gen.members || []).map(function (m) { return m.client_id || m.member_id; }).join(", ");
        var start = gen.start_ts, end = gen.end_ts !== null && gen.end_ts !== undefined ? gen.end_ts : start;
        bands.push({name: "generation " + gen.generation_id, value: [gi, start * 1000, Math.max(end, start) * 1000, gen.generation_id],
                    members: h(members), cause: h(gen.cause)});
      });
      (g.events || []).forEach(function (e) {
        (events[e.kind] = events[e.kind] || []).push({value: [e.ts * 1000, gi], detail: h((e.client_id || e.member_id || "") + (e.detail ? " " + e.detail : ""))});
      });
    });
    var series = [{
      name: "generations (rebalance)", type: "custom",
      renderItem: function (params, api) {
        var y = api.value(0), a = api.coord([api.value(1), y]), b = api.coord([api.value(2), y]);
        var h = api.size([0, 1])[1] * 0.5;
        return {type: "group", children: [
          {type: "rect", shape: {x: a[0], y: a[1] - h / 2, width: Math.max(b[0] - a[0], 3), height: h}, style: api.style()},
          {type: "text", style: {text: "gen " + api.value(3), x: a[0] + 2, y: a[1] - h / 2 - 12, fill: "#333", fontSize: 11}}]};
      },
      encode: {x: [1, 2], y: 0}, data: bands,
      tooltip: {formatter: function (p) { return p.name + "<br>" + "start to end of the rebalance; members: " + p.data.members + "<br>cause: " + p.data.cause; }}
    }];
    Object.keys(events).sort().forEach(function (k) {
      series.push({name: "event: " + k, type: "scatter", symbolSize: 9, data: events[k],
                   tooltip: {formatter: function (p) { return h(k) + " " + utc(p.value[0] / 1000) + "<br>" + p.data.detail; }}});
    });
    var tip = {trigger: "item", confine: true};
    chart(s, "Consumer groups: generations (bands from the first JoinGroup to the last SyncGroup answer) and events",
          {tooltip: tip, xAxis: timeAxis(), yAxis: {type: "category", data: names, name: "group", nameLocation: "end"}, series: series});
    var beats = (SER.heartbeats || []).map(function (b) {
      return {name: vis(b.group_id), type: "bar", stack: "heartbeats", data: pts(b.points, "count")};
    });
    chart(s, "Heartbeat requests per group over time", {xAxis: timeAxis(), yAxis: valueAxis("heartbeats per bucket"), series: beats});
    var gens = [];
    groups.forEach(function (g) { (g.generations || []).forEach(function (gen) { gens.push([g, gen]); }); });
    table(s, "Generations", gens, [
      ["group", function (r) { return r[0].group_id; }], ["protocol", function (r) { return r[0].protocol; }],
      ["generation", function (r) { return r[1].generation_id; }], ["start", function (r) { return r[1].start_ts; }, "time"],
      ["end", function (r) { return r[1].end_ts; }, "time"], ["rebalance ms", function (r) { return r[1].rebalance_ms; }],
      ["leader", function (r) { return r[1].leader; }],
      ["members", function (r) { return (r[1].members || []).map(function (m) { return (m.client_id || "") + " " + m.member_id; }).join(", "); }],
      ["cause", function (r) { return r[1].cause; }]]);
    var evs = [];
    groups.forEach(function (g) { (g.events || []).forEach(function (e) { evs.push([g, e]); }); });
    table(s, "Group events", evs, [
      ["group", function (r) { return r[0].group_id; }], ["time", function (r) { return r[1].ts; }, "time"],
      ["kind", function (r) { return r[1].kind; }], ["client id", function (r) { return r[1].client_id; }],
      ["member id", function (r) { return r[1].member_id; }], ["detail", function (r) { return r[1].detail; }],
      ["frame", function (r) { return r[1].frame; }]]);
  })();

  // lag: per partition over time, commits marked
  (function () {
    var s = section("lag");
    var series = [];
    (SER.lag || []).forEach(function (l) {
      series.push({name: "lag " + vis(l.client_id) + " " + vis(l.topic) + "-" + l.partition, type: "line", showSymbol: true, symbolSize: 4, data: pts(l.points, "lag")});
    });
    (SER.commits || []).forEach(function (c) {
      series.push({name: "commit " + vis(c.group_id) + " " + vis(c.topic) + "-" + c.partition, type: "scatter", symbol: "diamond", symbolSize: 11,
                   data: c.points.map(function (p) { return [p.ts * 1000, p.committed_lag, p.committed_offset]; })});
    });
    chart(s, "Lag per partition (messages: high watermark - fetch offset); commits marked at their committed lag",
          {xAxis: timeAxis(), yAxis: valueAxis("lag (messages)"), series: series});
    table(s, "Lag by client id and partition", S.lag || [], [
      ["client id", function (r) { return r.client_id; }], ["group", function (r) { return r.group_id; }],
      ["topic", function (r) { return r.topic; }], ["partition", function (r) { return r.partition; }],
      ["samples", function (r) { return r.samples; }], ["max lag", function (r) { return r.max_lag; }],
      ["last lag", function (r) { return r.last_lag; }], ["last fetch offset", function (r) { return r.last_fetch_offset; }],
      ["last high watermark", function (r) { return r.last_high_watermark; }], ["last", function (r) { return r.last_ts; }, "time"]]);
    table(s, "Committed offsets", S.commits || [], [
      ["group", function (r) { return r.group_id; }], ["topic", function (r) { return r.topic; }],
      ["partition", function (r) { return r.partition; }], ["commits", function (r) { return r.commits; }],
      ["last committed offset", function (r) { return r.last_committed_offset; }], ["last commit", function (r) { return r.last_commit_ts; }, "time"],
      ["high watermark", function (r) { return r.high_watermark; }], ["committed lag", function (r) { return r.committed_lag; }]]);
  })();

  // errors: error codes over time, expert findings
  (function () {
    var s = section("errors");
    var series = (SER.errors || []).map(function (e) {
      return {name: vis(e.error), type: "bar", stack: "errors", data: pts(e.points, "count")};
    });
    chart(s, "Error codes in answers over time", {xAxis: timeAxis(), yAxis: valueAxis("answers per bucket"), series: series});
    var counts = Object.keys(S.error_codes || {}).map(function (k) { return [k, S.error_codes[k]]; });
    table(s, "Error codes", counts, [["error code", function (r) { return r[0]; }], ["answers", function (r) { return r[1]; }]]);
    var kinds = Object.keys(S.expert_counts || {}).map(function (k) { return [k, S.expert_counts[k]]; });
    table(s, "Expert findings by kind", kinds, [["kind", function (r) { return r[0]; }], ["findings", function (r) { return r[1]; }]]);
    table(s, "Expert findings", S.expert || [], [
      ["severity", function (r) { return r.severity; }], ["kind", function (r) { return r.kind; }],
      ["message", function (r) { return r.message; }], ["file", function (r) { return r.file; }],
      ["frame", function (r) { return r.frame; }], ["client id", function (r) { return r.client_id; }],
      ["broker", function (r) { return r.broker; }]]);
  })();

  // clients: requests per client id, versions, negotiation audit, who did what
  (function () {
    var s = section("clients");
    var ids = Object.keys(S.clients || {});
    chart(s, "Requests per client id", {xAxis: {type: "category", data: ids.map(vis), name: "client id", nameLocation: "middle", nameGap: 28},
          yAxis: valueAxis("requests"), legend: {show: true, bottom: 0},
          series: [{name: "requests", type: "bar", data: ids.map(function (k) { return S.clients[k].requests; })}]});
    table(s, "Client ids and the versions they used", ids.map(function (k) { return [k, S.clients[k]]; }), [
      ["client id", function (r) { return r[0]; }], ["requests", function (r) { return r[1].requests; }],
      ["versions", function (r) { var v = r[1].versions || {}; return Object.keys(v).map(function (a) { return a + " v" + v[a].join("/"); }).join(", "); }]]);
    table(s, "Negotiation audit (versions used that the broker did not advertise)", S.negotiation_audit || [], [
      ["client id", function (r) { return r.client_id; }], ["broker", function (r) { return r.broker; }],
      ["API", function (r) { return r.api_name; }], ["version", function (r) { return r.api_version; }],
      ["requests", function (r) { return r.requests; }], ["advertised", function (r) { return r.advertised; }]]);
    table(s, "Who did what", S.who || [], [
      ["principal", function (r) { return r.principal; }], ["client id", function (r) { return r.client_id; }],
      ["connections", function (r) { return r.connections; }],
      ["APIs", function (r) { var a = r.apis || {}; return Object.keys(a).map(function (k) { return k + " " + a[k]; }).join(", "); }],
      ["topics", function (r) { return (r.topics || []).join(", "); }], ["groups", function (r) { return (r.groups || []).join(", "); }],
      ["transactional ids", function (r) { return (r.transactional_ids || []).join(", "); }]]);
  })();

  // connections: bytes each way, TLS, SASL principal
  (function () {
    var s = section("connections");
    var conns = S.connections || [];
    var shown = conns.slice(0, 50);
    var labels = shown.map(function (c) { return vis(c.client) + " > " + vis(c.broker); });
    chart(s, "Kafka frame bytes per connection (the first 50)", {
      tooltip: {trigger: "axis", confine: true, axisPointer: {type: "shadow"}},
      xAxis: {type: "category", data: labels, name: "connection (client > broker)", nameLocation: "middle", nameGap: 28, axisLabel: {show: false}},
      yAxis: valueAxis("bytes"),
      series: [{name: "client to broker", type: "bar", stack: "b", data: shown.map(function (c) { return c.request_bytes; })},
               {name: "broker to client", type: "bar", stack: "b", data: shown.map(function (c) { return c.response_bytes; })}]});
    table(s, "Connections", conns, [
      ["client", function (r) { return r.client; }], ["broker", function (r) { return r.broker; }],
      ["file", function (r) { return r.file; }], ["client ids", function (r) { return (r.client_ids || []).join(", "); }],
      ["first", function (r) { return r.first_ts; }, "time"], ["last", function (r) { return r.last_ts; }, "time"],
      ["requests", function (r) { return r.requests; }], ["responses", function (r) { return r.responses; }],
      ["request bytes", function (r) { return r.request_bytes; }], ["response bytes", function (r) { return r.response_bytes; }],
      ["TLS", function (r) { return r.tls_version; }], ["SASL", function (r) { return r.sasl_mechanism; }],
      ["principal", function (r) { return r.principal; }]]);
  })();

  document.body.setAttribute("data-drawn", "yes");
})();
