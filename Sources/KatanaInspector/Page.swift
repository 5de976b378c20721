/// The page: static HTML and a script that renders the snapshot JSON and follows the live stream (EventSource).
/// Every value is put into the page as text (`textContent`), never as markup: type names and the app's state
/// cannot inject anything.
enum Page {
    static func html(base: String) -> String {
        // The base path is the app's own configuration; it is still escaped for the attribute it lands in.
        let base = base.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "\"", with: "&quot;")
            .replacingOccurrences(of: "<", with: "&lt;")
        return """
        <!doctype html>
        <html lang="en"><head><meta charset="utf-8"><title>Katana inspector</title>
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <style>
        body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #1d2330; background: #fafbfc; }
        h1 { font-size: 1.3em; margin: 0 0 .2em; } h2 { font-size: 1.05em; margin: 1.4em 0 .4em; }
        table { border-collapse: collapse; background: #fff; box-shadow: 0 0 0 1px #dde1e7; }
        th, td { padding: .25em .6em; border-bottom: 1px solid #eceff3; text-align: right; white-space: nowrap; }
        th { background: #f0f2f5; font-weight: 600; } td.name, th.name { text-align: left; }
        td.zero { color: #b8bec8; } .muted { color: #6b7380; } .bad { color: #b3261e; font-weight: 600; }
        .chain { color: #6b7380; font-size: .9em; } pre { background: #fff; padding: .8em; box-shadow: 0 0 0 1px #dde1e7; overflow: auto; max-height: 30em; }
        #status.live { color: #1a7f37; } #status.down { color: #b3261e; }
        </style></head>
        <body data-base="\(base)">
        <h1>Katana inspector</h1>
        <div class="muted"><span id="status">connecting…</span> · <span id="taken"></span> · <span id="window"></span>
        · <a id="trace" href="#" hidden>the last moments as a Perfetto trace</a> <a id="metrics" href="#" hidden>metrics</a></div>
        <h2>Dispatches by type <span class="muted" id="counts-from"></span></h2>
        <table id="types"></table>
        <h2>In flight now</h2><table id="in-flight"></table>
        <h2>Slowest recent dispatches</h2><table id="slowest"></table>
        <h2>Failed recent dispatches</h2><table id="failed"></table>
        <h2>Recent updaters</h2><table id="updaters"></table>
        <h2>State</h2><pre id="state">not shown (the app has not enabled the state view)</pre>
        <script>
        "use strict";
        const base = document.body.dataset.base;
        const rowNames = ["≥0", "≥1µs", "≥10µs", "≥100µs", "≥1ms", "≥10ms", "≥100ms", "≥1s"];
        function duration(ns) {
          if (ns == null) return "–";
          if (ns < 1e3) return ns + " ns";
          if (ns < 1e6) return (ns / 1e3).toFixed(1) + " µs";
          if (ns < 1e9) return (ns / 1e6).toFixed(2) + " ms";
          return (ns / 1e9).toFixed(2) + " s";
        }
        function chain(parents) {
          if (!parents || parents.length === 0) return "–";
          return parents.map(p => (p.name || "(before the window)") + " #" + p.id).join(" ← ");
        }
        function table(id, head, rows, empty) {
          const t = document.getElementById(id);
          t.replaceChildren();
          const tr = t.insertRow();
          head.forEach((h, i) => { const th = document.createElement("th"); th.textContent = h; if (i === 0) th.className = "name"; tr.appendChild(th); });
          if (rows.length === 0) { const c = t.insertRow().insertCell(); c.colSpan = head.length; c.className = "name muted"; c.textContent = empty; return; }
          for (const row of rows) {
            const r = t.insertRow();
            row.forEach((v, i) => {
              const c = r.insertCell();
              c.textContent = String(v);
              if (i === 0 || (typeof v === "string" && v.includes("←"))) c.className = "name";
              if (v === 0) c.className = "zero";
              if (v === "error" || v === "applied_with_error") c.className = "bad";
            });
          }
        }
        function render(s) {
          document.getElementById("taken").textContent = "updated " + new Date(s.taken_at).toLocaleTimeString();
          const w = s.window;
          document.getElementById("window").textContent = w.recorder
            ? "flight recorder: " + w.events + " events on " + w.threads + " threads, the last " + duration(w.span_nanoseconds)
            : "no flight recorder read";
          document.getElementById("counts-from").textContent = s.counts_from === "metrics" ? "(since start, from the metrics)" : "(in the flight recorder's window)";
          for (const [id, key] of [["trace", "trace"], ["metrics", "metrics"]]) {
            const a = document.getElementById(id);
            if (s.links[key]) { a.href = s.links[key]; a.hidden = false; } else { a.hidden = true; }
          }
          table("types", ["type", "kind", "count"].concat(rowNames, ["outcomes"]),
                s.types.map(t => [t.name, t.kind, t.count].concat(t.buckets,
                  [Object.entries(t.outcomes).map(([k, v]) => k + " " + v).join(", ")])), "nothing dispatched yet");
          table("in-flight", ["dispatch", "id", "status", "age", "parents"],
                s.in_flight.map(d => [d.name, d.id, d.status, duration(d.age_nanoseconds), chain(d.parents)]), "nothing in flight");
          const finished = d => [d.name, d.id, d.kind, d.outcome, duration(d.service_nanoseconds),
                                 duration(d.queue_wait_nanoseconds), duration(d.ended_ago_nanoseconds) + " ago", chain(d.parents)];
          const head = ["dispatch", "id", "kind", "outcome", "service", "queue wait", "ended", "parents"];
          table("slowest", head, s.slowest.map(finished), "none in the window");
          table("failed", head, s.failed.map(finished), "none in the window");
          table("updaters", ["updater", "id", "outcome", "service", "changed the state", "listeners", "ended"],
                s.updaters.map(u => [u.name, u.id, u.outcome, duration(u.service_nanoseconds), u.changed ? "yes" : "no",
                                     u.listeners == null ? "–" : u.listeners, duration(u.ended_ago_nanoseconds) + " ago"]), "none in the window");
          const state = document.getElementById("state");
          if (s.state.shown) state.textContent = s.state.error ? s.state.error : JSON.stringify(s.state.value, null, 2);
          document.body.dataset.updates = String(Number(document.body.dataset.updates || 0) + 1);
        }
        const status = document.getElementById("status");
        fetch(base + "/snapshot.json").then(r => r.json()).then(render).catch(() => {});
        const live = new EventSource(base + "/events");
        live.onopen = () => { status.textContent = "live"; status.className = "live"; };
        live.onmessage = e => { try { render(JSON.parse(e.data)); } catch (error) { status.textContent = "bad update: " + error; } };
        live.onerror = () => { status.textContent = "reconnecting…"; status.className = "down"; };
        </script>
        </body></html>
        """
    }
}
