import Agent
import Foundation
import Media
import TestSupport
import Testing

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
}
