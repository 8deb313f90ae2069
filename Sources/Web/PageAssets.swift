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
          peek();
          if (list) setTimeout(poll, 3000);
        })();

        """
}
