import Foundation
import Recorder
import Storage
import TestSupport
import Testing

/// Issue 43, 4, as an owner meets it: the agent's page in Debian's Chromium (headless) at a
/// laptop's size (1280×800) and a phone's (390×844), on a storage directory with 351 clips in
/// one day (real clips, each with a 16:9 picture). Screenshots are kept as test output
/// (`.build/test-output/page/`); what the owner would notice is measured in the page through
/// Chromium's DevTools protocol: the live view's width, no picture cropped, every link and
/// button at least 44 px tall, the buttons doing what they say, and the list updated without a
/// reload when a clip is saved.
@Suite(.serialized) struct PageBrowserTests {
    /// The day of the 351 clips, one every 4 minutes from midnight UTC.
    static let day = "2026-12-01"

    /// A storage directory at `dir/clips` with 351 real clips of `day`, each with its picture (a
    /// 640×360 frame: 16:9), entered as the agent enters them (journal and catalogue).
    static func storage(_ dir: TemporaryDirectory) throws {
        let storage = DiskStorage(root: dir.file("clips"))
        try storage.createRoot()
        let picture = dir.file("picture.jpg")
        let made = try runTool(
            "ffmpeg",
            ["-nostdin", "-v", "error", "-f", "lavfi", "-i", "testsrc=size=640x360", "-frames:v", "1", picture])
        try #require(made.status == 0, "\(made.stderr)")
        let utc = TimeZone(identifier: "UTC")!
        let naming = ClipNaming(pattern: "%Y-%m-%d/{camera}-%Y%m%d-%H%M%S.mov", camera: "yard", timeZone: utc)
        // 2026-12-01 00:00:00 UTC.
        let midnight = Date(timeIntervalSince1970: 1_796_083_200)
        for i in 0..<351 {
            let created = midnight.addingTimeInterval(Double(i) * 240)
            let name = naming.relativePath(for: created)
            let summary = try TestClips.write(name, into: storage, created: created, gops: 1, audio: false)
            let snapshot = String(name.dropLast(4)) + ".jpg"
            try FileManager.default.linkItem(atPath: picture, toPath: dir.file("clips/" + snapshot))
            try storage.enter(
                ClipRecord(
                    file: name, camera: "yard", start: ClipRecord.timestamp(created, timeZone: utc),
                    end: ClipRecord.timestamp(created.addingTimeInterval(summary.duration.seconds), timeZone: utc),
                    cause: i % 10 == 3 ? .external : .motion, triggerTime: nil, triggerSourceSeconds: nil,
                    preRollSeconds: 0, durationSeconds: summary.duration.seconds, frames: summary.videoFrames,
                    audioFrames: summary.audioFrames, bytes: summary.bytes, peakScore: 0.2, part: 1,
                    snapshot: snapshot),
                pictureBytes: Int64((try FileManager.default.attributesOfItem(atPath: picture)[.size] as? Int) ?? 0))
        }
    }

    /// Where the screenshots are kept after the test's directory is gone.
    static var output: String {
        let build = ((builtProductsDirectory() as NSString).deletingLastPathComponent as NSString)
            .deletingLastPathComponent
        return (build as NSString).appendingPathComponent("test-output/page")
    }

    /// What the page measures of itself, as JSON: the live view's width, the links and buttons
    /// shown that are less than 44 px tall, the pictures loaded and those not shown whole.
    static let measure = """
        JSON.stringify((() => {
          const shown = (e) => { const r = e.getBoundingClientRect(); return r.width > 0 && r.height > 0; };
          const live = document.querySelector(".live video");
          const small = [...document.querySelectorAll("a, button")].filter(shown)
            .filter((e) => e.getBoundingClientRect().height < 44).map((e) => e.outerHTML.slice(0, 100));
          const pictures = [...document.querySelectorAll("img")].filter((i) => i.complete && i.naturalWidth > 0);
          const cropped = pictures.filter((i) => {
            const fit = getComputedStyle(i).objectFit;
            const box = i.getBoundingClientRect();
            const natural = i.naturalWidth / i.naturalHeight, shownAspect = box.width / box.height;
            return fit === "cover" || (fit !== "contain" && Math.abs(natural - shownAspect) > 0.02);
          }).length;
          return { viewport: document.documentElement.clientWidth, live: live ? live.getBoundingClientRect().width : 0, small, pictures: pictures.length, cropped,
                   marks: document.querySelectorAll(".timeline a").length, controls: document.getElementById("controls")?.hidden === false,
                   newest: document.getElementById("clips")?.dataset.newest ?? null, ready: document.readyState, marker: window.vigilTestMarker === 1,
                   cards: [...document.querySelectorAll(".clips li a.pic")].map((a) => a.getAttribute("href")) };
        })())
        """

    @Test func thePageAtALaptopsAndAPhonesSizeWithADayOf351Clips() throws {
        let dir = try TemporaryDirectory("vigil-page-browser")
        defer { dir.remove() }
        try Self.storage(dir)
        let config = try AgentTests.syntheticConfig(
            dir,
            extra: """
                recording = { pre_roll = 1.0; post_roll = 1.0; max_clip = 10.0; };
                snapshot = { live_interval = 1.0; };
                web = { enabled = true; port = 0; };
                """)
        let agent = try AgentProcess(config: config)
        defer { agent.kill(SIGKILL) }
        let base = try WebCommandTests.webAddress(of: agent)
        try #require(try LiveCommandTests.waitForLive(base), "\(agent.output)")
        try FileManager.default.createDirectory(atPath: Self.output, withIntermediateDirectories: true)

        var screens: [String: [String: Any]] = [:]
        for (label, width, height) in [("laptop", 1280, 800), ("phone", 390, 844)] {
            for (page, path) in [("first", "/"), ("day", "/?day=\(Self.day)&hour=12")] {
                let shot = dir.file("\(page)-\(label).png")
                let r = try BrowserTests.chromium(
                    dir,
                    [
                        "--window-size=\(width),\(height)", "--hide-scrollbars", "--virtual-time-budget=5000",
                        "--screenshot=\(shot)", base + path,
                    ])
                #expect(FileManager.default.fileExists(atPath: shot), "\(r.stderr)")
                try? FileManager.default.removeItem(atPath: Self.output + "/\(page)-\(label).png")
                try? FileManager.default.copyItem(atPath: shot, toPath: Self.output + "/\(page)-\(label).png")

                let browser = try DevToolsBrowser(dir, width: width, height: height, page: base + path)
                defer { browser.close() }
                // Measured once the pictures are in and the script has shown the buttons (on a
                // loaded machine the pictures may come first).
                let seen = try #require(
                    try waitUntilMeasured(browser) {
                        $0["pictures"] as? Int ?? 0 > 0 && $0["controls"] as? Bool == true
                    },
                    "\(page) at \(label): no picture shown, or the script did not show the buttons, within 60 s")
                screens["\(page)-\(label)"] = seen
                #expect(
                    seen["viewport"] as? Int == width, "\(page) at \(label): measured \(seen["viewport"] ?? 0) px wide")
                #expect(
                    seen["small"] as? [String] == [], "\(page) at \(label): links under 44 px: \(seen["small"] ?? "")")
                #expect(seen["cropped"] as? Int == 0, "\(page) at \(label): pictures cropped")
                #expect(seen["controls"] as? Bool == true, "\(page) at \(label): the buttons are shown by the script")
                if page == "first" {
                    #expect(
                        seen["live"] as? Double ?? 0 >= (label == "phone" ? 350 : 900),
                        "\(label): the live view is \(seen["live"] ?? 0) px wide")
                } else {
                    #expect(seen["marks"] as? Int == 351, "the day's timeline: \(seen["marks"] ?? 0) marks")
                    #expect((seen["cards"] as? [String])?.count ?? 0 <= 15, "an hour of clips, not the day's 351")
                }
            }
        }

        // A clip saved while the page is open: the list shows it without a reload.
        let browser = try DevToolsBrowser(dir, width: 390, height: 844, page: base + "/")
        defer { browser.close() }
        // Loaded whole first: a mark set while the document is still coming could be lost.
        let before = try #require(
            try waitUntilMeasured(browser) { $0["newest"] != nil && $0["ready"] as? String == "complete" })
        // A mark in the page's window, which a load of the page would lose. (Headless Chromium
        // may load its first page a second time just after it starts: the mark is set until
        // it stays a second.)
        #expect(
            try waitUntil(timeout: 30, every: 1) {
                try browser.evaluate("String(window.vigilTestMarker)") == "1"
                    || browser.evaluate("String(window.vigilTestMarker = 1)") == "0"
            }, "the page kept loading again")
        // Asked with the page's own button (POST /api/trigger, as curl asks it).
        _ = try browser.evaluate("document.getElementById('record').click(), 'clicked'")
        let newest = before["newest"] as? String ?? ""
        let after = try waitUntilMeasured(browser, timeout: 90) { ($0["newest"] as? String ?? newest) != newest }
        #expect(after != nil, "the list did not change without a reload: \(agent.output.suffix(2000))")
        if let after {
            #expect(
                after["marker"] as? Bool == true,
                "the page was loaded again, not updated: \((try? browser.evaluate("performance.getEntriesByType('navigation').map(e => e.type + ' ' + e.name).join() + ' said: ' + document.getElementById('said').textContent + ' at ' + location.href")) ?? "")"
            )
            let file = after["newest"] as? String ?? ""
            #expect(
                (after["cards"] as? [String])?.first?.contains(file.replacing("/", with: "%2F")) == true,
                "the new clip first in the list: \(after["cards"] ?? "")")
            #expect(file.hasPrefix(String(ISO8601DateFormatter().string(from: Date()).prefix(10))), "\(file)")
        }
        // Detection off with its button; the agent takes it (as /api/now and /metrics say).
        _ = try browser.evaluate("document.getElementById('detection').click(), 'clicked'")
        let off = try waitUntil(timeout: 30, every: 0.5) {
            let now = try WebCommandTests.get(base + "/api/now").body
            return (try JSONSerialization.jsonObject(with: now) as? [String: Any])?["detection"] as? Bool == false
        }
        #expect(off, "detection is still on after its button")
        #expect(
            try waitUntil(timeout: 30, every: 0.5) {
                try browser.evaluate("document.getElementById('detection').textContent") == "Detection off"
            }, "the button says it")
        let shot = dir.file("updated-phone.png")
        try browser.screenshot(to: shot)
        try? FileManager.default.removeItem(atPath: Self.output + "/updated-phone.png")
        try? FileManager.default.copyItem(atPath: shot, toPath: Self.output + "/updated-phone.png")
        agent.kill(SIGTERM)
        #expect(agent.waitForExit(timeout: 60) == 0)
    }

    /// The page's measurements once `done` holds of them, or nil after `timeout` seconds.
    func waitUntilMeasured(
        _ browser: DevToolsBrowser, timeout: Double = 60, _ done: ([String: Any]) -> Bool
    ) throws -> [String: Any]? {
        var last: [String: Any]?
        _ = try waitUntil(timeout: timeout, every: 0.5) {
            guard let text = try? browser.evaluate(Self.measure),
                let seen = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]
            else { return false }
            last = seen
            return done(seen)
        }
        return last.flatMap { done($0) ? $0 : nil }
    }
}
