"use strict";
// evalkit report: tabs between runs and the per-record drill-down. Data only ever reaches
// the page through textContent (never innerHTML): judged text is hostile.
(function () {
  const PAGE = 50;

  function el(tag, cls, text) {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function fmt(v) {
    if (v === null || v === undefined) return "—";
    if (typeof v === "boolean") return String(v);
    if (typeof v !== "number") return String(v);
    if (Math.abs(v) < 5e-13) return "0";
    return String(Number(v.toPrecision(4)));
  }

  function short(s, n) {
    s = s === null || s === undefined ? "" : String(s);
    return s.length > n ? s.slice(0, n - 1) + "…" : s;
  }

  // tabs (several runs on one page)
  document.querySelectorAll("nav.tabs button").forEach(function (btn) {
    btn.addEventListener("click", function () {
      document.querySelectorAll("nav.tabs button").forEach(function (b) {
        b.classList.toggle("on", b === btn);
      });
      document.querySelectorAll("div.run").forEach(function (div) {
        div.hidden = div.dataset.run !== btn.dataset.tab;
      });
    });
  });

  function Drill(root, data) {
    const rec = data.records;
    const judges = data.judges;
    const names = Object.keys(judges);
    const n = rec.record_id.length;
    const q = root.querySelector(".q");
    const fModel = root.querySelector(".f-model");
    const fState = root.querySelector(".f-state");
    const tbody = root.querySelector("tbody");
    const count = root.querySelector(".count");
    const pageLabel = root.querySelector(".page");
    const detail = root.querySelector(".detail");
    let hay = null; // lower-cased search text per record, built on the first search
    let matches = [];
    let page = 0;

    const models = Array.from(new Set(rec.model.filter(function (m) { return m !== null; })))
      .sort().slice(0, 500);
    models.forEach(function (m) {
      const o = el("option", null, m);
      o.value = m;
      fModel.appendChild(o);
    });

    function flagged(i) {
      return names.some(function (j) { return judges[j].passed[i] === false; });
    }
    function errored(i) {
      return names.some(function (j) { return judges[j].status[i] === "error"; });
    }
    function haystack() {
      if (hay) return hay;
      hay = new Array(n);
      for (let i = 0; i < n; i++) {
        const parts = [rec.record_id[i], rec.model[i], rec.input[i], rec.output[i],
          rec.exclude_reason[i], rec.reference[i]];
        names.forEach(function (j) {
          parts.push(judges[j].label[i], judges[j].explanation[i], judges[j].error[i]);
        });
        hay[i] = parts.filter(function (p) { return p !== null && p !== undefined; })
          .join("\u0001").toLowerCase();
      }
      return hay;
    }

    function apply() {
      const text = q.value.trim().toLowerCase();
      const model = fModel.value;
      const state = fState.value;
      const h = text ? haystack() : null;
      matches = [];
      for (let i = 0; i < n; i++) {
        if (model && rec.model[i] !== model) continue;
        if (state === "included" && rec.excluded_by[i] !== null) continue;
        if (state === "excluded" && rec.excluded_by[i] === null) continue;
        if (state === "flagged" && !flagged(i)) continue;
        if (state === "error" && !errored(i)) continue;
        if (h && h[i].indexOf(text) < 0) continue;
        matches.push(i);
      }
      page = 0;
      render();
    }

    function judgmentSummary(i) {
      return names.map(function (j) {
        const c = judges[j];
        const s = c.status[i];
        if (s === null || s === undefined) return null;
        if (s !== "ok") return j + ": " + s;
        let v = c.label[i] !== null ? c.label[i] : fmt(c.value[i]);
        if (c.passed[i] === false) v += " ⚑";
        return j + ": " + v;
      }).filter(function (x) { return x !== null; }).join(" · ");
    }

    function render() {
      const pages = Math.max(1, Math.ceil(matches.length / PAGE));
      page = Math.min(page, pages - 1);
      tbody.textContent = "";
      const start = page * PAGE;
      matches.slice(start, start + PAGE).forEach(function (i) {
        const tr = el("tr");
        tr.dataset.index = String(i);
        tr.appendChild(el("td", "id", rec.record_id[i]));
        tr.appendChild(el("td", null, rec.model[i]));
        tr.appendChild(el("td", rec.excluded_by[i] ? "excl" : null,
          rec.excluded_by[i] ? "excluded: " + rec.excluded_by[i] : "included"));
        tr.appendChild(el("td", "cell", short(rec.question[i], 160)));
        tr.appendChild(el("td", "cell", short(rec.output[i], 160)));
        tr.appendChild(el("td", "cell", judgmentSummary(i)));
        tr.addEventListener("click", function () { show(i); });
        tbody.appendChild(tr);
      });
      count.textContent = matches.length.toLocaleString() + " of " + n.toLocaleString() +
        " records" + (data.total > n ? " shown here (" + data.total.toLocaleString() +
        " in the run)" : "");
      pageLabel.textContent = "page " + (page + 1) + " of " + pages;
    }

    function block(parent, title, text) {
      if (text === null || text === undefined || text === "") return;
      parent.appendChild(el("h4", null, title));
      parent.appendChild(el("pre", null, text));
    }

    function show(i) {
      detail.hidden = false;
      detail.textContent = "";
      detail.appendChild(el("h3", null, "record " + rec.record_id[i]));
      const meta = el("p", "muted");
      meta.textContent = ["model " + (rec.model[i] || "—"), "level " + (rec.level[i] || "—"),
        rec.excluded_by[i] ? "excluded by " + rec.excluded_by[i] + ": " +
          (rec.exclude_reason[i] || "") : "included",
        "latency " + fmt(rec.latency_s[i]) + " s", "cost " + fmt(rec.cost_usd[i]),
        "human label " + (rec.human_label[i] || "—"), "outcome " + (rec.outcome[i] || "—"),
        rec.timestamp[i] || ""].join(" · ");
      detail.appendChild(meta);
      block(detail, "input", rec.input[i]);
      block(detail, "output", rec.output[i]);
      block(detail, "context", rec.context[i]);
      block(detail, "reference", rec.reference[i]);
      names.forEach(function (j) {
        const c = judges[j];
        if (c.status[i] === null || c.status[i] === undefined) return;
        const box = el("div", "judgment");
        box.appendChild(el("h4", null, j + " · " + c.status[i] + " · value " + fmt(c.value[i]) +
          " · label " + (c.label[i] || "—") + " · passed " + fmt(c.passed[i]) +
          " · " + (c.origin[i] || "")));
        block(box, "explanation", c.explanation[i]);
        block(box, "error" + (c.error_cause && c.error_cause[i] ? " (" + c.error_cause[i] + ")" : ""),
          c.error[i]);
        const ex = c.exchange[i];
        if (ex) {
          let parsed = null;
          try { parsed = JSON.parse(ex); } catch (err) { parsed = null; }
          if (parsed && parsed.calls) {
            parsed.calls.forEach(function (call, k) {
              const d = el("details", "exchange");
              d.appendChild(el("summary", null, "exchange, call " + (k + 1) +
                (call.cached ? " (from the cache)" : "") + (call.error ? ": " + call.error : "")));
              (call.messages || []).forEach(function (m) {
                block(d, "sent · " + (m.role || ""), typeof m.content === "string" ?
                  m.content : JSON.stringify(m.content));
              });
              block(d, "reply (raw)", call.reply);
              box.appendChild(d);
            });
            if (parsed.calls_cut) {
              box.appendChild(el("p", "muted", parsed.calls_cut + " more calls not kept"));
            }
          } else {
            block(box, "exchange", ex);
          }
        } else {
          block(box, "raw reply", c.raw[i]);
        }
        detail.appendChild(box);
      });
      detail.scrollIntoView({ block: "nearest" });
    }

    let timer = null;
    q.addEventListener("input", function () {
      clearTimeout(timer);
      timer = setTimeout(apply, 150);
    });
    fModel.addEventListener("change", apply);
    fState.addEventListener("change", apply);
    root.querySelector(".prev").addEventListener("click", function () {
      if (page > 0) { page--; render(); }
    });
    root.querySelector(".next").addEventListener("click", function () {
      if ((page + 1) * PAGE < matches.length) { page++; render(); }
    });
    apply();
  }

  document.querySelectorAll("div.drill").forEach(function (root) {
    const node = document.getElementById("drill-" + root.dataset.drill);
    if (!node) return;
    Drill(root, JSON.parse(node.textContent));
  });
  // a flipped record on the comparison page: open its run's tab and find it in the drill-down
  document.querySelectorAll("a.drill[data-record]").forEach(function (a) {
    a.addEventListener("click", function (ev) {
      ev.preventDefault();
      document.querySelectorAll("div.run").forEach(function (run) {
        if (run.dataset.runId !== a.dataset.runId) return;
        const tab = document.querySelector('nav.tabs button[data-tab="' + run.dataset.run + '"]');
        if (tab) tab.click();
        const q = run.querySelector("div.drill .q");
        if (!q) return;
        q.value = a.dataset.record;
        q.dispatchEvent(new Event("input"));
        q.scrollIntoView();
      });
    });
  });
  document.body.dataset.ready = "1";
})();
