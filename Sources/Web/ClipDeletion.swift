import Agent
import FoundationEssentials
import Media
import Recorder

// Deleting a clip from the browser: `GET /delete?file=F` asks "delete this clip?" (its picture,
// its time, a button; no script, so the question is a page of its own), and
// `POST /api/clips/delete` deletes — from that page's form (`file=F`) or a script (JSON
// `{"file": "F"}`). Only with passwords (every request then signs in), only a saved clip the
// catalogue lists, never from another site's page, and the agent's writer does it (after what it
// is writing; never the clip being recorded).
extension WebSite {
    /// `GET /delete?file=F`: the question, with the clip's picture and a form that deletes it.
    func deletePage(_ request: HTTPRequest) -> HTTPResponse {
        if let refused = deletionRefused(request) { return refused }
        guard let file = request.query["file"], let record = savedRecord(file) else {
            return Self.noSuchClip
        }
        let day = String(record.start.prefix(10))
        let hour = HumanTime.hour(record.start).map(String.init) ?? ""
        let clip = "/clips/" + Self.pathEncoded(record.file)
        let picture = record.snapshot.map {
            "<p><img src=\"\(pictureAddress($0))\" alt=\"The event's picture\" style=\"max-width: 100%; object-fit: contain\"></p>\n"
        }
        let html = """
            <!doctype html>
            <html lang="en">
            <head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
            <title>Delete a clip — \(MarkupText.escaped(camera))</title>
            <style>body { font: 16px/1.4 system-ui, sans-serif; margin: 0 auto; max-width: 40rem; padding: 0 1rem; }
            button, a { font: inherit; display: inline-block; min-height: 44px; padding: 0 1rem; }</style></head>
            <body>
            <h1>Delete this clip?</h1>
            \(picture ?? "")<p><a href="\(clip)">\(MarkupText.escaped(record.file))</a> ·
            \(MarkupText.escaped(HumanTime.text(record.start))) · \(DecimalText.short(record.durationSeconds, 1)) s</p>
            <p>It cannot be brought back.</p>
            <form method="post" action="/api/clips/delete">
            <input type="hidden" name="file" value="\(MarkupText.escaped(record.file))">
            <input type="hidden" name="day" value="\(MarkupText.escaped(day))">
            <input type="hidden" name="hour" value="\(hour)">
            <button type="submit">Delete</button> <a href="/clip?file=\(Self.queryEncoded(record.file))">Keep it</a>
            </form>
            </body>
            </html>

            """
        return .text(200, html, type: "text/html; charset=utf-8", headers: Self.pageHeaders)
    }

    /// `POST /api/clips/delete`: the clip `file` (a form's field, or JSON's) is deleted by the
    /// agent's writer. A form is sent back to the page of the clip's day (303); JSON gets 202.
    func deleteClip(_ request: HTTPRequest) -> HTTPResponse {
        guard request.method == "POST" else {
            return .methodNotAllowed(
                "Delete with POST (curl --digest -u USER -X POST -H 'Content-Type: application/json' -d '{\"file\": \"…\"}' …/api/clips/delete), or from the page.",
                allowed: "POST")
        }
        if let refused = deletionRefused(request) { return refused }
        let type = request.mediaType
        let file: String?
        var day: String?
        var hour: String?
        switch type {
        case "application/json":
            struct Asked: Decodable { var file: String }
            file = (try? JSONDecoder().decode(Asked.self, from: Data(request.body)))?.file
        case "application/x-www-form-urlencoded":
            let fields = Self.formFields(request.body)
            file = fields["file"]
            day = fields["day"].flatMap { Self.isDay($0) ? $0 : nil }
            hour = fields["hour"].flatMap { Int($0).map { (0...23).contains($0) } == true ? $0 : nil }
        default:
            return .error(415, "Send the clip as JSON ({\"file\": \"…\"}) or as the page's form does.")
        }
        guard let file else { return .error(400, "Say which clip: {\"file\": \"…\"}, as /api/clips names it.") }
        guard savedRecord(file) != nil else {
            return Self.noSuchClip
        }
        guard context.requests.deleteClip(file, by: "web user \(request.user ?? "?")") else {
            return .error(503, "The agent is not running: nothing can be deleted now.")
        }
        if type == "application/json" {
            return .text(
                202, "{\"deleting\":\(Self.jsonString(file))}\n", type: "application/json",
                headers: [("Cache-Control", "no-store")])
        }
        var back = HTTPResponse.text(303, "Deleting \(file).\n")
        // Back to the clip's day and hour, without the clip (the writer deletes it after what it is
        // writing: the list must not show it meanwhile).
        let place = (day.map { ["day=\($0)"] } ?? []) + (hour.map { ["hour=\($0)"] } ?? [])
        back.headers.append(
            ("Location", "/?" + (place + ["deleted=\(Self.queryEncoded(file))"]).joined(separator: "&")))
        return back
    }

    /// Why this request may not delete: no passwords (every user of this machine could), or it
    /// comes from another site's page (a browser says so in Sec-Fetch-Site or Origin).
    func deletionRefused(_ request: HTTPRequest) -> HTTPResponse? {
        guard signIn else {
            return .error(
                403,
                "Deleting clips needs a password: set web.password_file and run `sudo vigil passwd`, then restart the agent."
            )
        }
        if let site = request.header("sec-fetch-site"), site != "same-origin" && site != "none" {
            return .error(403, "Clips are deleted from this camera's own page, not from another site.")
        }
        if request.method == "POST", let origin = request.header("origin"), let host = request.header("host") {
            let authority = origin.split(separator: "/", omittingEmptySubsequences: true).dropFirst().first
            guard authority.map({ $0.lowercased() == host.lowercased() }) == true else {
                return .error(403, "Clips are deleted from this camera's own page, not from another site.")
            }
        }
        return nil
    }

    static let noSuchClip = HTTPResponse.error(404, "No saved clip by that name: it may be deleted already.")

    /// The catalogue's record of `file` when the clip is saved and still there.
    func savedRecord(_ file: String) -> ClipRecord? {
        guard let entry = try? openedCatalogue().entry(file), storage.exists(file) else { return nil }
        return entry.record
    }

    /// The fields of an `application/x-www-form-urlencoded` body (`+` a space, `%XX` a byte);
    /// the first of a name repeated.
    static func formFields(_ body: [UInt8]) -> [String: String] {
        func decoded(_ part: ArraySlice<UInt8>) -> String {
            var bytes: [UInt8] = []
            var i = part.startIndex
            while i < part.endIndex {
                let c = part[i]
                if c == UInt8(ascii: "+") {
                    bytes.append(0x20)
                } else if c == UInt8(ascii: "%"), i + 2 < part.endIndex,
                    let byte = UInt8(String(decoding: part[(i + 1)...(i + 2)], as: UTF8.self), radix: 16)
                {
                    bytes.append(byte)
                    i += 2
                } else {
                    bytes.append(c)
                }
                i += 1
            }
            return String(decoding: bytes, as: UTF8.self)
        }
        var fields: [String: String] = [:]
        for pair in body.split(separator: UInt8(ascii: "&")) {
            let parts = pair.split(separator: UInt8(ascii: "="), maxSplits: 1, omittingEmptySubsequences: false)
            let name = decoded(parts[0])
            if fields[name] == nil { fields[name] = parts.count > 1 ? decoded(parts[1]) : "" }
        }
        return fields
    }

    /// `text` as a JSON string.
    static func jsonString(_ text: String) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.withoutEscapingSlashes]
        return (try? encoder.encode(text)).map { String(decoding: $0, as: UTF8.self) } ?? "\"\""
    }
}
