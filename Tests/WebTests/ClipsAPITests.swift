import Agent
import Foundation
import Recorder
import TestSupport
import Testing

@testable import Web

/// `/api/clips` from the catalogue: a page of 100 by default, newest first, the next page's
/// address in a `Link` header, followed to the end with every clip once; filters; and
/// parameters it cannot take refused in words.
@Suite struct ClipsAPITests {
    /// 250 clips, one every 15 minutes from 2026-12-05 00:00 UTC (a few moved by hand), each
    /// with its file; the fifth of each ten triggered from outside.
    static func storage() throws -> (MemoryStorage, [String]) {
        let storage = MemoryStorage()
        let zone = TimeZone(identifier: "UTC")!
        var files: [String] = []
        for i in 0..<250 {
            let start = Date(timeIntervalSince1970: 1_796_428_800 + Double(i) * 900)
            let stamp = ClipRecord.timestamp(start, timeZone: zone)
            let file = "\(stamp.prefix(10))/yard-\(i).mov"
            storage.put(file, [0])
            try storage.enter(
                ClipRecord(
                    file: file, camera: "yard", start: stamp,
                    end: ClipRecord.timestamp(start.addingTimeInterval(5), timeZone: zone),
                    cause: i % 10 == 4 ? .external : .motion, triggerTime: nil, triggerSourceSeconds: nil,
                    preRollSeconds: 2, durationSeconds: 5, frames: 75, audioFrames: 0, bytes: 1, peakScore: 0.1,
                    part: 1))
            files.append(file)
        }
        return (storage, files)
    }

    static func get(_ site: WebSite, _ target: String) -> (status: Int, files: [String], next: String?, body: String) {
        let parts = target.split(separator: "?", maxSplits: 1)
        var query: [String: String] = [:]
        for pair in parts.count > 1 ? parts[1].split(separator: "&") : [] {
            let kv = pair.split(separator: "=", maxSplits: 1).map { String($0).removingPercentEncoding ?? String($0) }
            query[kv[0]] = kv.count > 1 ? kv[1] : ""
        }
        let response = site.respond(HTTPRequest(method: "GET", path: String(parts[0]), query: query))
        guard case .bytes(let bytes) = response.body else { return (response.status, [], nil, "") }
        let body = String(decoding: bytes, as: UTF8.self)
        let items = (try? JSONSerialization.jsonObject(with: Data(bytes)) as? [[String: Any]]) ?? []
        let link = response.headers.first { $0.name == "Link" }?.value
        // `</api/clips?…>; rel="next"`
        let next = link.flatMap { value -> String? in
            guard value.hasSuffix("; rel=\"next\""), let open = value.firstIndex(of: "<"),
                let close = value.firstIndex(of: ">")
            else { return nil }
            return String(value[value.index(after: open)..<close])
        }
        return (response.status, items.compactMap { $0["file"] as? String }, next, body)
    }

    @Test func pagesOfAHundredFollowTheirLinksThroughEveryClipOnce() throws {
        let (storage, files) = try Self.storage()
        let site = WebSite(camera: "yard", version: "0.1.0", storage: storage, context: SinkContext())
        var seen: [String] = []
        var target: String? = "/api/clips"
        var pages: [Int] = []
        while let next = target {
            let page = Self.get(site, next)
            #expect(page.status == 200, "\(page.body)")
            pages.append(page.files.count)
            seen += page.files
            target = page.next
        }
        #expect(pages == [100, 100, 50])
        #expect(seen == files.reversed())

        // Smaller pages, a day and a trigger: the links keep the filters.
        var outside: [String] = []
        target = "/api/clips?trigger=external&limit=7&day=2026-12-06"
        while let next = target {
            let page = Self.get(site, next)
            #expect(
                page.next == nil || (page.next!.contains("trigger=external") && page.next!.contains("day=2026-12-06")))
            outside += page.files
            target = page.next
        }
        #expect(
            outside
                == files.enumerated().filter { $0.offset % 10 == 4 && $0.element.hasPrefix("2026-12-06") }
                .map(\.element).reversed())
    }

    @Test func theUploadFilterListsTheClipsInThatStateWithWhereEachStands() throws {
        let (storage, files) = try Self.storage()
        let catalogue = try storage.openCatalogue()
        try catalogue.setUpload(.uploaded(url: "s3://clips/yard/" + files[10]), of: files[10])
        try catalogue.setUpload(.uploaded(url: "s3://clips/yard/" + files[12]), of: files[12])
        try catalogue.setUpload(.waiting, of: files[11])
        try catalogue.setUpload(.failed(reason: "PUT: 403 AccessDenied"), of: files[13])
        // Uploads run (the catalogue, not uploads.jsonl, says where each clip stands: there is none).
        let uploads = UploadsRunning(storage: storage, uploadCounts: UploadFigures(waiting: 1))
        let site = WebSite(camera: "yard", version: "0.1.0", storage: storage, context: SinkContext(uploads: uploads))
        let uploaded = Self.get(site, "/api/clips?upload=uploaded&limit=1")
        #expect(uploaded.status == 200, "\(uploaded.body)")
        #expect(uploaded.files == [files[12]], "\(uploaded.body)")
        #expect(uploaded.body.contains("\"uploaded\":\"s3://clips/yard/\(files[12])\""), "\(uploaded.body)")
        let rest = Self.get(site, try #require(uploaded.next, "no link to the next page"))
        #expect(rest.files == [files[10]] && rest.next == nil, "\(rest.body)")
        #expect(Self.get(site, "/api/clips?upload=waiting").files == [files[11]])
        let failed = Self.get(site, "/api/clips?upload=failed")
        #expect(failed.files == [files[13]])
        #expect(failed.body.contains("\"upload_failed\":\"PUT: 403 AccessDenied\""), "\(failed.body)")
    }

    @Test func aClipGoneFromTheDiskIsMarkedDeleted() throws {
        let (storage, files) = try Self.storage()
        try storage.delete(files[249])
        let site = WebSite(camera: "yard", version: "0.1.0", storage: storage, context: SinkContext())
        let page = Self.get(site, "/api/clips?limit=2")
        #expect(page.files == [files[249], files[248]])
        #expect(page.body.hasPrefix("[{\"deleted\":true,"), "\(page.body.prefix(80))")
    }

    @Test(arguments: [
        ("limit=0", "limit=0 is not a number of clips from 1 to 1000."),
        ("limit=1001", "limit=1001 is not a number of clips from 1 to 1000."),
        ("before=yesterday", "before=yesterday is not a place in the list: give the one a page's Link header gave."),
        ("day=2026-12", "day=2026-12 is not a day: give one as YYYY-MM-DD."),
        ("trigger=cat", "trigger=cat is not a trigger: give motion or external."),
        ("damaged=maybe", "damaged=maybe is neither true nor false."),
        ("upload=sent", "upload=sent is not an upload state: give waiting, uploaded or failed."),
    ])
    func parametersItCannotTakeAreRefusedInWords(query: String, said: String) throws {
        let site = WebSite(camera: "yard", version: "0.1.0", storage: MemoryStorage(), context: SinkContext())
        let page = Self.get(site, "/api/clips?" + query)
        #expect(page.status == 400)
        #expect(page.body == said + "\n")
    }
}
