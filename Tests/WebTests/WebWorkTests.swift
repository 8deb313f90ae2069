import Foundation
import Media
import POSIX
import Recorder
import Synchronization
import TestSupport
import Testing

@testable import Agent
@testable import Web

/// Issue 43, 3: no slow work on the web server's polling thread. The page and `/api/clips` ask
/// the clip catalogue (a slow SD card, a year of clips): while they are built, every other
/// client — a live viewer above all — is served as if nothing were. The slowness is a gate the
/// catalogue's questions wait at, held closed by the test (`CatalogueReadHook`), so nothing
/// here is timed.
@Suite struct WebWorkTests {
    /// Where the catalogue's questions wait until the test opens it.
    final class Gate: Sendable {
        let opened = Event()
        let reached = Atomic<Int>(0)
        /// How many readers came to the gate so far.
        var readers: Int { reached.load(ordering: .relaxed) }
        func pass() {
            reached.add(1, ordering: .relaxed)
            opened.wait()
        }
        func open() { opened.signal() }
    }

    /// A storage directory of `clips` saved clips of one day, whose catalogue's every question
    /// waits at `gate`.
    static func storage(clips: Int, gate: Gate) throws -> CatalogueReadHook {
        let memory = MemoryStorage()
        for i in 0..<clips {
            let (minute, second) = (i / 60, i % 60)
            let time = String(format: "2026-12-04T10:%02d:%02d", minute, second)
            let file = "2026-12-04/yard-20261204-10\(String(format: "%02d%02d", minute, second)).mov"
            memory.put(file, [0])
            try memory.enter(
                ClipRecord(
                    file: file, camera: "yard", start: time + ".000+00:00", end: time + ".500+00:00", cause: .motion,
                    triggerTime: nil, triggerSourceSeconds: nil, preRollSeconds: 2, durationSeconds: 0.5, frames: 15,
                    audioFrames: 0, bytes: 1, peakScore: 0.1, part: 1))
        }
        return CatalogueReadHook(memory) { gate.pass() }
    }

    /// A client that asks for `path` (HTTP/1.1, the connection closed after the answer).
    static func ask(_ port: Int, _ path: String) throws -> LoopbackClient {
        let client = try LoopbackClient(port: port)
        client.send("GET \(path) HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        return client
    }

    /// What came after the answer's headers.
    static func body(_ client: LoopbackClient) -> [UInt8] {
        guard let end = client.received.firstRange(of: Array("\r\n\r\n".utf8)) else { return [] }
        return Array(client.received[end.upperBound...])
    }

    /// Whether `client` got its whole answer: the status line `status`, and as many bytes of
    /// body as its Content-Length says.
    static func whole(_ client: LoopbackClient, status: String = "HTTP/1.1 200 OK") -> Bool {
        client.statusLine == status && client.header("content-length").flatMap(Int.init) == body(client).count
    }

    /// A viewer of `/live.mp4` (HTTP/1.0: the stream is sent as it is, not chunked), and the
    /// GOPs it got so far (a movie fragment a frame, 10 frames a GOP).
    static func viewer(_ port: Int) throws -> LoopbackClient {
        let viewer = try LoopbackClient(port: port)
        viewer.send("GET /live.mp4 HTTP/1.0\r\nHost: localhost\r\n\r\n")
        return viewer
    }
    static func fragments(_ viewer: LoopbackClient) -> Int {
        topLevelBoxes(body(viewer)).filter { $0.type == "moof" }.count / 10
    }

    /// The done-means test: a viewer watches while 20 clients load the day's page (400 clips) and
    /// every build is held at the gate. The viewer gets each GOP the camera publishes, one after the other, and `/metrics` answers meanwhile; once the gate
    /// opens, every one of the 20 gets its whole answer.
    @Test func aViewerKeepsGettingEveryGOPWhileTwentyPagesAreBuilt() throws {
        let gate = Gate()
        let storage = try Self.storage(clips: 400, gate: gate)
        let web = try ConnectionLimitTests.sink(gops: 8, published: 1, storage: storage)
        defer { web.sink.finish() }
        defer { gate.open() }
        let port = web.sink.port
        let viewer = try Self.viewer(port)
        try #require(
            LoopbackClient.wait(for: [viewer], timeout: 60) { Self.fragments($0) == 1 }.isEmpty,
            "the viewer's first fragment: \(viewer)")

        // The largest page: the day's, its timeline marking all 400 clips.
        let pages = try (0..<20).map { _ in try Self.ask(port, "/?day=2026-12-04") }
        #expect(LoopbackClient.wait(for: pages, timeout: 60, reading: false) { $0.sent }.isEmpty)
        // Two pages are being built (the work threads), the other 18 wait for them.
        let server = web.sink.server
        #expect(
            waitUntil(timeout: 60) { gate.readers == 2 && server.work == (waiting: 18, building: 2) },
            "pages held: \(gate.readers), \(server.work)")

        for (i, gop) in web.gops.dropFirst().enumerated() {
            web.live.publishAsThePipeline(gop)
            try #require(
                LoopbackClient.wait(for: [viewer], timeout: 60) { Self.fragments($0) == i + 2 }.isEmpty,
                "the viewer got \(Self.fragments(viewer)) fragments of \(i + 2) GOPs published, with \(gate.readers) page(s) held"
            )
            let metrics = try Self.ask(port, "/metrics")
            #expect(LoopbackClient.wait(for: [metrics], timeout: 60) { $0.ended }.isEmpty)
            #expect(Self.whole(metrics), "/metrics while the pages are held: \(metrics)")
        }
        #expect(pages.allSatisfy { $0.received.isEmpty }, "no page was answered while the gate was closed")

        gate.open()
        #expect(LoopbackClient.wait(for: pages, timeout: 60) { $0.ended }.isEmpty, "every page answered")
        let first = Self.body(pages[0])
        for (i, page) in pages.enumerated() {
            #expect(Self.whole(page), "page \(i): \(page)")
            #expect(Self.body(page) == first, "page \(i) is the same as the others")
        }
        let page = String(decoding: first, as: UTF8.self)
        #expect(
            page.hasSuffix("</html>\n") && page.contains("yard-20261204-100639.mov")
                && page.contains("2026-12-04 · 400 clips"), "the whole page")
        // The listing, built on the same threads, once they are free: its first page.
        let listing = try Self.ask(port, "/api/clips")
        #expect(LoopbackClient.wait(for: [listing], timeout: 60) { $0.ended }.isEmpty)
        let clips = try JSONSerialization.jsonObject(with: Data(Self.body(listing))) as? [Any]
        #expect(clips?.count == ClipQuery.defaultLimit, "the listing's first page")
    }

    /// Beyond what the work threads and their queue hold, a page is refused at once (503, with
    /// when to try again) rather than left waiting; and the server stops within its grace with
    /// builds held at the gate, every client answered or its connection closed.
    @Test func aFullQueueIsRefusedAtOnceAndTheStopDoesNotWaitForTheBuilds() throws {
        let gate = Gate()
        let web = try ConnectionLimitTests.sink(gops: 2, published: 1, storage: try Self.storage(clips: 10, gate: gate))
        defer { gate.open() }
        let port = web.sink.port
        let limits = web.sink.server.limits
        let held = limits.workThreads + limits.workQueue
        let clients = try (0..<held + 6).map { _ in try Self.ask(port, "/") }
        let refused = { clients.filter { $0.statusLine != nil } }
        LoopbackClient.wait(for: clients, timeout: 60) { _ in refused().count >= 6 }
        #expect(
            waitUntil(timeout: 60) {
                web.sink.server.work == (limits.workQueue, limits.workThreads) && gate.readers == limits.workThreads
            }, "held: \(web.sink.server.work)")
        #expect(refused().count == 6, "pages refused while the queue is full")
        for client in refused() {
            #expect(client.statusLine == "HTTP/1.1 503 Service Unavailable" && client.header("retry-after") != nil)
        }

        let finished = Event()
        let sink = web.sink
        Thread.detachNewThread {
            sink.finish()
            finished.signal()
        }
        #expect(finished.wait(seconds: 60), "the stop waited for the builds held at the gate")
        #expect(
            LoopbackClient.wait(for: clients, timeout: 60) { $0.ended }.isEmpty, "every client answered or closed")
        for client in clients {
            #expect(client.statusLine == nil || client.statusLine?.hasPrefix("HTTP/1.1 503") == true, "\(client)")
        }
        #expect(!loopbackAccepts(port), "the port is closed")
    }

    /// A client that hangs up while its page is built: nothing crashes, the answer built for it
    /// goes nowhere, and its connection closes (the count is back where it was); the server
    /// serves the others meanwhile and the next page after.
    @Test func aClientThatHangsUpWhileItsPageIsBuiltLeavesNothingBehind() throws {
        let gate = Gate()
        let web = try ConnectionLimitTests.sink(gops: 2, published: 1, storage: try Self.storage(clips: 10, gate: gate))
        defer { web.sink.finish() }
        defer { gate.open() }
        let port = web.sink.port
        let server = web.sink.server
        let before = server.connectionsOpen
        var leaving: LoopbackClient? = try Self.ask(port, "/")
        #expect(waitUntil(timeout: 60) { gate.readers == 1 }, "its page is being built")
        leaving = nil
        let metrics = try Self.ask(port, "/metrics")
        #expect(LoopbackClient.wait(for: [metrics], timeout: 60) { $0.ended }.isEmpty)
        #expect(Self.whole(metrics), "/metrics while the page is held: \(metrics)")

        gate.open()
        #expect(waitUntil(timeout: 60) { server.connectionsOpen == before }, "connections: \(server.connectionsOpen)")
        // The next pages, two on one connection (kept alive between them).
        let again = try LoopbackClient(port: port)
        again.send("GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
        #expect(LoopbackClient.wait(for: [again], timeout: 60) { Self.whole($0) }.isEmpty, "the next page: \(again)")
        let first = again.received
        again.send("GET /api/clips HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        #expect(LoopbackClient.wait(for: [again], timeout: 60) { $0.ended }.isEmpty)
        let second = String(decoding: again.received.dropFirst(first.count), as: UTF8.self)
        #expect(second.hasPrefix("HTTP/1.1 200 OK\r\n") && second.hasSuffix("]\n"), "then the clips: \(second)")
        withExtendedLifetime(leaving) {}
    }
}
