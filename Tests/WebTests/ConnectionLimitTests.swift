import Configuration
import Foundation
import Logging
import Media
import QuickTime
import Recorder
import Synchronization
import TestSupport
import Testing

@testable import Agent
@testable import Web

/// The web server as the agent runs it (`WebSink`, its limits as they are) under many
/// connections at once, from many loopback addresses (127.0.0.x plays the machines of a
/// network): slow ones never lock a visitor out, viewers beyond the limit are refused at once.
@Suite struct ConnectionLimitTests {
    /// The agent's web server on a loopback port for the clips of `storage`, started with a live
    /// picture to serve (`published` of `gops` GOPs of a second; the rest are for the test to
    /// publish).
    static func sink(
        width: Int = 160, height: Int = 120, gops: Int = 6, published: Int = 6,
        storage: any ClipStorage = MemoryStorage()
    ) throws -> (sink: WebSink, live: LiveFeed, gops: [GOP]) {
        let directory = try LiveViewTests.directory.get()
        let s = try H264TestStream.make(width: width, height: height, frames: gops * 10, gop: 10, in: directory)
        let movie = try LiveMovie(
            video: VideoTrackFormat(
                width: s.width, height: s.height, sequenceParameterSet: s.sps, pictureParameterSet: s.pps))
        var settings = try Settings.defaults().web
        settings.enabled = true
        settings.listen = "127.0.0.1"
        settings.port = 0
        let sink = try WebSink(
            settings: settings, camera: "yard", version: "0.1.0", storage: storage,
            log: Logger(level: .info, sink: MemoryLogSink()))
        let context = SinkContext()
        sink.start(context)
        context.live.begin(movie)
        let made = s.gops(end: LiveViewTests.time(gops * 10), time: LiveViewTests.time)
        for gop in made.prefix(published) { context.live.publishAsThePipeline(gop) }
        return (sink, context.live, made)
    }

    /// 127.0.0.`first` … 127.0.0.`last`.
    static func addresses(_ first: Int, _ last: Int) -> [String] { (first...last).map { "127.0.0.\($0)" } }

    /// Issue 41, finding 12: slow connections from 40 addresses, 192 in all, each adding a byte to
    /// its request line now and then (so no idle time-out closes it), took every place the
    /// server had: a visitor's `/api/clips` got nothing, nor a new viewer. Now the ones that
    /// waited longest for a whole request make room.
    @Test func slowConnectionsFromManyAddressesLeaveRoomForAVisitorAndAViewer() throws {
        let web = try Self.sink(gops: 7, published: 6)
        defer { web.sink.finish() }
        let slow = try SlowClients(port: web.sink.port, count: 192, from: Self.addresses(2, 41))
        defer { slow.close() }
        for _ in 0..<600 where slow.started < 192 { usleep(50_000) }
        #expect(slow.started == 192, "the slow connections were made")
        let clips = try HTTPServerTests.curl(web.sink.server, "/api/clips")
        #expect(clips.status == 200 && clips.body.first == UInt8(ascii: "["), "a visitor's /api/clips: \(clips.status)")
        // The GOP in progress, whole once the next keyframe comes.
        let live7 = web.live
        let next = web.gops[6]
        Thread.detachNewThread {
            usleep(500_000)
            live7.publishAsThePipeline(next)
        }
        let live = try HTTPServerTests.curl(web.sink.server, "/live.mp4?gops=1")
        #expect(live.status == 200 && live.body.count > 1000, "a new viewer: \(live.status), \(live.body.count) bytes")
    }

    /// Issue 41, finding 13: 200 viewers asked at once from 10 addresses; beyond the limit they
    /// were left hanging (72 time-outs). Now the limit is served and every other one is
    /// told 503, with when to try again, at once.
    @Test func viewersBeyondTheLimitAreRefusedAtOnce() throws {
        let web = try Self.sink()
        defer { web.sink.finish() }
        // Each asks as soon as it is connected, as a player does.
        let viewers = try (0..<200).map { i in
            let viewer = try LoopbackClient(port: web.sink.port, from: "127.0.0.\(2 + i % 10)")
            viewer.send("GET /live.mp4 HTTP/1.1\r\nHost: localhost\r\n\r\n")
            return viewer
        }
        let unanswered = LoopbackClient.wait(for: viewers, timeout: 30) { $0.hasHeaders || $0.ended }
        #expect(unanswered.count == 0, "viewers that got no answer")
        let served = viewers.filter { $0.statusLine == "HTTP/1.1 200 OK" }
        let refused = viewers.filter { $0.statusLine?.hasPrefix("HTTP/1.1 503") == true }
        #expect(served.count == HTTPServer.Limits().streams, "viewers served")
        #expect(refused.count == 200 - served.count, "the others refused")
        #expect(refused.allSatisfy { $0.header("retry-after") != nil }, "a refused viewer is told when to try again")
        // Those served get the live picture.
        let starved = LoopbackClient.wait(for: served, timeout: 30) { $0.received.count > 1000 }
        #expect(starved.isEmpty, "\(starved.count) viewers served got no picture")
    }

    /// The limit per address holds as it did: one address's 65th connection is closed at once,
    /// unanswered, while another address is served.
    @Test func oneAddressGetsNoMoreThanItsShare() throws {
        let server = try HTTPServerTests.serve { _ in .text(200, "ok") }
        defer { server.stop() }
        let slow = try SlowClients(port: server.port, count: 64, from: ["127.0.0.50"])
        defer { slow.close() }
        for _ in 0..<600 where slow.started < 64 { usleep(50_000) }
        let more = try LoopbackClient(port: server.port, from: "127.0.0.50")
        let other = try LoopbackClient(port: server.port, from: "127.0.0.51")
        for client in [more, other] { client.send("GET / HTTP/1.1\r\nHost: localhost\r\n\r\n") }
        let waiting = LoopbackClient.wait(for: [more, other], timeout: 20) { $0.ended || $0.statusLine != nil }
        #expect(waiting.isEmpty)
        #expect(more.ended && more.received.isEmpty, "the 65th from one address: \(more.statusLine ?? "closed")")
        #expect(other.statusLine == "HTTP/1.1 200 OK")
    }
}

/// Which connections make room, in what order, and the stop with every kind of client there.
@Suite struct ConnectionRoomTests {
    /// A client of `server` from 127.0.0.1 that sends `request` and, when it is whole, waits for
    /// the answer's headers.
    static func client(_ server: HTTPServer, _ request: String) throws -> LoopbackClient {
        let client = try LoopbackClient(port: server.port)
        client.send(request)
        if request.hasSuffix("\r\n\r\n") {
            let waiting = LoopbackClient.wait(for: [client], timeout: 20) { $0.hasHeaders || $0.ended }
            #expect(waiting.isEmpty && client.statusLine == "HTTP/1.1 200 OK", "\(request)")
        } else {
            #expect(LoopbackClient.wait(for: [client], timeout: 20, reading: false) { $0.sent }.isEmpty)
        }
        return client
    }

    /// Waits for `out` to be closed by the server, then checks that `kept` are not.
    static func expectPushedOut(_ out: LoopbackClient, keeping kept: [LoopbackClient], _ what: String) {
        let open = LoopbackClient.wait(for: [out], timeout: 20) { $0.ended }
        #expect(open.isEmpty, "\(what) was not pushed out")
        for client in kept { client.receive() }
        #expect(kept.allSatisfy { !$0.ended }, "\(what): another was pushed out instead")
    }

    @Test func theConnectionsWaitingLongestForARequestGoFirstThenTheLongestIdleNeverAViewer() throws {
        var limits = HTTPServer.Limits()
        limits.connections = 4
        let parts = HTTPServerTests.Parts(["never sent"])
        let server = try HTTPServerTests.serve(limits: limits) { request in
            request.path == "/live" ? HTTPResponse(status: 200, body: .stream(parts)) : .text(200, "ok")
        }
        defer { server.stop() }
        let whole = "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"
        let viewer = try Self.client(server, "GET /live HTTP/1.1\r\nHost: localhost\r\n\r\n")
        let idle = try Self.client(server, whole)
        let slowA = try Self.client(server, "GET / HTTP/1.1\r\nHost: localhost\r\n")
        let slowB = try Self.client(server, "GET / HT")
        // Four kept; each newcomer is served, and makes room.
        let c = try Self.client(server, whole)
        Self.expectPushedOut(slowA, keeping: [viewer, idle, slowB, c], "the longest waiting for a request")
        let d = try Self.client(server, whole)
        Self.expectPushedOut(slowB, keeping: [viewer, idle, c, d], "the next waiting for a request")
        let e = try Self.client(server, whole)
        Self.expectPushedOut(idle, keeping: [viewer, c, d, e], "the longest idle")
        let f = try Self.client(server, whole)
        Self.expectPushedOut(c, keeping: [viewer, d, e, f], "the next idle")
        #expect(server.streamsOpen == 1, "the viewer is still served")
    }

    /// With nothing waiting or idle, the answer going out longest goes: of three clients that
    /// asked for a large file and read none of it, the first.
    @Test func withOnlyAnswersLeftTheOneGoingOutLongestGoes() throws {
        var limits = HTTPServer.Limits()
        limits.connections = 4
        let parts = HTTPServerTests.Parts(["never sent"])
        let large = [UInt8](repeating: UInt8(ascii: "v"), count: 8 << 20)
        let server = try HTTPServerTests.serve(limits: limits) { request in
            switch request.path {
            case "/live": HTTPResponse(status: 200, body: .stream(parts))
            case "/large": HTTPResponse(status: 200, body: .bytes(large))
            default: .text(200, "ok")
            }
        }
        defer { server.stop() }
        /// How many answers hold more than the readers take (their clients read nothing).
        func answersHeld() -> Int { serverConnections(onPort: server.port).filter { $0 > 256 * 1024 }.count }
        let viewer = try Self.client(server, "GET /live HTTP/1.1\r\nHost: localhost\r\n\r\n")
        let readers = try (0..<3).map { i in
            let reader = try LoopbackClient(port: server.port, receiveBuffer: 4096)
            reader.send("GET /large HTTP/1.1\r\nHost: localhost\r\n\r\n")
            let deadline = Date().addingTimeInterval(20)
            while answersHeld() <= i && Date() < deadline { usleep(10_000) }
            return reader
        }
        #expect(answersHeld() == 3)
        let newcomer = try Self.client(server, "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
        Self.expectPushedOut(readers[0], keeping: [viewer, newcomer], "the oldest answer")
        #expect(answersHeld() == 2, "the other two answers still go out")
        #expect(server.streamsOpen == 1, "the viewer is still served")
    }

    /// Issue 41, 14: the agent stops its sinks side by side, and the web sink's part must not
    /// wait on its clients: a thousand slow ones, and viewers that never read (their last
    /// chunk cannot go). `finish()` returns, nothing of the server is left open, and no viewer
    /// is left counted. (How long it took is printed: the issue asks for 1.5 s at most.)
    @Test func finishingLeavesNothingOpenWithAThousandSlowClientsAndViewersThatNeverRead() throws {
        let web = try ConnectionLimitTests.sink(width: 1920, height: 1080, gops: 12, published: 1)
        let port = web.sink.port
        let viewers = try (0..<100).map { i in
            let viewer = try LoopbackClient(port: port, from: "127.0.0.\(42 + i % 10)", receiveBuffer: 4096)
            viewer.send("GET /live.mp4 HTTP/1.1\r\nHost: localhost\r\n\r\n")
            return viewer
        }
        #expect(LoopbackClient.wait(for: viewers, timeout: 30, reading: false) { $0.sent }.isEmpty)
        let limit = HTTPServer.Limits().streams
        for _ in 0..<600 where web.sink.server.streamsOpen < limit { usleep(50_000) }
        let slow = try SlowClients(port: port, count: 1000, from: ConnectionLimitTests.addresses(2, 41))
        defer { slow.close() }
        // More of the picture than the viewers take: the server's side of each holds bytes it
        // cannot send.
        for gop in web.gops.dropFirst() {
            web.live.publishAsThePipeline(gop)
            usleep(100_000)
        }
        let deadline = Date().addingTimeInterval(30)
        // (A stream's socket keeps 128 KB at most: `streamSendBuffer`.)
        while serverConnections(onPort: port).filter({ $0 > 64 * 1024 }).count < limit && Date() < deadline {
            usleep(50_000)
        }
        let streams = web.sink.server.streamsOpen
        let stuck = serverConnections(onPort: port).filter { $0 > 64 * 1024 }.count
        #expect(streams == limit && stuck >= limit, "\(streams) streams, \(stuck) connections that cannot send")

        let done = DispatchSemaphore(value: 0)
        let start = ContinuousClock.now
        let sink = web.sink
        Thread.detachNewThread {
            sink.finish()
            done.signal()
        }
        let finished = done.wait(timeout: .now() + 30) == .success
        let took = ContinuousClock.now - start
        #expect(finished, "finish() has not returned")
        print(
            "ConnectionRoomTests: WebSink.finish() took \(took) with \(streams) viewers that never read and 1000 slow clients"
        )
        #expect(web.sink.server.streamsOpen == 0 && web.sink.server.connectionsOpen == 0)
        #expect(web.sink.site?.viewers.load(ordering: .relaxed) == 0, "viewers left counted")
        #expect(serverConnections(onPort: port).isEmpty, "the server's connections are closed")
        #expect(!loopbackAccepts(port), "the port is closed")
        withExtendedLifetime(viewers) {}
    }

    /// The order of who goes, on the value itself: waiting (oldest first), then idle (longest
    /// first), then answering (longest first); never a stream, never the newcomer; none while
    /// there is room, and each pushed out once.
    @Test func theRoomPushesOutInItsOrder() {
        var room = ConnectionRoom(keep: 5)
        #expect(room.started(1, descriptor: 11) == nil)
        room.answering(1, streaming: true)
        #expect(room.started(2, descriptor: 12) == nil)
        room.answering(2, streaming: false)
        #expect(room.started(3, descriptor: 13) == nil)
        room.answering(3, streaming: false)
        room.completed(3)
        #expect(room.started(4, descriptor: 14) == nil)
        #expect(room.started(5, descriptor: 15) == nil)
        room.answering(2, streaming: false)
        room.completed(2)
        // Full: 1 streams, 2 idle (since after 3), 3 idle, 4 and 5 wait (4 longer).
        #expect(room.started(6, descriptor: 16) == 14, "the one waiting longest")
        #expect(room.started(7, descriptor: 17) == 15, "the next waiting")
        #expect(room.started(8, descriptor: 18) == 16, "the newcomers wait too, the oldest first")
        #expect(room.started(9, descriptor: 19) == 17)
        room.answering(8, streaming: false)
        room.answering(9, streaming: false)
        #expect(room.started(10, descriptor: 20) == 13, "then the one idle longest")
        room.answering(10, streaming: false)
        #expect(room.started(11, descriptor: 21) == 12, "then the next idle")
        room.answering(11, streaming: false)
        #expect(room.count == 5 && room.connections.count == 11, "those pushed out stay until closed")
        for closed: UInt in [2, 3, 4, 5, 6, 7] { room.closed(closed) }
        #expect(room.count == 5 && room.connections.count == 5)
        // Only answers and a stream left: the answer going out longest goes.
        #expect(room.started(12, descriptor: 22) == 18)
        room.closed(8)
        room.answering(12, streaming: true)
        #expect(room.started(13, descriptor: 23) == 19)
        room.closed(9)
        room.answering(13, streaming: true)
        room.answering(10, streaming: true)
        room.answering(11, streaming: true)
        // Every other a stream: the newcomer stays, over the room, until one closes.
        #expect(room.started(14, descriptor: 24) == nil)
        #expect(room.count == 6)
    }

    /// The limits against what the process may open: as asked when they fit; lowered, with a
    /// quarter of them for streams, when they do not.
    @Test func theLimitsFitTheDescriptorsTheProcessMayOpen() {
        let asked = HTTPServer.Limits()
        #expect(asked.fitted(openFiles: 1024) == (asked, false), "systemd's default (1024) holds them")
        #expect(asked.fitted(openFiles: nil) == (asked, false))
        let fitted = asked.fitted(openFiles: 256)
        #expect(fitted.lowered)
        #expect(fitted.limits.connections == (256 - 64) / 2 - 16)
        #expect(fitted.limits.connectionsPerAddress == 64 && fitted.limits.streams == 20)
        let tiny = asked.fitted(openFiles: 64)
        #expect(tiny.lowered && tiny.limits.connections == 4 && tiny.limits.streams == 1)
        #expect(tiny.limits.connectionsPerAddress == 4)
        var few = HTTPServer.Limits()
        few.connections = 8
        #expect(few.fitted(openFiles: 1024).limits.streams == 2 && !few.fitted(openFiles: 1024).lowered)
    }
}
