import Foundation

/// A `mosquitto` broker of the test's own on a loopback port, with `settings` added to its
/// configuration (anonymous clients by default); `persistence` keeps sessions and queued
/// messages across `restart()` (saved every second). Not `running`: the port is chosen, and
/// nothing listens there until `restart()`.
public final class Broker {
    public let port: Int
    public let directory: TemporaryDirectory
    private let mosquitto: String
    private let config: String
    private var process: Process?
    /// What the broker logs (`log_dest stderr`): its connections, among others.
    public var log: String { (try? String(contentsOfFile: config + ".log", encoding: .utf8)) ?? "" }

    public init(
        _ directory: TemporaryDirectory, settings: String = "allow_anonymous true", persistence: Bool = false,
        running: Bool = true
    ) throws {
        self.directory = directory
        guard
            let mosquitto = which("mosquitto")
                ?? ["/usr/sbin/mosquitto"].first(where: FileManager.default.isExecutableFile)
        else {
            throw BrokerError(description: "mosquitto is not installed (apt-get install mosquitto)")
        }
        self.mosquitto = mosquitto
        // As root mosquitto becomes the user `mosquitto`, which cannot read the test's files
        // (its TLS key, its persistence directory); `user root` keeps it as it is.
        let user = getuid() == 0 ? "user root\n" : ""
        let keep =
            persistence
            ? "persistence true\nautosave_interval 1\npersistence_location \(directory.path)/\n" : "persistence false\n"
        for _ in 0..<20 {
            let port = Int.random(in: 20_000...60_000)
            let config = directory.file("broker-\(port).conf")
            try "listener \(port) 127.0.0.1\n\(keep)log_dest stderr\n\(user)\(settings)\n".write(
                toFile: config, atomically: true, encoding: .utf8)
            if !running {
                guard !Self.accepts(port) else { continue }
                self.port = port
                self.config = config
                process = nil
                return
            }
            if let process = try Self.start(mosquitto, config: config, port: port) {
                self.port = port
                self.config = config
                self.process = process
                return
            }
        }
        throw BrokerError(description: "mosquitto did not start on any of 20 loopback ports")
    }

    deinit { stop() }

    /// SIGKILL: a child started from a test's thread may have SIGTERM blocked (the mask is
    /// inherited); with persistence, what it keeps was saved within the last second.
    public func stop() {
        guard let process, process.isRunning else { return }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    /// Freezes the broker (SIGSTOP): connections stay open, nothing is read or acknowledged.
    public func pause() { process.map { _ = kill($0.processIdentifier, SIGSTOP) } }

    /// Lets a paused broker go on (SIGCONT).
    public func resume() { process.map { _ = kill($0.processIdentifier, SIGCONT) } }

    /// Starts the broker again on the same port, after `stop()` (or first, when not `running`).
    public func restart() throws {
        stop()
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            if let process = try Self.start(mosquitto, config: config, port: port) {
                self.process = process
                return
            }
            usleep(100_000)
        }
        throw BrokerError(description: "mosquitto did not start again on port \(port)")
    }

    /// The broker listening on `port`, or nil when it ended (the port taken).
    private static func start(_ mosquitto: String, config: String, port: Int) throws -> Process? {
        let log = config + ".log"
        if !FileManager.default.fileExists(atPath: log) { FileManager.default.createFile(atPath: log, contents: nil) }
        let output = try FileHandle(forWritingTo: URL(fileURLWithPath: log))
        output.seekToEndOfFile()
        let process = Process()
        process.executableURL = URL(fileURLWithPath: mosquitto)
        process.arguments = ["-c", config]
        process.standardError = output
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        // Listening once a client can connect; a port in use ends the broker at once.
        let deadline = Date().addingTimeInterval(10)
        while process.isRunning && Date() < deadline {
            if accepts(port) { return process }
            usleep(20_000)
        }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        return nil
    }

    private static func accepts(_ port: Int) -> Bool { loopbackAccepts(port) }
}

public struct BrokerError: Error, CustomStringConvertible {
    public var description: String

    public init(description: String) { self.description = description }
}

/// `mosquitto_sub` in the background, keeping each message as topic, retained flag, payload.
public final class Subscriber {
    public struct Message: Equatable, Sendable {
        public var topic: String
        public var retained: Bool
        /// The payload's bytes (a snapshot's JPEG), and as text.
        public var bytes: [UInt8]
        public var payload: String { String(decoding: bytes, as: UTF8.self) }
    }

    private let process: Process
    private let output: String

    public init(port: Int, topic: String, in directory: TemporaryDirectory, arguments: [String] = []) throws {
        output = directory.file("sub-\(UUID().uuidString).txt")
        FileManager.default.createFile(atPath: output, contents: nil)
        process = Process()
        process.executableURL = URL(fileURLWithPath: which("mosquitto_sub") ?? "/usr/bin/mosquitto_sub")
        process.arguments =
            ["-h", "127.0.0.1", "-p", "\(port)", "-q", "1", "-t", topic, "-F", "%t\t%r\t%x"] + arguments
        process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: output))
        process.standardError = FileHandle.nullDevice
        try process.run()
        usleep(300_000)  // subscribed before the test goes on
    }

    deinit { stop() }

    public func stop() {
        guard process.isRunning else { return }
        kill(process.processIdentifier, SIGKILL)  // as the broker's
        process.waitUntilExit()
    }

    public var messages: [Message] {
        // The payload in hex (`%x`): binary payloads (a JPEG) keep the lines apart.
        let text = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { line in
            let parts = line.split(separator: "\t", maxSplits: 2, omittingEmptySubsequences: false)
            guard parts.count == 3 else { return nil }
            let hex = Array(parts[2].utf8)
            var bytes: [UInt8] = []
            bytes.reserveCapacity(hex.count / 2)
            var i = 0
            while i + 1 < hex.count {
                guard let byte = UInt8(String(decoding: hex[i..<(i + 2)], as: UTF8.self), radix: 16) else { return nil }
                bytes.append(byte)
                i += 2
            }
            return Message(topic: String(parts[0]), retained: parts[1] == "1", bytes: bytes)
        }
    }

    /// Waits until `condition` holds of the messages so far; false if it did not within
    /// `timeout` seconds.
    public func waitFor(timeout: Double, _ condition: ([Message]) -> Bool) -> Bool {
        waitUntil(timeout: timeout) { condition(messages) }
    }
}
