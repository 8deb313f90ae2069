import Foundation
import Glibc
import QuickTime
import Recorder
import Storage
import Synchronization
import TestSupport
import Testing

/// `vigil trigger` as a user runs it, against `vigil run` on footage without motion played in
/// real time: the agent records an outside event; with no agent, the command says so.
@Suite struct TriggerCommandTests {
    @Test func triggerRecordsAnExternalEventOnTheRunningAgent() throws {
        let dir = try TemporaryDirectory("vigil-trigger")
        defer { dir.remove() }
        let footage = try writeFootage(scene(seconds: 14, objects: []), to: dir.file("quiet.y4m"))
        let config = dir.file("vigil.conf")
        try """
        camera = { device = "file:\(footage)"; name = "porch"; realtime = true; };
        recording = { pre_roll = 1.0; post_roll = 1.0; };
        storage = { path = "\(dir.file("clips"))"; min_free_mb = 1; };
        encoder = { threads = 1; };
        """.write(toFile: config, atomically: true, encoding: .utf8)

        let (agent, running) = try AgentProcess.running(config: config)
        defer { agent.kill(SIGKILL) }
        let socket = agent.runtimeDirectory + "/porch.sock"
        #expect(logValue(running, "trigger_socket") == socket)
        Thread.sleep(forTimeInterval: 3)  // some pre-roll in the ring
        let environment = ["VIGIL_RUNTIME_DIR": agent.runtimeDirectory]
        let trigger = try runTool(
            builtExecutable("vigil"), ["trigger", "--config", config, "--seconds", "2"], environment: environment)
        #expect(trigger.status == 0 && trigger.stdout.contains("ok: recording for 2.0 s"), "\(trigger)")
        let refused = try runTool(
            builtExecutable("vigil"), ["trigger", "--config", config, "--seconds", "0"], environment: environment)
        #expect(refused.status == 64 && refused.stderr.contains("from 1 to 3600"), "\(refused)")

        #expect(agent.waitForExit(timeout: 120) == 0, "\(agent.output)")
        #expect(!FileManager.default.fileExists(atPath: socket), "the agent removes its socket when it stops")
        let records = try EventsJournal(directory: dir.file("clips")).records().records
        try #require(records.count == 1, "\(records)\n\(agent.output)")
        #expect(records[0].cause == .external && records[0].triggerTime != nil, "\(records[0])")
        #expect(records[0].durationSeconds >= 3.9 && records[0].durationSeconds <= 5.2, "\(records[0])")
        let clip = dir.file("clips") + "/" + records[0].file
        _ = try expectPlayable(clip, "the triggered clip:")
        #expect(try MovieRepair.inspect(path: clip) == .complete)

        // Nobody answers for this camera any more.
        let none = try runTool(builtExecutable("vigil"), ["trigger", "--config", config], environment: environment)
        #expect(none.status == 69 && none.stderr.contains("no agent is recording camera \"porch\""), "\(none)")
    }

    /// A live synthetic camera (never ends), clips into `dir/clips`, camera name `name`.
    static func liveConfig(
        _ dir: TemporaryDirectory, name: String = "porch", device: String = "synthetic"
    ) throws
        -> String
    {
        let config = dir.file("vigil-\(name)-\(UUID().uuidString.prefix(4)).conf")
        try """
        camera = { device = "\(device)"; name = "\(name)"; width = 320; height = 240; fps = 15.0; };
        recording = { pre_roll = 1.0; post_roll = 1.0; };
        storage = { path = "\(clips(of: config))"; min_free_mb = 1; };
        encoder = { threads = 1; };
        log = { stats_interval = 0; };
        """.write(toFile: config, atomically: true, encoding: .utf8)
        return config
    }

    /// The storage directory of the `liveConfig` at `config`.
    static func clips(of config: String) -> String {
        (config as NSString).deletingLastPathComponent + "/clips-" + config.suffix(9)
    }

    /// `vigil run` on a new `liveConfig(dir)`, once it is running: the agent, the trigger
    /// socket its "vigil running" line names, and its storage directory. The test kills it
    /// (`defer { agent.kill(SIGKILL) }`).
    static func liveAgent(_ dir: TemporaryDirectory) throws -> (agent: AgentProcess, socket: String, clips: String) {
        let config = try liveConfig(dir)
        let (agent, running) = try AgentProcess.running(config: config)
        let socket = logValue(running, "trigger_socket")
        if socket == nil { agent.kill(SIGKILL) }
        return (agent, try #require(socket, "\(running)"), clips(of: config))
    }

    /// Six clients that connect and say nothing, and one that sends a byte a second, all ahead
    /// of a doorbell's `record 2`: the doorbell is answered at once (the agent served them one
    /// at a time, 2 s each, and the slow one for up to 256 s). Twenty more at once: the agent
    /// reads sixteen and answers the rest "busy" at once. SIGTERM with all of them still
    /// connected: the agent stops without waiting for them.
    @Test func silentAndSlowClientsHoldUpNeitherATriggerNorTheStop() throws {
        let dir = try TemporaryDirectory("vigil-trigger")
        defer { dir.remove() }
        let (agent, socket, clips) = try Self.liveAgent(dir)
        defer { agent.kill(SIGKILL) }

        let silent = try (0..<6).map { _ in try RawClient(socket) }
        let slow = try RawClient(socket)
        let dripping = Atomic<Bool>(true)
        let drip = Thread { [slow] in
            while dripping.load(ordering: .relaxed) {
                slow.send("r")
                Thread.sleep(forTimeInterval: 1)
            }
        }
        drip.start()
        defer { dripping.store(false, ordering: .relaxed) }
        let doorbell = try RawClient(socket)
        doorbell.send("record 2\n")
        let reply = doorbell.readLine(timeout: 30)
        #expect(reply?.hasPrefix("ok: recording for 2.0 s") == true, "\(String(describing: reply))\n\(agent.output)")
        // The clip it asked for, saved (the synthetic scene's own events are motion's).
        #expect(
            agent.waitUntil(timeout: 60) { journalRecords(in: clips).contains { $0.cause == .external } },
            "\(agent.output)")

        // Silent clients are let go after their deadline, with a word.
        let told = silent[0].readLine(timeout: 30)
        #expect(told?.hasPrefix("error: no request line within 2 s") == true, "\(String(describing: told))")
        #expect(slow.readLine(timeout: 30)?.hasPrefix("error: no request line") == true)
        dripping.store(false, ordering: .relaxed)

        // Twenty at once: sixteen are read; the other four are answered at once, while the
        // sixteen are still connected and have not been answered.
        let crowd = try (0..<20).map { _ in try RawClient(socket) }
        var busy = 0
        for client in crowd where client.readLine(timeout: 0.5)?.hasPrefix("unavailable: busy") == true { busy += 1 }
        #expect(busy >= 4, "\(busy) told busy")

        // The stop does not wait for clients (those of the crowd still connected).
        agent.kill(SIGTERM)
        #expect(agent.waitForExit(timeout: 30) == 0, "\(agent.output)")
        let stopping = agent.outputLines.firstIndex { $0.contains("msg=stopping") }
        let stopped = agent.outputLines.firstIndex { $0.contains("msg=\"vigil stopped\"") }
        #expect(stopping != nil && stopped != nil, "\(agent.output)")
        #expect(!FileManager.default.fileExists(atPath: socket), "the agent removes its socket when it stops")
        _ = crowd
    }

    /// A second agent with the camera name of one already running on this machine (another
    /// storage directory) would share its trigger socket and MQTT topics: it is refused at
    /// start, exit 75, naming the name, the first one's pid, configuration and storage, and
    /// the fix. The first goes on answering. Once the first is killed (its socket and lock
    /// file left behind), a new agent of that name starts and takes the socket over.
    @Test func aSecondAgentWithTheSameCameraNameIsRefused() throws {
        let dir = try TemporaryDirectory("vigil-trigger")
        defer { dir.remove() }
        let (first, socket, firstClips) = try Self.liveAgent(dir)
        defer { first.kill(SIGKILL) }
        let runtime = ["VIGIL_RUNTIME_DIR": first.runtimeDirectory]

        let secondConfig = try Self.liveConfig(dir)
        let second = try AgentProcess(config: secondConfig, environment: runtime)
        defer { second.kill(SIGKILL) }
        #expect(second.waitForExit(timeout: 60) == 75, "\(second.output)")
        let refusal = try #require(
            second.outputLines.first { $0.contains("another agent on this machine records a camera of this name") },
            "\(second.output)")
        #expect(logValue(refusal, "level") == "error")
        #expect(refusal.contains("give this one another camera.name"))
        #expect(logValue(refusal, "camera_name") == "porch")
        #expect(logValue(refusal, "pid") == String(first.pid), "\(refusal)")
        #expect(logValue(refusal, "its_storage")?.hasPrefix(dir.file("clips-")) == true, "\(refusal)")
        #expect(logValue(refusal, "its_config")?.hasSuffix(".conf") == true, "\(refusal)")
        #expect(!second.output.contains("vigil running") && !second.output.contains("storage ready"))

        let ask = try runTool(
            builtExecutable("vigil"), ["trigger", "--config", secondConfig, "--seconds", "2"], environment: runtime)
        #expect(ask.status == 0 && ask.stdout.contains("ok: recording"), "\(ask)")
        #expect(
            first.waitUntil(timeout: 60) { journalRecords(in: firstClips).contains { $0.cause == .external } },
            "\(first.output)")

        first.kill(SIGKILL)
        _ = first.waitForExit(timeout: 30)
        #expect(FileManager.default.fileExists(atPath: socket), "a killed agent leaves its socket")
        let (third, _) = try AgentProcess.running(config: try Self.liveConfig(dir), environment: runtime)
        defer { third.kill(SIGKILL) }
        let again = try runTool(builtExecutable("vigil"), ["trigger", "--config", secondConfig], environment: runtime)
        #expect(again.status == 0 && again.stdout.contains("ok: recording"), "\(again)")
        third.kill(SIGTERM)
        #expect(third.waitForExit(timeout: 60) == 0, "\(third.output)")
    }

    /// A camera that is not there: the agent waits for it, and `vigil trigger` is told so —
    /// the device and since when, exit 69 — instead of "ok: recording"; the agent logs the
    /// refused request.
    @Test func aTriggerWithoutACameraIsRefused() throws {
        let dir = try TemporaryDirectory("vigil-trigger")
        defer { dir.remove() }
        let device = "/dev/vigil-test-no-such-camera"
        let config = try Self.liveConfig(dir, device: device)
        let (agent, _) = try AgentProcess.running(config: config)
        defer { agent.kill(SIGKILL) }
        let runtime = ["VIGIL_RUNTIME_DIR": agent.runtimeDirectory]
        let r = try runTool(builtExecutable("vigil"), ["trigger", "--config", config], environment: runtime)
        #expect(r.status == 69, "\(r)")
        #expect(
            r.stderr.hasPrefix("vigil trigger: camera porch: no camera: \(device) is not delivering frames since "),
            "\(r.stderr)")
        #expect(r.stdout.isEmpty)
        agent.kill(SIGTERM)
        #expect(agent.waitForExit(timeout: 60) == 0, "\(agent.output)")
        // Said before the answer went out.
        let logged = logLines(agent.output, "outside trigger refused: no camera").first
        #expect(logged.flatMap { logValue($0, "level") } == "warning", "\(agent.output)")
        #expect(logged.flatMap { logValue($0, "reason") }?.contains(device) == true)
        #expect(!agent.output.contains("recording on an outside trigger"))
    }

    /// A runtime directory in /tmp (where anyone may make one, as the `/tmp/vigil-<uid>`
    /// fallback is) that lets others in, or that another user owns, is refused by the agent
    /// (it runs without a socket, and says why) and by `vigil trigger` (exit 69, saying why).
    /// One the agent makes itself gets mode 0700.
    @Test func aRuntimeDirectoryOthersCouldHaveMadeIsRefused() throws {
        let dir = try TemporaryDirectory("vigil-trigger")
        defer { dir.remove() }
        let config = try Self.liveConfig(dir)

        // Made by the agent: 0700.
        let (agent, _) = try AgentProcess.running(config: config)
        defer { agent.kill(SIGKILL) }
        let made = try FileManager.default.attributesOfItem(atPath: agent.runtimeDirectory)
        #expect((made[.posixPermissions] as? Int) == 0o700, "\(made)")
        // Opened up while it runs: `vigil trigger` does not go through it.
        chmod(agent.runtimeDirectory, 0o777)
        let runtime = ["VIGIL_RUNTIME_DIR": agent.runtimeDirectory]
        let r = try runTool(builtExecutable("vigil"), ["trigger", "--config", config], environment: runtime)
        #expect(r.status == 69 && r.stderr.contains("has mode 777, which lets other users in"), "\(r)")
        agent.kill(SIGTERM)
        #expect(agent.waitForExit(timeout: 60) == 0, "\(agent.output)")

        // Made by someone else beforehand: open to all, or another user's.
        for (mode, owner) in [(0o777 as mode_t, getuid()), (0o700, 4242)] {
            let runtimeDirectory = NSTemporaryDirectory() + "vigil-run-planted-" + UUID().uuidString.prefix(8)
            #expect(mkdir(runtimeDirectory, mode) == 0)
            chmod(runtimeDirectory, mode)
            #expect(chown(runtimeDirectory, owner, getgid()) == 0)
            defer { try? FileManager.default.removeItem(atPath: runtimeDirectory) }
            // It records all the same; what it says of the directory is said before that.
            let (planted, _) = try AgentProcess.running(
                config: config, environment: ["VIGIL_RUNTIME_DIR": runtimeDirectory])
            defer { planted.kill(SIGKILL) }
            let warning = planted.outputLines.first { $0.contains("`vigil trigger` will not reach this agent") }
            #expect(warning.flatMap { logValue($0, "level") } == "warning", "\(planted.output)")
            let why = owner == getuid() ? "which lets other users in" : "belongs to user id 4242"
            #expect(warning?.contains(why) == true, "\(planted.output)")
            #expect(!FileManager.default.fileExists(atPath: runtimeDirectory + "/porch.sock"))
            planted.kill(SIGTERM)
            #expect(planted.waitForExit(timeout: 60) == 0, "\(planted.output)")
        }
    }
}

/// A client of the trigger socket speaking to it byte by byte, as a test needs.
final class RawClient: @unchecked Sendable {
    let fd: Int32

    init(_ path: String) throws {
        fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            let bytes = Array(path.utf8)
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard connected == 0 else {
            close(fd)
            throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
        }
    }

    deinit { close(fd) }

    func send(_ text: String) {
        _ = Array(text.utf8).withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    /// The reply line, waiting at most `timeout` seconds; nil for none (or the end without one).
    func readLine(timeout: Double) -> String? {
        var bytes: [UInt8] = []
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let left = Int32(max(1, deadline.timeIntervalSinceNow * 1000))
            guard poll(&entry, 1, left) > 0 else { continue }
            var byte: UInt8 = 0
            guard recv(fd, &byte, 1, 0) == 1 else { break }
            if byte == UInt8(ascii: "\n") { return String(decoding: bytes, as: UTF8.self) }
            bytes.append(byte)
        }
        return bytes.isEmpty ? nil : String(decoding: bytes, as: UTF8.self)
    }
}
