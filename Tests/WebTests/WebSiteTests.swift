import Foundation
import Media
import Recorder
import Synchronization
import TestSupport
import Testing

@testable import Agent
@testable import Web

/// The site's answers that need no agent running: what `/metrics` names, against the table of
/// docs/reference/metrics.md, and how the page writes what it is given.
@Suite struct WebSiteTests {
    static let site = WebSite(camera: "yard", version: "0.1.0", storage: MemoryStorage(), context: SinkContext())

    @Test func metricsAreTheOnesDocumented() throws {
        let table = try #require(
            markdownTable(in: repositoryText("docs/reference/metrics.md"), under: "## The metrics"),
            "docs/reference/metrics.md has no heading ## The metrics")
        var documented: [String: String] = [:]
        for cells in table {
            documented[cells[0].trimmingCharacters(in: CharacterSet(charactersIn: "`"))] = cells.dropFirst().first ?? ""
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
        let site = WebSite(
            camera: "yard", version: "0.1.0", storage: MemoryStorage(), context: SinkContext(requests: control))
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

    /// Seconds `POST /api/trigger` cannot record are refused in the words `vigil trigger` and
    /// MQTT's `record/set` use: the same limits, said the same way.
    @Test func secondsOutOfRangeAreRefusedInTheWordsOfEveryOtherWayToTrigger() {
        let control = AgentControl()
        let site = WebSite(
            camera: "yard", version: "0.1.0", storage: MemoryStorage(), context: SinkContext(requests: control))
        for (seconds, said) in [("0", "0"), ("3600.5", "3600.5"), ("-2", "-2"), ("0.25", "0.25")] {
            let refused = site.respond(
                HTTPRequest(
                    method: "POST", path: "/api/trigger", headers: ["content-type": "application/json"],
                    body: Array("{\"seconds\": \(seconds)}".utf8)))
            #expect(refused.status == 400)
            guard case .bytes(let body) = refused.body else { continue }
            #expect(
                String(decoding: body, as: UTF8.self)
                    == "\"seconds\": \"\(said)\" is not plain decimal seconds from 1 to 3600 (such as 30 or 2.5).\n")
        }
        #expect(control.take().record == nil)
    }

    /// With uploads, the page and `/api/clips` say which clips are on the server (and where)
    /// and which wait — the page from the catalogue, `/api/clips` from `uploads.jsonl`; a clip
    /// never queued says neither.
    @Test func uploadedClipsAreMarkedAndWaitingOnesSaid() throws {
        let storage = MemoryStorage()
        let files = (0..<3).map { "2026-12-04/yard-20261204-10000\($0).mov" }
        for (i, file) in files.enumerated() {
            storage.put(file, [0])
            try storage.enter(
                ClipRecord(
                    file: file, camera: "yard", start: "2026-12-04T10:00:0\(i).000+00:00",
                    end: "2026-12-04T10:00:0\(i).500+00:00", cause: .motion, triggerTime: nil,
                    triggerSourceSeconds: nil, preRollSeconds: 2, durationSeconds: 0.5, frames: 15, audioFrames: 0,
                    bytes: 1, peakScore: 0.1, part: 1))
        }
        let url = "s3://clips/fleet/yard/" + files[0]
        for record in [
            UploadRecord(queued: files[0], at: "2026-12-04T10:00:01.000+00:00"),
            UploadRecord(queued: files[1], at: "2026-12-04T10:00:02.000+00:00"),
            UploadRecord(uploaded: files[0], at: "2026-12-04T10:00:03.000+00:00", url: url, bytes: 1, seconds: 0.2),
        ] {
            try storage.append(UploadJournal.line(record), to: UploadJournal.name)
        }
        // What the upload sink writes into the catalogue beside those lines (`/api/clips` reads it).
        try storage.openCatalogue().setUploads([(files[0], .uploaded(url: url)), (files[1], .waiting)])
        // Uploads run (an upload sink holds the queue, which the agent hands the web sink).
        let uploads = UploadsRunning(storage: storage, uploadCounts: UploadFigures(waiting: 1, uploaded: 1, bytes: 1))
        let site = WebSite(camera: "yard", version: "0.1.0", storage: storage, context: SinkContext(uploads: uploads))
        func body(_ path: String, of site: WebSite = site) -> String {
            guard case .bytes(let b) = site.respond(HTTPRequest(method: "GET", path: path)).body else { return "" }
            return String(decoding: b, as: UTF8.self)
        }
        // Without uploads running (upload.url taken out), the queue's leftovers wait for nothing.
        let without = WebSite(camera: "yard", version: "0.1.0", storage: storage, context: SinkContext())
        #expect(!body("/", of: without).contains("upload waiting") && body("/", of: without).contains(">uploaded<"))
        #expect(!body("/api/clips", of: without).contains("upload_waiting"))
        let items = body("/").components(separatedBy: "<li><a class=\"pic\"").dropFirst()
        #expect(items.count == 3)
        func item(_ file: String) -> String { items.first { $0.contains(file) } ?? "" }
        #expect(item(files[0]).contains("<span class=\"uploaded\" title=\"\(url)\">uploaded</span>"))
        #expect(item(files[1]).contains("upload waiting") && !item(files[1]).contains(">uploaded<"))
        #expect(!item(files[2]).contains("upload"), "never queued: \(item(files[2]))")

        let api = try #require(
            try JSONSerialization.jsonObject(with: Data(body("/api/clips").utf8)) as? [[String: Any]])
        let byFile = Dictionary(uniqueKeysWithValues: api.map { ($0["file"] as? String ?? "", $0) })
        #expect(byFile[files[0]]?["uploaded"] as? String == url && byFile[files[0]]?["upload_waiting"] == nil)
        #expect(byFile[files[1]]?["upload_waiting"] as? Bool == true && byFile[files[1]]?["uploaded"] == nil)
        #expect(byFile[files[2]]?["uploaded"] == nil && byFile[files[2]]?["upload_waiting"] == nil)
    }

    /// Deleting a clip: only with passwords, only a saved clip the journal lists, never from
    /// another site's page; the page asks first; the agent is asked, with who asked.
    @Test func aClipIsDeletedOnlyWhenSignedInFromThisSiteAndSaved() throws {
        let storage = MemoryStorage()
        let file = "2026-11-04/yard-20261104-101500.mov"
        storage.put(file, [0])
        storage.put("2026-11-04/yard-20261104-101500.jpg", [0])
        storage.put("2026-11-04/gone.mov", [0])
        for name in [file, "2026-11-04/gone.mov"] {
            try storage.enter(
                ClipRecord(
                    file: name, camera: "yard", start: "2026-11-04T10:15:00.000+00:00",
                    end: "2026-11-04T10:15:05.000+00:00", cause: .motion, triggerTime: nil, triggerSourceSeconds: nil,
                    preRollSeconds: 2, durationSeconds: 5, frames: 75, audioFrames: 0, bytes: 1, peakScore: 0.1,
                    part: 1, snapshot: name == file ? "2026-11-04/yard-20261104-101500.jpg" : nil))
        }
        try storage.delete("2026-11-04/gone.mov")
        let control = AgentControl()
        let asked = Mutex<[String]>([])
        let open = WebSite(camera: "yard", version: "0.1.0", storage: storage, context: SinkContext(requests: control))
        let site = WebSite(
            camera: "yard", version: "0.1.0", storage: storage, context: SinkContext(requests: control), signIn: true)
        func post(
            _ site: WebSite, _ type: String, _ body: String, _ headers: [String: String] = [:]
        ) -> HTTPResponse {
            site.respond(
                HTTPRequest(
                    method: "POST", path: "/api/clips/delete",
                    headers: headers.merging(["content-type": type]) { a, _ in a },
                    body: Array(body.utf8), user: "admin"))
        }
        let json = "{\"file\": \"\(file)\"}"
        let form = "file=2026-11-04%2Fyard-20261104-101500.mov&day=2026-11-04"
        let formType = "application/x-www-form-urlencoded"

        // No passwords: never, and the page offers nothing.
        #expect(post(open, "application/json", json).status == 403)
        #expect(open.respond(HTTPRequest(method: "GET", path: "/delete", query: ["file": file])).status == 403)
        func html(_ r: HTTPResponse) -> String {
            guard case .bytes(let b) = r.body else { return "" }
            return String(decoding: b, as: UTF8.self)
        }
        #expect(!html(open.respond(HTTPRequest(method: "GET", path: "/"))).contains("delete"))

        // No agent running: said.
        #expect(post(site, "application/json", json).status == 503)
        control.attachDeleter { file, by in
            asked.withLock { $0.append("\(file) \(by)") }
            return true
        }
        // The page links the question; the question has the form.
        let page = html(site.respond(HTTPRequest(method: "GET", path: "/")))
        #expect(page.contains("<a href=\"/delete?file=2026-11-04%2Fyard-20261104-101500.mov\">delete…</a>"), "\(page)")
        let question = site.respond(HTTPRequest(method: "GET", path: "/delete", query: ["file": file]))
        #expect(question.status == 200 && html(question).contains("Delete this clip?"))
        #expect(html(question).contains("<input type=\"hidden\" name=\"file\" value=\"\(file)\">"))
        #expect(site.respond(HTTPRequest(method: "GET", path: "/delete", query: ["file": "nothing.mov"])).status == 404)

        // What is refused, and asks nothing of the agent.
        #expect(site.respond(HTTPRequest(method: "GET", path: "/api/clips/delete")).status == 405)
        #expect(post(site, "text/plain", json).status == 415)
        #expect(post(site, "application/json", "{\"clip\": 1}").status == 400)
        #expect(post(site, "application/json", "{\"file\": \"2026-11-04/gone.mov\"}").status == 404)
        #expect(post(site, "application/json", "{\"file\": \"events.jsonl\"}").status == 404)
        #expect(post(site, formType, form, ["sec-fetch-site": "cross-site"]).status == 403)
        #expect(post(site, formType, form, ["origin": "http://evil.example", "host": "127.0.0.1:8080"]).status == 403)
        #expect(asked.withLock { $0 }.isEmpty)

        // From a script, and from the page's form (back to the clip's day).
        #expect(post(site, "application/json", json).status == 202)
        let back = post(
            site, formType, form,
            ["sec-fetch-site": "same-origin", "origin": "http://127.0.0.1:8080", "host": "127.0.0.1:8080"])
        #expect(back.status == 303)
        #expect(
            back.headers.contains {
                $0.name == "Location" && $0.value == "/?day=2026-11-04&deleted=2026-11-04%2Fyard-20261104-101500.mov"
            }, "\(back.headers)")
        #expect(asked.withLock { $0 } == ["\(file) web user admin", "\(file) web user admin"])
    }

    @Test func formFieldsAreDecoded() {
        #expect(
            WebSite.formFields(Array("file=a%2Fb+c.mov&day=2026-11-04&file=second&empty=&odd=%4".utf8))
                == ["file": "a/b c.mov", "day": "2026-11-04", "empty": "", "odd": "%4"])
    }
}
