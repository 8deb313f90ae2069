import Foundation
import Media
import Recorder
import TestSupport
import Testing

@testable import Agent
@testable import Web

/// The page's and `/api/clips`' upload marks for a clip the server refused and the agent set
/// aside: said as failed, with the server's answer.
@Suite struct WebUploadMarksTests {
    @Test func aClipSetAsideIsSaidAsFailedWithTheServersAnswer() throws {
        let storage = MemoryStorage()
        let files = (0..<2).map { "2026-12-04/yard-20261204-10000\($0).mov" }
        for (i, file) in files.enumerated() {
            storage.put(file, [0])
            try storage.enter(
                ClipRecord(
                    file: file, camera: "yard", start: "2026-12-04T10:00:0\(i).000+00:00",
                    end: "2026-12-04T10:00:0\(i).500+00:00", cause: .motion, triggerTime: nil,
                    triggerSourceSeconds: nil, preRollSeconds: 2, durationSeconds: 0.5, frames: 15, audioFrames: 0,
                    bytes: 1, peakScore: 0.1, part: 1))
        }
        let reason = "PUT https://s3.example/clips/yard/\(files[1]): 403 AccessDenied"
        let lines = [
            "{\"at\":\"t\",\"queued\":\"\(files[0])\"}", "{\"at\":\"t\",\"queued\":\"\(files[1])\"}",
            "{\"at\":\"t\",\"reason\":\"\(reason)\",\"set_aside\":\"\(files[1])\",\"tries\":5}",
        ]
        storage.put("uploads.jsonl", Array((lines.joined(separator: "\n") + "\n").utf8))
        // What the upload sink writes into the catalogue as it writes those lines (`/api/clips`
        // reads it there).
        try storage.openCatalogue().setUpload(.waiting, of: files[0])
        try storage.openCatalogue().setUpload(.failed(reason: reason), of: files[1])
        let uploads = UploadsRunning(storage: storage, uploadCounts: UploadFigures(waiting: 1))
        let site = WebSite(camera: "yard", version: "0.1.0", storage: storage, context: SinkContext(uploads: uploads))
        func body(_ path: String) -> String {
            guard case .bytes(let b) = site.respond(HTTPRequest(method: "GET", path: path)).body else { return "" }
            return String(decoding: b, as: UTF8.self)
        }
        let api = try #require(
            try JSONSerialization.jsonObject(with: Data(body("/api/clips").utf8)) as? [[String: Any]])
        let byFile = Dictionary(uniqueKeysWithValues: api.map { ($0["file"] as? String ?? "", $0) })
        #expect(byFile[files[1]]?["upload_failed"] as? String == reason, "\(api)")
        #expect(byFile[files[1]]?["upload_waiting"] == nil)
        #expect(byFile[files[0]]?["upload_waiting"] as? Bool == true && byFile[files[0]]?["upload_failed"] == nil)
        // The page, from the catalogue, where the upload sink writes the state.
        try storage.openCatalogue().setUpload(.failed(reason: reason), of: files[1])
        try storage.openCatalogue().setUpload(.waiting, of: files[0])
        let item =
            body("/").components(separatedBy: "<li><a class=\"pic\"").dropFirst().first { $0.contains(files[1]) } ?? ""
        #expect(item.contains("upload failed") && !item.contains("upload waiting"), "\(item)")
        #expect(item.contains("title=\"\(MarkupText.escaped(reason))\""), "the server's answer: \(item)")
    }
}

/// Uploads running, as the agent hands them to the web sink: the upload sink's figures, and its
/// queue as `uploads.jsonl` in `storage` holds it.
struct UploadsRunning: UploadStatus {
    let storage: any ClipStorage
    var uploadCounts: UploadFigures
    var uploadQueue: UploadQueueState {
        ((try? UploadJournal.read(from: storage)) ?? nil).map { .read($0) } ?? .reading
    }
}
