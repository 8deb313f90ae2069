import Agent
import Foundation
import Logging
import Recorder
import Storage
import TestSupport
import Testing
import Upload

@testable import Web

/// Where each clip's upload stands, in the catalogue the page, the API and `vigil clips` read:
/// written by the upload sink as it changes (queued, uploaded with its URL), and at start from
/// the queue for a catalogue that lacks it; `/api/clips?upload=…` lists the clips in a state.
extension UploadTests {
    /// `/api/clips` with `query`, as the web server answers it: the files listed and the body.
    static func listed(_ site: WebSite, _ query: [String: String]) -> (files: [String], body: String) {
        let response = site.respond(HTTPRequest(method: "GET", path: "/api/clips", query: query))
        guard case .bytes(let bytes) = response.body else { return ([], "") }
        let items = (try? JSONSerialization.jsonObject(with: Data(bytes)) as? [[String: Any]]) ?? []
        return (items.compactMap { $0["file"] as? String }, String(decoding: bytes, as: UTF8.self))
    }

    /// How many uploads `sink`'s queue holds in memory (nil while it reads the file).
    static func heldUploads(_ sink: UploadSink) -> Int? {
        guard case .read(let queue) = sink.uploadQueue else { return nil }
        return queue.uploads.count
    }

    @Test func theCatalogueSaysWhereEachUploadStandsAndTheAPIListsEachState() throws {
        let directory = try TemporaryDirectory("vigil-upload-catalogue")
        defer { directory.remove() }
        let server = try S3Server(directory)
        let board = try Board(directory, clips: 3)
        // Entered as the agent's writer enters a saved clip, before any sink hears of it.
        for clip in board.clips { try board.storage.enter(board.record(clip)) }
        let log = MemoryLogSink()

        // A wrong secret: the clips wait.
        let refused = try board.sink(
            try Self.s3Settings(server, in: directory, secret: "not-the-secret"), log: log)
        let site = WebSite(
            camera: "shed", version: "0.1.0", storage: board.storage, context: SinkContext(uploads: refused))
        #expect(waitUntil(timeout: 120) { refused.uploadCounts.failures >= 1 }, "\(log.written)")
        let waiting = Self.listed(site, ["upload": "waiting"])
        #expect(waiting.files == board.clips.reversed(), "\(waiting.body)")
        #expect(Self.listed(site, ["upload": "uploaded"]).files.isEmpty)
        refused.finish()

        // Put right: each is uploaded, and said so with its URL.
        let fixed = try board.sink(try Self.s3Settings(server, in: directory), log: log, queue: false)
        let running = WebSite(
            camera: "shed", version: "0.1.0", storage: board.storage, context: SinkContext(uploads: fixed))
        #expect(
            waitUntil(timeout: 120) { Self.listed(running, ["upload": "uploaded"]).files.count == 3 },
            "\(log.written)")
        // The queue in memory keeps nothing of the clips uploaded: the catalogue holds them.
        #expect(Self.heldUploads(fixed) == 0)
        fixed.finish()
        let uploaded = Self.listed(running, ["upload": "uploaded"])
        #expect(uploaded.files == board.clips.reversed())
        for clip in board.clips {
            #expect(uploaded.body.contains("\"uploaded\":\"s3://clips/fleet/shed/\(clip)\""), "\(uploaded.body)")
            #expect(try server.object("fleet/shed/" + clip) == (try board.bytes(clip)))
        }
        #expect(Self.listed(running, ["upload": "waiting"]).files.isEmpty)

        // A catalogue that lacks the states (made from the journal, as at the first start of a
        // directory an earlier version wrote): the next start writes what the queue knows.
        let catalogue = try board.storage.openCatalogue()
        for clip in board.clips { try catalogue.setUpload(nil, of: clip) }
        #expect(Self.listed(running, ["upload": "uploaded"]).files.isEmpty)
        let again = try board.sink(try Self.s3Settings(server, in: directory), log: log, queue: false)
        #expect(
            waitUntil(timeout: 60) { Self.listed(running, ["upload": "uploaded"]).files.count == 3 },
            "\(log.written)")
        #expect(Self.heldUploads(again) == 0)
        again.finish()
        #expect(
            try catalogue.entry(board.clips[0])?.upload == .uploaded(url: "s3://clips/fleet/shed/" + board.clips[0]))

        // The queue lost (removed by hand), the catalogue saying a clip waits: it is queued
        // again, and sent.
        try FileManager.default.removeItem(atPath: board.storage.path(UploadJournal.name))
        try catalogue.setUpload(.waiting, of: board.clips[1])
        let lost = try board.sink(try Self.s3Settings(server, in: directory), log: log, queue: false)
        #expect(waitUntil(timeout: 60) { lost.uploadCounts.uploaded == 1 }, "\(log.written)")
        lost.finish()
        #expect(board.lines.compactMap(\.uploaded) == [board.clips[1]], "\(board.lines)")
        #expect(
            try catalogue.entry(board.clips[1])?.upload == .uploaded(url: "s3://clips/fleet/shed/" + board.clips[1]))
        #expect(log.written.contains { $0.contains("queued again") && $0.contains("clips=1") }, "\(log.written)")
        #expect(
            log.written(at: .error).allSatisfy { $0.contains("SignatureDoesNotMatch") }, "\(log.written(at: .error))")
    }
}
