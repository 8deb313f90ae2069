import Foundation
import Media
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
}
