// What the pages need beside their HTML, served by the agent itself (nothing from elsewhere):
// their style, their script (`/app.js`: the only script the pages' policy lets run) and the
// favicon (`/favicon.svg`).
enum PageAssets {
    /// The pages' style: a column that fits a phone (the live view its full width), touch
    /// targets at least 44 px tall, pictures whole (never cropped: `contain`).
    static let style = """
        body{font:16px/1.4 system-ui,sans-serif;margin:0 auto;max-width:60rem;padding:0 .5rem;color:#222}
        header{display:flex;flex-wrap:wrap;align-items:center;gap:0 1rem}
        h1{font-size:1.4rem;margin:.5rem 0}h1 a{color:inherit;text-decoration:none}
        .now{color:#555;margin:.25rem 0}.recording{color:#b00;font-weight:bold}
        .live{margin:0}.live video{display:block;width:100%;height:auto;max-height:60vh;aspect-ratio:auto 16/9;background:#222;border-radius:4px}
        h2{font-size:1.1rem;border-bottom:1px solid #ccc;margin-top:1.2rem}h3{font-size:1rem}
        a,button{display:inline-block;min-height:44px;line-height:44px;padding:0 .4rem;box-sizing:border-box}
        a{color:#05c}button{font:inherit;min-width:44px;border-radius:4px;border:1px solid #888;background:#f4f4f4}
        .filters{font-size:.9rem;color:#444;margin:.5rem 0}.filters a.on,.hourlinks a.on{font-weight:bold;color:#222;text-decoration:none}
        ul{list-style:none;padding:0}
        .clips{display:grid;grid-template-columns:repeat(auto-fill,minmax(14rem,1fr));gap:1rem}
        .clips a.pic{display:block;padding:0;line-height:0}
        .clips img,.nopic{width:100%;height:auto;aspect-ratio:16/9;object-fit:contain;background:#222;border-radius:4px}
        .nopic{display:flex;align-items:center;justify-content:center;color:#ccc;line-height:1.4}
        .meta{font-size:.9rem;color:#444}
        .days{display:grid;grid-template-columns:repeat(auto-fill,minmax(11rem,1fr));gap:0 1rem}.days span{color:#555}
        .timeline{position:relative;height:48px;margin:1rem 0 0;border-radius:4px;background:#eee linear-gradient(90deg,#ccc 1px,transparent 1px) 0 0/4.1667% 100%}
        .timeline a{position:absolute;top:0;width:3px;height:48px;min-height:48px;padding:0;background:#c30;opacity:.8}
        .timeline a:hover,.timeline a:focus{background:#000;opacity:1}
        .hours{display:flex;justify-content:space-between;font-size:.8rem;color:#555}
        .hourlinks{margin:.5rem 0}
        .pager{margin:1rem 0}.off{color:#999;display:inline-block;min-height:44px;line-height:44px;padding:0 .4rem}
        .uploaded{color:#060}.waiting{color:#850}.failed{color:#b00}
        #peek{position:absolute;z-index:2;width:16rem;max-width:80vw;aspect-ratio:16/9;object-fit:contain;background:#222;border-radius:4px;pointer-events:none}
        """

    /// The favicon: a camera's lens, drawn.
    static let favicon = """
        <svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32"><rect x="2" y="7" width="28" height="20" rx="4" fill="#234"/>\
        <circle cx="16" cy="17" r="7" fill="#9cf"/><circle cx="16" cy="17" r="3" fill="#123"/><circle cx="25" cy="11" r="1.5" fill="#e33"/></svg>

        """

    /// `/app.js`: the live updates (a light poll of `/api/now`: when a clip is saved, the list
    /// is fetched again and put in place; "recording now" and detection kept current), the
    /// timeline's picture on hover or focus, and the record / detection buttons (JSON to the
    /// same API as `curl`, so its password and origin rules hold). No `eval`, nothing inline.
    static let script = """
        "use strict";
        (() => {
          const $ = (id) => document.getElementById(id);
          let list = $("clips");
          let newest = list ? list.dataset.newest : null;
          const controls = $("controls");
          const said = $("said");
          const say = (text) => { if (said) said.textContent = text; };
          const show = (now) => {
            const state = $("state");
            if (state) {
              state.textContent = now.recording ? "recording now" : "watching";
              state.className = now.recording ? "recording" : "";
            }
            const detection = $("detection");
            if (detection) {
              detection.dataset.on = String(now.detection);
              detection.textContent = "Detection " + (now.detection ? "on" : "off");
            }
          };
          const peek = () => {
            const timeline = document.querySelector(".timeline");
            if (!timeline) return;
            let picture = null;
            const hide = () => { if (picture) { picture.remove(); picture = null; } };
            const over = (event) => {
              const mark = event.target.closest("a[data-pic]");
              if (!mark) return;
              hide();
              picture = document.createElement("img");
              picture.id = "peek";
              picture.alt = "";
              picture.src = mark.dataset.pic;
              const box = mark.getBoundingClientRect();
              const left = Math.max(4, Math.min(box.left + window.scrollX - 128, document.documentElement.clientWidth - 260));
              picture.style.left = left + "px";
              picture.style.top = (box.bottom + window.scrollY + 4) + "px";
              document.body.appendChild(picture);
            };
            timeline.addEventListener("mouseover", over);
            timeline.addEventListener("focusin", over);
            timeline.addEventListener("mouseleave", hide);
            timeline.addEventListener("focusout", hide);
          };
          const refresh = async () => {
            const answer = await fetch(location.href, { cache: "no-store" });
            if (!answer.ok) return;
            const page = new DOMParser().parseFromString(await answer.text(), "text/html");
            const fresh = page.getElementById("clips");
            const header = page.querySelector("header .now");
            if (!fresh || !list) return;
            list.replaceWith(document.importNode(fresh, true));
            list = $("clips");
            newest = list.dataset.newest;
            const now = document.querySelector("header .now");
            if (header && now) now.replaceWith(document.importNode(header, true));
            peek();
          };
          const poll = async () => {
            try {
              const answer = await fetch("/api/now", { cache: "no-store" });
              if (answer.ok) {
                const now = await answer.json();
                if (list && now.newest !== newest) await refresh();
                show(now);
              }
            } catch (error) {
              // The camera is out of reach for a moment: the next poll tries again.
            }
            setTimeout(poll, document.hidden ? 15000 : 3000);
          };
          const post = async (path, body) => {
            const answer = await fetch(path, {
              method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
            });
            const text = answer.headers.get("Content-Type") === "application/json" ? "" : await answer.text();
            return { ok: answer.ok, text: text.trim() };
          };
          if (controls) {
            controls.hidden = false;
            $("record").addEventListener("click", async () => {
              const r = await post("/api/trigger", {});
              say(r.ok ? "Recording." : r.text);
            });
            $("detection").addEventListener("click", async (event) => {
              const on = event.currentTarget.dataset.on !== "true";
              const r = await post("/api/detection", { enabled: on });
              if (r.ok) show({ detection: on, recording: $("state").className === "recording" });
              say(r.ok ? "Detection " + (on ? "on." : "off.") : r.text);
            });
          }
          // The live view at the newest frame: the agent's one-frame fragments (/live/edge.mp4)
          // appended to a Media Source Extensions buffer, the player moved to the newest frame
          // whenever it is more than 0.3 s behind (at the start, after a pause, a hidden tab, a
          // stall, a gap the agent left when the connection fell behind). A stream that ends or
          // breaks (the agent restarted, the camera changed format) is asked for again, after
          // 0.25 s and up to a second between tries, on a new buffer. Without MSE (Safari on
          // iPhone before 17.1) the markup's HLS plays, started here.
          const liveView = (video) => {
            const Source = window.ManagedMediaSource || window.MediaSource;
            if (!video) return;
            if (!Source) {
              video.play().catch(() => {});  // the markup's sources: HLS first
              return;
            }
            video.disableRemotePlayback = true;  // ManagedMediaSource plays only so (no AirPlay)
            const behind = 0.3;
            let pause = 250;
            const edge = () => (video.buffered.length ? video.buffered.end(video.buffered.length - 1) : 0);
            const toEdge = (most) => {
              const end = edge();
              if (end > 0 && !video.paused && end - video.currentTime > most) video.currentTime = Math.max(0, end - 0.04);
            };
            const join = (parts) => {
              const all = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
              let at = 0;
              for (const p of parts) { all.set(p, at); at += p.length; }
              return all;
            };
            const find = (bytes, name, from, to) => {
              const c = [...name].map((ch) => ch.charCodeAt(0));
              for (let i = from; i + 4 <= to; i++) {
                if (bytes[i] === c[0] && bytes[i + 1] === c[1] && bytes[i + 2] === c[2] && bytes[i + 3] === c[3]) return i;
              }
              return -1;
            };
            // The MIME type of the stream whose initialization segment (ftyp, moov) `bytes` begin
            // with, once it is whole: the avcC's profile and level, and Opus when there is sound.
            const typeOf = (bytes) => {
              const size = (at) => (bytes[at] << 24 >>> 0) + (bytes[at + 1] << 16) + (bytes[at + 2] << 8) + bytes[at + 3];
              if (bytes.length < 8) return null;
              const moov = size(0);
              if (bytes.length < moov + 8) return null;
              const end = moov + size(moov);
              if (bytes.length < end) return null;
              const avcC = find(bytes, "avcC", moov, end);
              if (avcC < 0) return "";
              const hex = (b) => b.toString(16).padStart(2, "0");
              const avc = "avc1." + hex(bytes[avcC + 5]) + hex(bytes[avcC + 6]) + hex(bytes[avcC + 7]);
              return 'video/mp4; codecs="' + avc + (find(bytes, "Opus", moov, end) >= 0 ? ',opus"' : '"');
            };
            const play = async () => {
              const stop = new AbortController();
              const source = new Source();
              const opened = new Promise((done) => source.addEventListener("sourceopen", done, { once: true }));
              video.src = URL.createObjectURL(source);
              await opened;
              URL.revokeObjectURL(video.src);
              let buffer = null;
              let first = true;
              const queue = [];
              const pump = () => {
                if (!buffer || buffer.updating || source.readyState !== "open") return;
                const end = edge();
                if (!queue.length && video.buffered.length && end - video.buffered.start(0) > 30) {
                  buffer.remove(0, end - 10);  // a bounded buffer: the last ten seconds
                  return;
                }
                if (!queue.length) return;
                try { buffer.appendBuffer(join(queue.splice(0))); } catch (error) { stop.abort(); }
              };
              let heard = Date.now();
              const watch = setInterval(() => { if (Date.now() - heard > 5000) stop.abort(); }, 1000);
              try {
                const answer = await fetch("/live/edge.mp4", { cache: "no-store", signal: stop.signal });
                if (!answer.ok || !answer.body) return;
                video.dataset.clock = answer.headers.get("X-Capture-Clock") || "";
                const reader = answer.body.getReader();
                let start = new Uint8Array(0);
                for (;;) {
                  const { done, value } = await reader.read();
                  if (done) break;
                  heard = Date.now();
                  pause = 250;
                  if (!buffer) {
                    start = join([start, value]);
                    const type = typeOf(start);
                    if (type === null) continue;
                    if (!type) return;
                    buffer = source.addSourceBuffer(type);
                    buffer.addEventListener("updateend", () => {
                      if (first && video.buffered.length) {
                        first = false;
                        video.currentTime = Math.max(0, edge() - 0.04);
                        video.play().catch(() => {});
                      }
                      toEdge(behind);
                      pump();
                    });
                    queue.push(start);
                  } else {
                    queue.push(value);
                  }
                  pump();
                }
              } finally {
                clearInterval(watch);
                stop.abort();
              }
            };
            const again = async () => {
              for (;;) {
                try { await play(); } catch (error) {
                  // The agent is out of reach (restarting): asked again below.
                }
                await new Promise((done) => setTimeout(done, pause));
                pause = Math.min(pause * 2, 1000);
              }
            };
            video.addEventListener("play", () => toEdge(0.05));
            document.addEventListener("visibilitychange", () => { if (!document.hidden) toEdge(0.05); });
            video.addEventListener("waiting", () => setTimeout(() => toEdge(behind), 500));
            again();
          };
          peek();
          liveView($("live"));
          if (list) setTimeout(poll, 3000);
        })();

        """
}
