(function () {
  "use strict";
  const data = JSON.parse(document.getElementById("data").textContent);
  const key = "evalkit-review:" + data.sample_id;
  const $ = function (id) { return document.getElementById(id); };
  // answers: record id -> {value | label, at}; "skip" marks a record passed over
  let state = { pos: 0, answers: {}, labeler: "" };
  try { state = Object.assign(state, JSON.parse(localStorage.getItem(key) || "{}")); }
  catch (err) { /* a broken entry: start again */ }
  const choices = data.labels.length
    ? data.labels.map(function (l, i) { return { key: String(i + 1), text: l, label: l }; })
    : [{ key: "1", text: "yes (1)", value: 1 }, { key: "0", text: "no (0)", value: 0 }];
  choices.push({ key: "s", text: "skip (s)", skip: true });
  let showVerdict = false;

  function save() { localStorage.setItem(key, JSON.stringify(state)); }

  function text(id, value) { $(id).textContent = value == null ? "(none)" : String(value); }

  function show() {
    const n = data.records.length;
    state.pos = Math.max(0, Math.min(n - 1, state.pos));
    const rec = data.records[state.pos];
    text("title", data.judge + " · " + data.sample_id + " (" + data.design + ")");
    text("rid", "record " + (state.pos + 1) + " of " + n + ": " + rec.id +
         (rec.model ? " · " + rec.model : ""));
    text("input", rec.input);
    text("output", rec.output);
    const ctx = $("context");
    ctx.replaceChildren();
    (rec.context.length ? rec.context : [null]).forEach(function (c) {
      const pre = document.createElement("pre");
      pre.textContent = c == null ? "(none)" : c;
      ctx.appendChild(pre);
    });
    const answer = state.answers[rec.id];
    text("answer", answer === undefined ? "not labelled yet"
      : answer.skip ? "skipped" : "your label: " + (answer.label != null ? answer.label : answer.value));
    const box = $("choices");
    box.replaceChildren();
    choices.forEach(function (c) {
      const b = document.createElement("button");
      b.type = "button";
      b.textContent = c.text;
      b.dataset.key = c.key;
      if (answer && ((c.skip && answer.skip) || (!c.skip && !answer.skip &&
          (c.label != null ? answer.label === c.label : answer.value === c.value)))) {
        b.className = "on";
      }
      b.addEventListener("click", function () { choose(c); });
      box.appendChild(b);
    });
    const v = $("verdict");
    v.hidden = !showVerdict;
    v.textContent = showVerdict ? "judge " + data.judge + ": value " + rec.verdict.value +
      (rec.verdict.label != null ? ", label " + rec.verdict.label : "") +
      (rec.verdict.explanation ? " · " + rec.verdict.explanation : "") : "";
    const done = data.records.filter(function (r) {
      const a = state.answers[r.id]; return a && !a.skip;
    }).length;
    text("progress", done + " of " + n + " labelled");
    $("labeler").value = state.labeler || "";
  }

  function choose(c) {
    const rec = data.records[state.pos];
    state.answers[rec.id] = c.skip ? { skip: true }
      : { value: c.value, label: c.label, at: new Date().toISOString() };
    state.pos = Math.min(data.records.length - 1, state.pos + 1);
    save();
    show();
  }

  function exportLabels() {
    const labeler = (state.labeler || "").trim();
    if (!labeler) { $("labeler").focus(); alert("Type your name in 'labeler' first."); return; }
    const lines = data.records.filter(function (r) {
      const a = state.answers[r.id]; return a && !a.skip;
    }).map(function (r) {
      const a = state.answers[r.id];
      const row = { record_id: r.id, judge: data.judge, labeler: labeler,
        labelled_at: a.at, sample_id: data.sample_id, run_id: data.run_id, source: "review" };
      if (a.label != null) row.label = a.label; else row.value = a.value;
      return JSON.stringify(row);
    });
    const blob = new Blob([lines.join("\n") + (lines.length ? "\n" : "")],
      { type: "application/x-ndjson" });
    const a = document.createElement("a");
    a.href = URL.createObjectURL(blob);
    a.download = "labels-" + data.sample_id + ".jsonl";
    document.body.appendChild(a);
    a.click();
    a.remove();
  }

  $("labeler").addEventListener("input", function (ev) {
    state.labeler = ev.target.value; save(); });
  $("labeler").addEventListener("keydown", function (ev) {
    if (ev.key === "Enter") { ev.target.blur(); } });  // back to the labelling keys
  $("export").addEventListener("click", exportLabels);
  document.addEventListener("keydown", function (ev) {
    if (ev.target && ev.target.tagName === "INPUT") return;
    if (ev.key === "ArrowRight") { state.pos += 1; save(); show(); return; }
    if (ev.key === "ArrowLeft") { state.pos -= 1; save(); show(); return; }
    if (ev.key === "v") { showVerdict = !showVerdict; show(); return; }
    const c = choices.find(function (x) { return x.key === ev.key; });
    if (c) { choose(c); }
  });
  show();
  document.body.dataset.ready = "1";
})();
