import Foundation
import Glibc
import Synchronization
import TestSupport
import Testing

/// The agent under systemd: `sd_notify` messages on the socket in NOTIFY_SOCKET, and log lines
/// with journald priority prefixes when JOURNAL_STREAM is set.
@Suite struct SystemdTests {
    /// A datagram socket bound to a path, collecting what is sent to it.
    final class NotifySocket: Sendable {
        let path: String
        private let fd: Int32
        private let messages = Mutex<[String]>([])

        init(path: String) throws {
            self.path = path
            fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
            guard fd >= 0 else { throw ToolError.notFound("socket") }
            var address = sockaddr_un()
            address.sun_family = sa_family_t(AF_UNIX)
            withUnsafeMutableBytes(of: &address.sun_path) { raw in
                for (i, b) in path.utf8.enumerated() { raw[i] = b }
            }
            let bound = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
                }
            }
            guard bound == 0 else { throw ToolError.notFound("bind \(path)") }
            let thread = Thread { [self] in
                var buffer = [UInt8](repeating: 0, count: 4096)
                while true {
                    let n = recv(fd, &buffer, buffer.count, 0)
                    if n <= 0 { break }
                    let text = String(decoding: buffer[0..<n], as: UTF8.self)
                    messages.withLock { $0.append(text) }
                }
            }
            thread.start()
        }

        var received: [String] { messages.withLock { $0 } }
        func close() {
            shutdown(fd, Int32(SHUT_RDWR))
            Glibc.close(fd)
        }
    }

    @Test func tellsSystemdItIsReadyAliveAndStoppingAndLogsWithPriorities() throws {
        let (dir, config) = try AgentTests.directory(
            "vigil-systemd", footage: 8, objects: [AgentTests.object(1, 7)], realtime: true)
        defer { dir.remove() }
        let socket = try NotifySocket(path: dir.file("notify"))
        defer { socket.close() }
        let agent = try AgentProcess(
            config: config,
            environment: ["NOTIFY_SOCKET": socket.path, "WATCHDOG_USEC": "1000000", "JOURNAL_STREAM": "8:12345"])
        #expect(agent.waitUntil(timeout: 60) { !movieFiles(in: dir.file("clips")).isEmpty }, "\(agent.output)")
        usleep(1_500_000)
        agent.kill(SIGTERM)
        #expect(agent.waitForExit(timeout: 20) == 0)
        usleep(200_000)
        let messages = socket.received
        #expect(messages.first?.hasPrefix("READY=1") == true, "\(messages)")
        #expect(messages.contains("WATCHDOG=1"), "\(messages)")
        #expect(messages.contains("STOPPING=1"), "\(messages)")
        let lines = agent.output.split(separator: "\n")
        #expect(!lines.isEmpty)
        #expect(
            lines.allSatisfy { $0.hasPrefix("<6>level=info ") || $0.hasPrefix("<4>level=warning ") }, "\(agent.output)")
        // No timestamp of its own: the journal adds one.
        #expect(!lines.contains { $0.dropFirst(3).hasPrefix("ts=") || $0.contains(" ts=") })
    }
}
