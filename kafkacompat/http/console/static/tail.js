// Live tail: appends records from the page's Server-Sent Events stream to its table.
// Every value is set with textContent, never as HTML: record keys and values are arbitrary user data.
"use strict";
(function () {
  const table = document.getElementById("tail");
  const status = document.getElementById("tail-status");
  if (!table || !window.EventSource) {
    if (status) status.textContent = "This browser cannot show a live tail (no EventSource).";
    return;
  }
  const body = table.tBodies[0];
  const keep = parseInt(table.dataset.keep, 10) || 200;
  let count = 0;

  function cell(row, label, text, cls) {
    const td = row.insertCell();
    td.dataset.label = label;
    td.textContent = text;
    if (cls) td.className = cls;
    return td;
  }

  function shown(data) {
    if (data === null) return "null";
    let text = data.encoding === "base64" ? "base64:" + data.text : data.text;
    if (data.cut) text += " … (" + data.bytes + " bytes)";
    return text;
  }

  const source = new EventSource(table.dataset.events);
  source.addEventListener("ready", function (event) {
    const info = JSON.parse(event.data);
    status.textContent = "Following " + info.partitions + " partition(s); waiting for records…";
  });
  source.addEventListener("record", function (event) {
    const r = JSON.parse(event.data);
    const row = body.insertRow(0);
    row.className = "fresh";
    row.dataset.partition = r.partition;
    row.dataset.offset = r.offset;
    cell(row, "Partition", String(r.partition));
    cell(row, "Offset", String(r.offset));
    cell(row, "Time", new Date(r.timestamp).toISOString());
    cell(row, "Key", shown(r.key), "key");
    cell(row, "Value", shown(r.value), "value");
    cell(row, "Headers", r.headers.map(function (h) { return h[0] + "=" + shown(h[1]); }).join(", "));
    count += 1;
    while (body.rows.length > keep) body.deleteRow(body.rows.length - 1);
    status.textContent = count + " record(s) received (newest first, last " + keep + " kept).";
  });
  source.addEventListener("end", function (event) {
    const info = JSON.parse(event.data);
    status.textContent = "Partition " + info.partition + " ended: " + info.reason;
  });
  source.onerror = function () {
    status.textContent = source.readyState === EventSource.CLOSED
      ? "Disconnected." : "Connection lost; reconnecting…";
  };
})();
