import Foundation
import Recorder
import TestSupport
import Testing

@testable import Agent
@testable import Web

/// The lists' pictures are small: a camera's whole 1920×1080 picture (`snapshot.width = 0`) is
/// sent about 640 pixels wide, whole (its aspect kept), a fraction of its bytes, cached for good with
/// its validator; a picture already 640 wide (the default) is sent as it is.
@Suite struct ThumbnailTests {
    /// The width and height a JPEG's frame header (SOF0 or SOF2) says.
    static func size(_ jpeg: [UInt8]) -> (width: Int, height: Int)? {
        var i = 2
        while i + 9 < jpeg.count {
            guard jpeg[i] == 0xFF else { return nil }
            let marker = jpeg[i + 1]
            let length = Int(jpeg[i + 2]) << 8 | Int(jpeg[i + 3])
            if marker == 0xC0 || marker == 0xC2 {
                return (Int(jpeg[i + 7]) << 8 | Int(jpeg[i + 8]), Int(jpeg[i + 5]) << 8 | Int(jpeg[i + 6]))
            }
            i += 2 + length
        }
        return nil
    }

    @Test func aWholePictureIsSentSmallAndCachedForGood() throws {
        let dir = try TemporaryDirectory("vigil-thumbs")
        defer { dir.remove() }
        let storage = MemoryStorage(root: dir.path)
        try FileManager.default.createDirectory(atPath: dir.file("2026-11-04"), withIntermediateDirectories: true)
        var pictures: [String: [UInt8]] = [:]
        for (name, size) in [("big", "1920x1080"), ("small", "640x360")] {
            let path = "2026-11-04/\(name).jpg"
            let made = try runTool(
                "ffmpeg",
                [
                    "-nostdin", "-v", "error", "-f", "lavfi", "-i", "testsrc=size=\(size)", "-frames:v", "1",
                    dir.file(path),
                ])
            try #require(made.status == 0, "\(made.stderr)")
            pictures[name] = Array(try Data(contentsOf: URL(fileURLWithPath: dir.file(path))))
            storage.put("2026-11-04/\(name).mov", [0])
            try storage.enter(
                ClipRecord(
                    file: "2026-11-04/\(name).mov", camera: "yard",
                    start: "2026-11-04T10:00:0\(name == "big" ? 1 : 0).000+00:00", end: "2026-11-04T10:00:05.000+00:00",
                    cause: .motion, triggerTime: nil, triggerSourceSeconds: nil, preRollSeconds: 2, durationSeconds: 5,
                    frames: 75, audioFrames: 0, bytes: 1, peakScore: 0.1, part: 1, snapshot: path))
        }
        let site = WebSite(camera: "yard", version: "0.1.0", storage: storage, context: SinkContext())
        func get(_ path: String, _ query: [String: String], _ headers: [String: String] = [:]) -> HTTPResponse {
            #expect(WebSite.needsWork(HTTPRequest(method: "GET", path: path)), "built on a work thread")
            return site.respond(HTTPRequest(method: "GET", path: path, query: query, headers: headers))
        }
        func header(_ r: HTTPResponse, _ name: String) -> String? { r.headers.first { $0.name == name }?.value }
        func body(_ r: HTTPResponse) -> [UInt8] {
            if case .bytes(let b) = r.body { return b }
            return []
        }
        let page = String(decoding: body(site.respond(HTTPRequest(method: "GET", path: "/"))), as: UTF8.self)
        let address = try #require(
            page.components(separatedBy: "<img src=\"").dropFirst().first?.split(separator: "\"").first.map(String.init)
        )
        #expect(address.hasPrefix("/thumbs/2026-11-04/big.jpg?v="), "the newest clip's picture, small: \(address)")
        let version = String(address.split(separator: "=").last ?? "")

        let big = get("/thumbs/2026-11-04/big.jpg", ["v": version])
        #expect(big.status == 200 && header(big, "Content-Type") == "image/jpeg")
        let small = body(big)
        // libturbojpeg's smallest scale that keeps 640 pixels: 3/8, 720×405; the aspect the picture's.
        let made = try #require(Self.size(small))
        #expect((640..<960).contains(made.width) && abs(made.height * 16 - made.width * 9) <= 16, "\(made)")
        #expect(
            small.count * 2 < (pictures["big"]?.count ?? 0), "\(small.count) bytes of \(pictures["big"]?.count ?? 0)")
        #expect(header(big, "Cache-Control") == "public, max-age=31536000, immutable")
        let tag = try #require(header(big, "ETag"))
        let again = get("/thumbs/2026-11-04/big.jpg", ["v": version], ["if-none-match": tag])
        #expect(again.status == 304 && body(again).isEmpty)
        // Already 640 wide: the picture itself.
        #expect(body(get("/thumbs/2026-11-04/small.jpg", [:])) == pictures["small"])
        // What is not a picture here.
        #expect(get("/thumbs/events.jsonl", [:]).status == 404)
        #expect(get("/thumbs/2026-11-04/none.jpg", [:]).status == 404)
    }
}
