import FoundationEssentials
import Glibc
import Logging
import Media
import Synchronization

/// `vigil trigger`'s way to the running agent: a Unix stream socket named after the camera,
/// `<runtime directory>/<camera.name>.sock`, in the first of `TriggerSocket.directories` that
/// the agent can use. A client writes one line — `record` or `record <seconds>` — and reads
/// one back: `ok …` or `error …`.
///
/// The socket is the agent's user's and group's (mode 0660): root, and members of the agent's
/// group (`vigil` from the package), may trigger it.
public enum TriggerSocket {
    /// Where the socket may be, in order: `$VIGIL_RUNTIME_DIR`, `/run/vigil` (the units'
    /// `RuntimeDirectory`), `$XDG_RUNTIME_DIR/vigil`, `/tmp/vigil-<uid>`.
    public static func directories(environment: [String: String] = ProcessInfo.processInfo.environment) -> [String] {
        if let dir = environment["VIGIL_RUNTIME_DIR"], !dir.isEmpty { return [dir] }
        var dirs = ["/run/vigil"]
        if let xdg = environment["XDG_RUNTIME_DIR"], !xdg.isEmpty { dirs.append(xdg + "/vigil") }
        dirs.append("/tmp/vigil-\(getuid())")
        return dirs
    }

    /// The socket's path in `directory`.
    public static func path(directory: String, camera: String) -> String { directory + "/" + camera + ".sock" }

    /// The longest request or reply.
    static let lineLimit = 256

    // MARK: The client

    /// Why `vigil trigger` could not reach an agent.
    public struct ClientError: Error, CustomStringConvertible, Sendable {
        public var description: String
    }

    /// Asks the agent recording `camera` to record (for `seconds`, or its default); returns its reply.
    public static func request(camera: String, seconds: Double?, directories: [String]) throws(ClientError) -> String {
        var tried: [String] = []
        for directory in directories {
            let path = path(directory: directory, camera: camera)
            guard access(path, F_OK) == 0 else { continue }
            tried.append(path)
            let fd = streamSocket()
            guard fd >= 0 else { throw ClientError(description: "cannot make a socket: \(errnoText())") }
            defer { close(fd) }
            guard connect(fd, path: path) else {
                let error = errno
                if error == EACCES || error == EPERM {
                    throw ClientError(
                        description:
                            "\(path): permission denied — run vigil trigger as root or as a member of the agent's group (vigil)"
                    )
                }
                continue  // left by an agent that is gone
            }
            setTimeout(fd, seconds: 5)
            let line = "record" + (seconds.map { " " + String($0) } ?? "") + "\n"
            guard send(fd, line) else {
                throw ClientError(description: "\(path): the agent did not take the request: \(errnoText())")
            }
            guard let reply = readLine(fd) else {
                throw ClientError(description: "\(path): the agent did not answer within 5 seconds")
            }
            return reply
        }
        throw ClientError(
            description: tried.isEmpty
                ? "no agent is recording camera \"\(camera)\" here (no socket \(camera).sock in \(directories.joined(separator: ", "))) — is `vigil run` with this configuration running?"
                : "no agent answers at \(tried.joined(separator: ", ")) — is `vigil run` with this configuration running?"
        )
    }

    // MARK: The agent's side

    /// The listening socket and its thread.
    final class Listener: @unchecked Sendable {
        // `@unchecked Sendable`: `fd` and `path` are set once; `stopping` is atomic.
        let path: String
        private let fd: Int32
        private let stopping = Atomic<Bool>(false)
        private let done = Event()

        private init(path: String, fd: Int32) {
            self.path = path
            self.fd = fd
        }

        /// Binds the socket for `camera` in the first directory that takes it; nil (said in the
        /// log) when none does or another agent already answers for this camera.
        static func open(camera: String, directories: [String], log: Logger) -> Listener? {
            var problems: [String] = []
            for directory in directories {
                if access(directory, F_OK) != 0 {
                    guard mkdir(directory, 0o770) == 0 || errno == EEXIST else {
                        problems.append("\(directory): \(errnoText())")
                        continue
                    }
                }
                let path = TriggerSocket.path(directory: directory, camera: camera)
                guard path.utf8.count < MemoryLayout.size(ofValue: sockaddr_un().sun_path) else {
                    problems.append("\(path): longer than a socket's name may be")
                    continue
                }
                let fd = streamSocket()
                guard fd >= 0 else { return nil }
                // One left by an agent that is gone is replaced; one an agent answers on is not.
                if access(path, F_OK) == 0 {
                    let probe = streamSocket()
                    let alive = probe >= 0 && connect(probe, path: path)
                    if probe >= 0 { Glibc.close(probe) }
                    if alive {
                        Glibc.close(fd)
                        log.warning(
                            "another agent takes `vigil trigger` for this camera name; this one will not — give each camera its own camera.name",
                            [("socket", .string(path))])
                        return nil
                    }
                    unlink(path)
                }
                let old = umask(0o117)
                let bound = bind(fd, path: path)
                umask(old)
                guard bound, listen(fd, 8) == 0 else {
                    problems.append("\(path): \(errnoText())")
                    Glibc.close(fd)
                    continue
                }
                return Listener(path: path, fd: fd)
            }
            log.warning(
                "`vigil trigger` will not reach this agent: no directory takes its socket",
                [("tried", .string(problems.joined(separator: "; ")))])
            return nil
        }

        /// Answers requests on a thread of its own until `close`.
        func start(_ control: AgentControl, log: Logger) {
            _ = startThread("trigger") { [self] in
                defer { done.signal() }
                while !stopping.load(ordering: .relaxed) {
                    var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                    guard poll(&poller, 1, 200) > 0 else { continue }
                    let client = accept(fd, nil, nil)
                    guard client >= 0 else { continue }
                    _ = fcntl(client, F_SETFD, FD_CLOEXEC)
                    setTimeout(client, seconds: 2)
                    let reply = answer(readLine(client), control: control, log: log)
                    _ = send(client, reply + "\n")
                    Glibc.close(client)
                }
            }
        }

        private func answer(_ line: String?, control: AgentControl, log: Logger) -> String {
            let words = (line ?? "").split(separator: " ")
            guard words.first == "record", words.count <= 2 else {
                return "error: unknown request \"\(line ?? "")\" — send \"record\" or \"record SECONDS\""
            }
            var seconds = Double(TriggerSocket.defaultSeconds)
            if words.count == 2 {
                guard let s = OutsideTrigger.seconds(words[1]) else {
                    return "error: \"\(words[1])\" is not \(OutsideTrigger.accepted)"
                }
                seconds = s
            }
            control.record(seconds: seconds, by: "vigil trigger")
            return "ok: recording for \(DecimalText.fixed(seconds, 1)) s, then the post-roll"
        }

        /// Stops answering and removes the socket.
        func close() {
            stopping.store(true, ordering: .relaxed)
            done.wait()
            unlink(path)
            Glibc.close(fd)
        }
    }

    /// How long `vigil trigger` records without `--seconds`.
    public static let defaultSeconds = 10

    // MARK: Socket calls

    private static func withAddress<T>(_ path: String, _ body: (UnsafePointer<sockaddr>, socklen_t) -> T) -> T {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            let bytes = Array(path.utf8.prefix(raw.count - 1))
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
    }

    /// A Unix stream socket, closed on exec (a hook never inherits it); -1 when none can be made.
    static func streamSocket() -> Int32 {
        socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    }

    static func connect(_ fd: Int32, path: String) -> Bool {
        withAddress(path) { Glibc.connect(fd, $0, $1) == 0 }
    }

    static func bind(_ fd: Int32, path: String) -> Bool {
        withAddress(path) { Glibc.bind(fd, $0, $1) == 0 }
    }

    static func setTimeout(_ fd: Int32, seconds: Int) {
        var time = timeval(tv_sec: seconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &time, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &time, socklen_t(MemoryLayout<timeval>.size))
    }

    static func send(_ fd: Int32, _ text: String) -> Bool {
        let bytes = Array(text.utf8)
        return bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) == $0.count }
    }

    /// One line (without its newline), at most `lineLimit` bytes; nil on a timeout or nothing.
    static func readLine(_ fd: Int32) -> String? {
        var bytes: [UInt8] = []
        var byte: UInt8 = 0
        while bytes.count < lineLimit {
            let n = recv(fd, &byte, 1, 0)
            if n < 0 && errno == EINTR { continue }
            guard n == 1 else { break }
            if byte == UInt8(ascii: "\n") { return String(decoding: bytes, as: UTF8.self) }
            bytes.append(byte)
        }
        return bytes.isEmpty ? nil : String(decoding: bytes, as: UTF8.self)
    }

    static func errnoText() -> String { String(cString: strerror(errno)) }
}
