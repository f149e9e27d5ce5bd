// The Assay report's script: "more" toggles and the item browser over the #items-data JSON.
// Dataset strings reach the page only as textContent (links: URI-encoded paths). Inlined at render time.
(function () {
  "use strict";
  document.addEventListener("click", function (event) {
    var button = event.target.closest("button.more");
    if (!button) return;
    var box = button.previousElementSibling;
    var open = box.classList.toggle("open");
    button.textContent = open ? "less" : "more";
  });
  var source = document.getElementById("items-data");
  if (!source) return;
  var data = JSON.parse(source.textContent);
  var tbody = document.querySelector("#items tbody");
  var ui = {
    outcome: document.getElementById("f-outcome"), scorer: document.getElementById("f-scorer"),
    op: document.getElementById("f-op"), value: document.getElementById("f-value"),
    search: document.getElementById("f-search"), count: document.getElementById("f-count"),
    more: document.getElementById("f-more")
  };
  var colours = { completed: "#2e9d5b", failed: "#d64545", cancelled: "#616e7c",
                  budget_skipped: "#e0a526", budget_interrupted: "#e07b26" };
  function cell(tr, cls) { var td = document.createElement("td"); if (cls) td.className = cls; tr.appendChild(td); return td; }
  function textCell(tr, text, extra) {
    var td = cell(tr, "text");
    var box = document.createElement("div");
    var long = text.length > data.clip || text.split("\n").length > 5;
    box.className = "clip" + (long ? " long" : "") + (extra ? " " + extra : "");
    box.textContent = text;
    td.appendChild(box);
    if (long) {
      var button = document.createElement("button");
      button.type = "button"; button.className = "more"; button.textContent = "more";
      td.appendChild(button);
    }
    return td;
  }
  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined) node.textContent = text;
    return node;
  }
  function clipped(td, box) {
    // A long conversation or call list opens with the same "more" toggle as long text.
    box.classList.add("clip");
    if (box.textContent.length > data.clip || box.children.length > 2) {
      box.classList.add("long");
      var button = el("button", "more", "more");
      button.type = "button";
      td.appendChild(box); td.appendChild(button);
    } else {
      td.appendChild(box);
    }
  }
  function mediaPart(part) {
    var figure = el("figure", "media");
    if (part.thumbnail) {
      var img = el("img", "thumb");
      img.src = part.thumbnail; img.alt = part.path || "";
      figure.appendChild(img);
    }
    var facts = [part.type, part.url || part.path];
    if (part.size) facts.push(part.size);
    if (part.bytes !== undefined) facts.push(part.bytes.toLocaleString("en") + " bytes");
    if (part.sha256) facts.push("sha256:" + part.sha256.slice(0, 12) + "…");
    if (part.missing) facts.push("not readable now: " + part.missing);
    var caption = el("figcaption", "", facts.join(" · "));
    if (part.sha256) caption.title = "sha256:" + part.sha256;
    figure.appendChild(caption);
    return figure;
  }
  function turnsCell(tr, turns) {
    var td = cell(tr, "text"), box = el("div", "turns");
    turns.forEach(function (turn) {
      var node = el("div", "turn role-" + turn.role);
      node.appendChild(el("span", "role", turn.role));
      turn.parts.forEach(function (part) {
        node.appendChild(part.type === "text" ? el("div", "part", part.text) : mediaPart(part));
      });
      box.appendChild(node);
    });
    clipped(td, box);
    return td;
  }
  function callsCell(tr, calls, said) {
    var td = cell(tr, "text"), box = el("div", "calls");
    if (said) box.appendChild(el("div", "said", said));
    calls.forEach(function (call) {
      var node = el("div", "tool-call");
      node.appendChild(el("code", "name", call.name));
      if (call.id) node.appendChild(el("span", "call-id", call.id));
      node.appendChild(el("pre", "arguments", call.arguments));
      box.appendChild(node);
    });
    clipped(td, box);
    return td;
  }
  function reasoning(td, text) {
    // Folded: the reasoning is not the answer, and is often longer than it.
    var details = el("details", "reasoning"), summary = el("summary", "", "reasoning");
    details.appendChild(summary);
    details.appendChild(el("div", "part", text));
    td.insertBefore(details, td.firstChild);
  }
  function texts(r) {
    var said = [r.id, r.input, r.expected, r.output, r.error, r.reasoning || "", r.tool_call_text || ""];
    (r.turns || []).forEach(function (turn) {
      turn.parts.forEach(function (part) { said.push(part.text || part.path || part.url || ""); });
    });
    (r.tool_calls || []).forEach(function (call) { said.push(call.name, call.arguments); });
    return said.join("\n").toLowerCase();
  }
  var rows = data.rows.map(function (r) {
    var tr = document.createElement("tr");
    var id = cell(tr, "id"), code = document.createElement("code");
    code.textContent = r.id + (data.trials > 1 ? " #" + r.trial : "");
    id.appendChild(code);
    var badge = document.createElement("span");
    badge.className = "badge"; badge.style.background = colours[r.outcome] || "#7b8794";
    badge.textContent = r.outcome;
    cell(tr, "").appendChild(badge);
    data.scorers.forEach(function (s) {
      var v = r.scores[s];
      if (typeof v === "number") {
        var td = cell(tr, "score");
        td.textContent = v.toFixed(3);
        td.style.background = "hsl(" + Math.round(120 * Math.max(0, Math.min(1, v))) + ",65%,92%)";
      } else {
        cell(tr, "state").textContent = r.states[s] || "–";
      }
    });
    if (r.turns) turnsCell(tr, r.turns); else textCell(tr, r.input);
    textCell(tr, r.expected);
    var answered = r.outcome === "completed" || !r.error;
    var last = !answered ? textCell(tr, r.error, "error")
      : r.tool_calls ? callsCell(tr, r.tool_calls, r.tool_call_text) : textCell(tr, r.output);
    if (r.reasoning) reasoning(last, r.reasoning);
    if (r.files.length) {
      var links = document.createElement("div");
      links.className = "files";
      r.files.forEach(function (path) {
        var a = document.createElement("a");
        a.href = data.artifacts + "/" + path.split("/").map(encodeURIComponent).join("/");
        a.textContent = path.split("/").pop();
        a.rel = "noopener";
        links.appendChild(a);
      });
      last.appendChild(links);
    }
    tr.hidden = true;
    tbody.appendChild(tr);
    var hay = texts(r);
    return { r: r, tr: tr, hay: hay };
  });
  var limit = data.page;
  function compare(x, op, v) {
    if (op === "<") return x < v; if (op === "<=") return x <= v; if (op === "=") return x === v;
    if (op === ">=") return x >= v; return x > v;
  }
  function apply() {
    var outcome = ui.outcome.value, scorer = ui.scorer.value, op = ui.op.value;
    var v = parseFloat(ui.value.value), q = ui.search.value.trim().toLowerCase();
    var matched = 0, shown = 0;
    rows.forEach(function (row) {
      var ok = !outcome || row.r.outcome === outcome;
      if (ok && scorer) {
        var x = row.r.scores[scorer];
        ok = typeof x === "number" && (isNaN(v) || compare(x, op, v));
      }
      if (ok && q) ok = row.hay.indexOf(q) !== -1;
      var show = ok && shown < limit;
      if (ok) matched += 1;
      if (show) shown += 1;
      row.tr.hidden = !show;
    });
    ui.count.textContent = shown < matched
      ? "showing " + shown + " of " + matched + " matching (" + rows.length + " items)"
      : matched + " of " + rows.length + " items";
    ui.more.hidden = shown >= matched;
  }
  function reset() { limit = data.page; apply(); }
  [ui.outcome, ui.scorer, ui.op].forEach(function (el) { el.addEventListener("change", reset); });
  [ui.value, ui.search].forEach(function (el) { el.addEventListener("input", reset); });
  ui.more.addEventListener("click", function () { limit += data.page; apply(); });
  apply();
})();
