import Foundation
import Media
import Recorder
import TestSupport
import Testing

@testable import Agent
@testable import Web

/// The site's answers that need no agent running: what `/metrics` names, against the table of
/// docs/events.md, and how the page writes what it is given.
@Suite struct WebSiteTests {
    static let site = WebSite(camera: "yard", version: "0.1.0", storage: MemoryStorage(), control: AgentControl())

    @Test func metricsAreTheOnesDocumented() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let document = try String(contentsOf: root.appendingPathComponent("docs/events.md"), encoding: .utf8)
        let section =
            try #require(document.components(separatedBy: "## The web server's `/metrics`").last)
            .components(separatedBy: "\n## ").first ?? ""
        var documented: [String: String] = [:]
        for line in section.split(separator: "\n") where line.hasPrefix("| `vigil_") {
            let cells = line.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }
            documented[cells[0].trimmingCharacters(in: CharacterSet(charactersIn: "`"))] = cells[1]
        }
        var served: [String: String] = [:]
        for line in Self.site.metrics().split(separator: "\n") where line.hasPrefix("# TYPE ") {
            let words = line.split(separator: " ")
            served[String(words[2])] = String(words[3])
        }
        #expect(!served.isEmpty)
        #expect(served == documented, "served \(served), documented \(documented)")
        // Every sample line is `name{camera="yard"…} value`.
        for line in Self.site.metrics().split(separator: "\n") where !line.hasPrefix("#") {
            #expect(line.contains("{camera=\"yard\""), "\(line)")
        }
    }

    @Test func labelValuesAndPageTextAreEscaped() {
        #expect(WebSite.labelValue("a\"b\\c\nd") == "a\\\"b\\\\c\\nd")
        #expect(
            MarkupText.escaped("<script>\"x\" & 'y'</script>")
                == "&lt;script&gt;&quot;x&quot; &amp; &apos;y&apos;&lt;/script&gt;")
        #expect(WebSite.pathEncoded("2026-12-04/yard 1#?.mov") == "2026-12-04/yard%201%23%3F.mov")
    }

    @Test func onlyGetAndHeadAreServedAndUnknownAddressesAreNotFound() {
        #expect(Self.site.respond(HTTPRequest(method: "DELETE", path: "/")).status == 405)
        #expect(Self.site.respond(HTTPRequest(method: "GET", path: "/nothing")).status == 404)
        #expect(Self.site.respond(HTTPRequest(method: "GET", path: "/api/clips")).status == 200)
        let page = Self.site.respond(HTTPRequest(method: "HEAD", path: "/"))
        #expect(page.status == 200)
        guard case .bytes(let body) = page.body else { return }
        #expect(String(decoding: body, as: UTF8.self).contains("No clips yet"))
    }

    /// `POST /api/trigger` asks the agent to record as `vigil trigger` does; only JSON is taken.
    @Test func aTriggerIsTakenAsJSONOnly() {
        let control = AgentControl()
        let site = WebSite(camera: "yard", version: "0.1.0", storage: MemoryStorage(), control: control)
        func post(_ body: String, type: String? = "application/json") -> HTTPResponse {
            site.respond(
                HTTPRequest(
                    method: "POST", path: "/api/trigger", headers: type.map { ["content-type": $0] } ?? [:],
                    body: Array(body.utf8)))
        }
        // Refused: another method, a form (what another site can make a browser send), not
        // JSON, seconds out of range or not a number; nothing is asked of the agent.
        #expect(site.respond(HTTPRequest(method: "GET", path: "/api/trigger")).status == 405)
        #expect(post("seconds=30", type: "application/x-www-form-urlencoded").status == 415)
        #expect(post("{}", type: nil).status == 415)
        #expect(post("{\"seconds\": 30", type: "application/json").status == 400)
        #expect(post("{\"seconds\": 0}").status == 400)
        #expect(post("{\"seconds\": 3601}").status == 400)
        #expect(post("{\"seconds\": \"30\"}").status == 400)
        #expect(post("[30]").status == 400)
        #expect(control.take().record == nil)
        // Taken: with seconds, and without (10).
        let taken = post("{\"seconds\": 2.5}", type: "application/json; charset=utf-8")
        #expect(taken.status == 202)
        guard case .bytes(let body) = taken.body else { return }
        #expect(String(decoding: body, as: UTF8.self) == "{\"recording\":true,\"seconds\":2.5}\n")
        let asked = control.take().record
        #expect(asked?.seconds == 2.5 && asked?.by == "web")
        #expect(post("").status == 202)
        #expect(control.take().record?.seconds == 10)
    }

    /// Many clips: the page lists the newest days (whole, about a hundred clips) and links
    /// every day; a day's page has its clips alone.
    @Test func thePageListsTheNewestDaysAndLinksEveryDay() throws {
        let storage = MemoryStorage()
        let journal = EventsJournal(storage: storage)
        // Day 1: 30 clips, day 2: 60, day 3: 50, day 4: 70 (oldest first, as recorded).
        for (day, count) in [("2026-11-01", 30), ("2026-11-02", 60), ("2026-11-03", 50), ("2026-11-04", 70)] {
            for i in 0..<count {
                let time = String(format: "%02d:%02d:00", i / 60, i % 60)
                let file = "\(day)/yard-\(day.replacing("-", with: ""))-\(time.replacing(":", with: "")).mov"
                storage.put(file, [0])
                try journal.append(
                    ClipRecord(
                        file: file, camera: "yard", start: "\(day)T\(time).000+00:00",
                        end: "\(day)T\(time).000+00:00", cause: .motion, triggerTime: nil, triggerSourceSeconds: nil,
                        preRollSeconds: 2, durationSeconds: 5, frames: 75, audioFrames: 0, bytes: 1, peakScore: 0.1,
                        part: 1))
            }
        }
        let site = WebSite(camera: "yard", version: "0.1.0", storage: storage, control: AgentControl())
        func page(_ query: [String: String] = [:]) -> (status: Int, html: String) {
            let r = site.respond(HTTPRequest(method: "GET", path: "/", query: query))
            guard case .bytes(let b) = r.body else { return (r.status, "") }
            return (r.status, String(decoding: b, as: UTF8.self))
        }
        func clips(_ html: String) -> Int { html.components(separatedBy: "<li>").count - 1 }
        // The newest day (70), not the next (70 + 50 > 100); every day linked with its count.
        let newest = page()
        #expect(newest.status == 200 && clips(newest.html) == 70)
        #expect(newest.html.contains("<h2>2026-11-04</h2>") && !newest.html.contains("<h2>2026-11-03</h2>"))
        for (day, count) in [("2026-11-04", 70), ("2026-11-03", 50), ("2026-11-02", 60), ("2026-11-01", 30)] {
            #expect(newest.html.contains("<a href=\"/?day=\(day)\">\(day) (\(count))</a>"), "\(day)")
        }
        #expect(newest.html.contains("210 clips"), "the header counts every clip")
        let second = page(["day": "2026-11-02"])
        #expect(clips(second.html) == 60 && second.html.contains("<h2>2026-11-02</h2>"))
        #expect(
            second.html.contains("<strong>2026-11-02 (60)</strong>") && second.html.contains("<a href=\"/\">newest</a>")
        )
        #expect(clips(page(["day": "2026-10-31"]).html) == 0)
        #expect(page(["day": "2026-10-31"]).html.contains("No clips on 2026-10-31."))
        #expect(page(["day": "<script>"]).status == 400)
        #expect(page(["day": "2026-1-011"]).status == 400)
    }
}
