import Foundation
import Synchronization
import TestSupport
import Testing

/// The RTSP server on a bad day, from the real agent: requests that never end or make no
/// sense, a crowd of clients (twenty who play, two hundred who only connect), clients that
/// hold a place without playing, and an agent that restarts under its clients. The recording
/// never waits for any of them.
@Suite struct RTSPBadDayTests {
    /// A client (Python, a raw socket) that sends `mode`'s request and reports how many bytes
    /// the server took before it hung up, and the first line of its answer:
    /// - `header-line`: a header whose value never ends;
    /// - `headers`: header lines without end;
    /// - `body`: a body announced as 2 GB and sent without end;
    /// - `garbage`: bytes that are no request.
    static func hostileRequest(_ mode: String, port: Int, path: String) throws -> (sent: Int, answer: String) {
        let script = """
            import socket, sys
            mode, port, path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
            url = "rtsp://127.0.0.1:%d%s" % (port, path)
            s = socket.create_connection(("127.0.0.1", port))
            s.settimeout(30)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 65536)
            heads = {
                "header-line": ("OPTIONS %s RTSP/1.0\\r\\nCSeq: 1\\r\\nX-Long: " % url, b"A" * 65536),
                "headers": ("OPTIONS %s RTSP/1.0\\r\\nCSeq: 1\\r\\n" % url, b"X-Header: 1\\r\\n" * 4096),
                "body": ("SET_PARAMETER %s RTSP/1.0\\r\\nCSeq: 1\\r\\nContent-Length: 2000000000\\r\\n\\r\\n" % url,
                         b"B" * 65536),
            }
            sent = 0
            try:
                if mode == "garbage":
                    s.sendall(bytes(range(256)) * 16 + b"\\r\\n\\r\\n")
                else:
                    head, chunk = heads[mode]
                    s.sendall(head.encode())
                    while sent < 256 * 2**20:
                        sent += s.send(chunk)
            except OSError:
                pass
            answer = b""
            try:
                answer = s.recv(200)
            except OSError:
                pass
            print(sent)
            print(answer.split(b"\\r\\n")[0].decode("latin-1"))
            """
        let result = try runTool("timeout", ["-s", "KILL", "120", "python3", "-c", script, mode, "\(port)", path])
        let lines = result.stdout.split(separator: "\n", omittingEmptySubsequences: false)
        guard result.status == 0, let sent = lines.first.flatMap({ Int($0) }) else {
            throw RTSPCommandTests.RTSPTestError(description: "\(mode): \(result.stdout) \(result.stderr)")
        }
        return (sent, lines.count > 1 ? String(lines[1]) : "")
    }

    /// The agent's resident memory, in kB.
    static func residentKB(_ agent: AgentProcess) -> Int {
        let status = (try? String(contentsOfFile: "/proc/\(agent.pid)/status", encoding: .utf8)) ?? ""
        let line = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") } ?? ""
        return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") ?? 0
    }

    @Test func requestsThatNeverEndAreCutOffAndCostNoMemory() throws {
        let dir = try TemporaryDirectory("vigil-rtsp-hostile")
        defer { dir.remove() }
        let (agent, url) = try RTSPCommandTests.agentWithRTSP(dir)
        defer { agent.kill(SIGKILL) }
        let port = try #require(URLComponents(string: url)?.port)
        let path = try #require(URLComponents(string: url)?.path)
        // Played once, so its media and threads are counted in what it holds before.
        let first = try RTSPCommandTests.decode(url, transport: "tcp")
        #expect(first.status == 0, "\(first.stderr)")
        let before = Self.residentKB(agent)

        let garbage = try Self.hostileRequest("garbage", port: port, path: path)
        #expect(garbage.answer.hasPrefix("RTSP/1.0 400"), "\(garbage)")
        for mode in ["header-line", "headers", "body"] {
            let hostile = try Self.hostileRequest(mode, port: port, path: path)
            // Hung up on long before 256 MB: what it sent is bounded by the client's budget
            // plus what the sockets' buffers hold.
            #expect(hostile.sent < 8 << 20, "\(mode): the server took \(hostile.sent) bytes")
        }
        let after = Self.residentKB(agent)
        #expect(after - before < 32 * 1024, "resident memory went from \(before) kB to \(after) kB")
        #expect(
            agent.output.contains("msg=\"rtsp client hung up: it sent more than a client asks\""), "\(agent.output)")

        // Those who play normally are served as before.
        try RTSPCommandTests.expectPlays(url)
        agent.kill(SIGTERM)
        #expect(agent.waitForExit(timeout: 60) == 0, "\(agent.output)")
    }

    @Test func twentyClientsPlayAtOnceWhileAClipIsRecordedWithNothingDropped() throws {
        let dir = try TemporaryDirectory("vigil-rtsp-twenty")
        defer { dir.remove() }
        let (agent, url) = try RTSPCommandTests.agentWithRTSP(dir)
        defer { agent.kill(SIGKILL) }
        #expect(agent.waitFor("msg=\"vigil running\"", timeout: 60) != nil, "\(agent.output)")

        let trigger = try runTool(
            builtExecutable("vigil"), ["trigger", "--config", dir.file("vigil.conf"), "--seconds", "4"],
            environment: ["VIGIL_RUNTIME_DIR": agent.runtimeDirectory])
        #expect(trigger.status == 0, "\(trigger.stderr)")
        let results = Mutex<[ToolResult?]>(Array(repeating: nil, count: 20))
        DispatchQueue.concurrentPerform(iterations: 20) { index in
            let result = try? RTSPCommandTests.decode(url, transport: index % 2 == 0 ? "tcp" : "udp")
            results.withLock { $0[index] = result }
        }
        for (index, result) in results.withLock({ $0 }).enumerated() {
            let result = try #require(result, "client \(index) did not run")
            #expect(
                result.status == 0 && RTSPCommandTests.problems(result).isEmpty
                    && RTSPCommandTests.framesDecoded(result) >= 40, "client \(index): \(result.stderr)")
        }
        #expect(
            agent.waitUntil(timeout: 60) { agent.output.contains("msg=\"clip saved\"") }, "\(agent.output)")
        let stopped = try RTSPCommandTests.stoppedLine(agent)
        #expect(
            stopped.contains(" dropped_at_writer_total=0 ") && stopped.contains(" dropped_at_capture_total=0 "),
            "\(stopped)")
    }

    @Test func twoHundredClientsAreBoundedAndThoseWhoOnlyHoldAPlaceMakeRoom() throws {
        let dir = try TemporaryDirectory("vigil-rtsp-crowd")
        defer { dir.remove() }
        let (agent, url) = try RTSPCommandTests.agentWithRTSP(dir)
        defer { agent.kill(SIGKILL) }
        let port = try #require(URLComponents(string: url)?.port)
        #expect(agent.waitFor("msg=\"vigil running\"", timeout: 60) != nil, "\(agent.output)")

        // Two hundred connect and ask for nothing: each one beyond the limit pushes out the one
        // that waited longest, so the server holds the limit at most (and the kernel's queue of
        // connections not yet taken, 64).
        var crowd = try (0..<200).map { _ in try LoopbackClient(port: port) }
        var most = 0
        for _ in 0..<25 {
            _ = LoopbackClient.wait(for: crowd, timeout: 0.2) { _ in false }
            most = max(most, Self.establishedConnections(toPort: port))
        }
        #expect(most > 0 && most <= 32 + 64, "the server held \(most) connections at once")
        // A player gets in meanwhile, and the agent records.
        try RTSPCommandTests.expectPlays(url)
        let trigger = try runTool(
            builtExecutable("vigil"), ["trigger", "--config", dir.file("vigil.conf"), "--seconds", "2"],
            environment: ["VIGIL_RUNTIME_DIR": agent.runtimeDirectory])
        #expect(trigger.status == 0, "\(trigger.stderr)")
        // Those holding a place without asking for the stream are hung up on.
        #expect(
            agent.waitUntil(timeout: 60) {
                agent.output.contains("msg=\"rtsp client hung up: connected without asking for the stream\"")
            })
        crowd = []
        #expect(
            agent.waitUntil(timeout: 60) { agent.output.contains("msg=\"clip saved\"") }, "\(agent.output)")

        // Two hundred again at the stop: it does not wait for them.
        crowd = try (0..<200).map { _ in try LoopbackClient(port: port) }
        _ = LoopbackClient.wait(for: crowd, timeout: 2) { _ in false }
        let stopped = try RTSPCommandTests.stoppedLine(agent)
        #expect(stopped.contains(" dropped_at_writer_total=0 "), "\(stopped)")
    }

    /// Connections to this machine's `port` that the server side holds (accepted or queued to
    /// be), from the kernel's table.
    static func establishedConnections(toPort port: Int) -> Int {
        // Read to its end: the table is longer than the first read Foundation makes of a file
        // whose size says 0.
        let data = FileHandle(forReadingAtPath: "/proc/net/tcp")?.readDataToEndOfFile() ?? Data()
        let table = String(decoding: data, as: UTF8.self)
        let local = String(format: ":%04X", port)
        return table.split(separator: "\n").dropFirst().filter { line in
            let fields = line.split(separator: " ")
            return fields.count > 3 && fields[1].hasSuffix(local) && fields[3] == "01"
        }.count
    }

    @Test func anAgentThatRestartsEndsItsClientsAndServesThemAgainOnTheSamePort() throws {
        let dir = try TemporaryDirectory("vigil-rtsp-restart")
        defer { dir.remove() }
        let (agent, url) = try RTSPCommandTests.agentWithRTSP(dir)
        defer { agent.kill(SIGKILL) }
        let port = try #require(URLComponents(string: url)?.port)

        // A player that plays for good, and one stalled, when the agent stops.
        let player = Process()
        player.executableURL = URL(fileURLWithPath: try #require(which("ffmpeg")))
        player.arguments = ["-nostdin", "-v", "error", "-rtsp_transport", "tcp", "-i", url, "-f", "null", "-"]
        player.standardInput = FileHandle.nullDevice
        player.standardOutput = FileHandle.nullDevice
        player.standardError = FileHandle.nullDevice
        try player.run()
        defer { if player.isRunning { player.terminate() } }
        let stalled = try StalledRTSPClient(url: url, port: port)
        #expect(stalled.play(), "the server did not answer DESCRIBE, SETUP and PLAY")
        Thread.sleep(forTimeInterval: 2)

        agent.kill(SIGTERM)
        #expect(agent.waitForExit(timeout: 60) == 0, "\(agent.output)")
        // Both are told the stream is over: the player ends by itself, the stalled one's
        // connection is closed.
        #expect(
            try TestSupport.waitUntil(timeout: 30, every: 0.2) { !player.isRunning },
            "ffmpeg still plays a stopped agent")
        _ = LoopbackClient.wait(for: [stalled.client], timeout: 30) { $0.ended }
        #expect(stalled.client.ended, "the stalled client's connection outlived the agent")

        // The agent again, on the same port at once: players that reconnect find it.
        let config = dir.file("vigil.conf")
        let text = try String(contentsOfFile: config, encoding: .utf8)
        try text.replacingOccurrences(of: "port = 0;", with: "port = \(port);").write(
            toFile: config, atomically: true, encoding: .utf8)
        let again = try AgentProcess(config: config)
        defer { again.kill(SIGKILL) }
        #expect(again.waitFor("msg=\"rtsp server listening\"", timeout: 60) != nil, "\(again.output)")
        try RTSPCommandTests.expectPlays(url)
        again.kill(SIGTERM)
        #expect(again.waitForExit(timeout: 60) == 0, "\(again.output)")
    }

    @Test func anAddressGuessingPasswordsIsMadeToWaitAsOnTheWeb() throws {
        let dir = try TemporaryDirectory("vigil-rtsp-guess")
        defer { dir.remove() }
        let (agent, url) = try RTSPCommandTests.agentWithRTSPAndAPassword(dir)
        defer { agent.kill(SIGKILL) }
        let port = try #require(URLComponents(string: url)?.port)

        // Eight wrong passwords on one connection (the challenge's nonce, a wrong response).
        let guesser = try StalledRTSPClient(url: url, port: port)
        let challenge = guesser.request("DESCRIBE", url) ?? ""
        // (Read apart from #require: Swift 6.0.3's expansion of it does not take an optional
        // chain that ends in a property.)
        func quoted(_ name: String) -> Substring? {
            challenge.components(separatedBy: name + "=\"").dropFirst().first?.split(separator: "\"").first
        }
        let nonce = try #require(quoted("nonce"), "\(challenge)")
        let realm = try #require(quoted("realm"), "\(challenge)")
        for _ in 0..<8 {
            let answer = guesser.request(
                "DESCRIBE", url,
                [
                    "Authorization: Digest username=\"admin\", realm=\"\(realm)\", nonce=\"\(nonce)\", uri=\"\(url)\", response=\"00000000000000000000000000000000\""
                ])
            #expect(answer?.hasPrefix("RTSP/1.0 401") == true, "\(answer ?? "no answer")")
        }
        #expect(
            agent.waitUntil(timeout: 20) {
                agent.outputLines.contains {
                    $0.contains("msg=\"failed sign-ins from one address: it waits") && $0.contains(" server=rtsp")
                        && $0.contains(" address=127.0.0.1 ")
                }
            }, "\(agent.output)")
        // Now even the right password from that address is hung up on, for a while.
        let signedIn = url.replacingOccurrences(of: "rtsp://", with: "rtsp://admin:pw@")
        let refused = try RTSPCommandTests.probe(signedIn, transport: "tcp")
        #expect(refused.status != 0, "\(refused.stdout)")
        // Meanwhile the recording goes on.
        let stopped = try RTSPCommandTests.stoppedLine(agent)
        #expect(stopped.contains(" dropped_at_writer_total=0 "), "\(stopped)")
    }
}
