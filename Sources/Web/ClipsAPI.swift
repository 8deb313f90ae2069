import FoundationEssentials
import Recorder
import Synchronization

/// `/api/clips`, from the clip catalogue: a page of clips, newest first, as a JSON array of
/// their journal records (docs/reference/events.md says each field), 100 by default; the next
/// page's address in a `Link` header (`rel="next"`, with its cursor: `before=…`). Filters:
/// `day=YYYY-MM-DD`, `trigger=motion|external`, `damaged=true|false`,
/// `upload=waiting|uploaded|failed` (as the upload sink writes each clip's state into the
/// catalogue).
extension WebSite {
    /// The filters and the cursor `/api/clips` understands, and the values each takes.
    static let clipsParameters = ["limit", "before", "day", "trigger", "damaged", "upload"]

    func clipsAPI(_ request: HTTPRequest) -> HTTPResponse {
        let query: ClipQuery
        switch Self.clipQuery(request.query) {
        case .success(let asked): query = asked
        case .failure(let problem): return .error(400, problem.description)
        }
        let page: ClipPage
        do { page = try openedCatalogue().page(query) } catch {
            forgetCatalogue()
            return .error(503, "The clip catalogue cannot be read now (\(error.description)); try again in a moment.")
        }
        var headers = [("Cache-Control", "no-store")]
        if let next = page.next {
            var parameters = request.query.filter { $0.key != "before" && Self.clipsParameters.contains($0.key) }
            parameters["before"] = next.text
            let link = parameters.sorted { $0.key < $1.key }.map { "\($0.key)=\(Self.queryEncoded($0.value))" }
                .joined(separator: "&")
            headers.append(("Link", "</api/clips?\(link)>; rel=\"next\""))
        }
        return .text(200, clipsJSON(page.entries), type: "application/json", headers: headers)
    }

    /// What a request's query asks of `/api/clips`; a value it cannot take, said.
    static func clipQuery(_ parameters: [String: String]) -> Result<ClipQuery, WebProblem> {
        var query = ClipQuery()
        if let limit = parameters["limit"] {
            guard let number = Int(limit), (1...ClipQuery.largestPage).contains(number) else {
                return .failure(
                    WebProblem("limit=\(limit) is not a number of clips from 1 to \(ClipQuery.largestPage)."))
            }
            query.limit = number
        }
        if let before = parameters["before"] {
            guard let cursor = ClipCursor(text: before) else {
                return .failure(
                    WebProblem("before=\(before) is not a place in the list: give the one a page's Link header gave."))
            }
            query.before = cursor
        }
        if let day = parameters["day"] {
            guard isDay(day) else { return .failure(WebProblem("day=\(day) is not a day: give one as YYYY-MM-DD.")) }
            query.day = day
        }
        if let trigger = parameters["trigger"] {
            guard let cause = TriggerCause(rawValue: trigger) else {
                return .failure(WebProblem("trigger=\(trigger) is not a trigger: give motion or external."))
            }
            query.cause = cause
        }
        if let damaged = parameters["damaged"] {
            guard damaged == "true" || damaged == "false" else {
                return .failure(WebProblem("damaged=\(damaged) is neither true nor false."))
            }
            query.damaged = damaged == "true"
        }
        if let upload = parameters["upload"] {
            guard Self.uploadStates.contains(upload) else {
                return .failure(
                    WebProblem("upload=\(upload) is not an upload state: give waiting, uploaded or failed."))
            }
            query.upload = upload
        }
        return .success(query)
    }

    /// The upload states `upload=` takes (`UploadState.name`).
    static let uploadStates = [
        UploadState.waiting.name, UploadState.uploaded(url: "").name, UploadState.failed(reason: "").name,
    ]

    /// The records of `entries` as a JSON array, each with `"deleted": true` when its clip is
    /// gone from the disk, and with uploads (where the catalogue says each stands) `"uploaded"`
    /// (where it is now) or, while uploads run, `"upload_waiting": true` or `"upload_failed"`
    /// (the server's answer to a clip it refused until it was set aside).
    func clipsJSON(_ entries: [CatalogueEntry]) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let uploading = context.uploadsIfRunning != nil
        let items = entries.compactMap { entry -> String? in
            let record = entry.record
            guard let data = try? encoder.encode(record) else { return nil }
            let object = String(decoding: data, as: UTF8.self)
            var added: [String] = []
            if !storage.exists(record.file) { added.append("\"deleted\":true") }
            switch entry.upload {
            case .uploaded(let url)?:
                if let quoted = try? encoder.encode(url) {
                    added.append("\"uploaded\":" + String(decoding: quoted, as: UTF8.self))
                }
            case .waiting? where uploading:
                added.append("\"upload_waiting\":true")
            case .failed(let reason)? where uploading:
                if let quoted = try? encoder.encode(reason.isEmpty ? "refused by the server" : reason) {
                    added.append("\"upload_failed\":" + String(decoding: quoted, as: UTF8.self))
                }
            default:
                break
            }
            guard !added.isEmpty, object.hasPrefix("{") else { return object }
            return "{" + added.joined(separator: ",") + "," + object.dropFirst()
        }
        return "[" + items.joined(separator: ",\n") + "]\n"
    }

    /// The web server's own connection to the catalogue, opened at the first ask and again
    /// after an error (`forgetCatalogue`: the storage directory may have come back as another
    /// mount).
    func openedCatalogue() throws(CatalogueError) -> any ClipCatalogue {
        try catalogue.withLock { (held) throws(CatalogueError) -> any ClipCatalogue in
            if let held { return held }
            let opened = try storage.openCatalogue()
            held = opened
            return opened
        }
    }

    func forgetCatalogue() { catalogue.withLock { $0 = nil } }
}

/// A request the web server cannot take, in words for the one who sent it.
struct WebProblem: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
