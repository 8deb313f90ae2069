import FoundationEssentials
import Logging
import Media
import POSIX
import Recorder
import Synchronization

/// `vigil trigger`'s way to the running agent: a Unix stream socket named after the camera,
/// `<runtime directory>/<camera.name>.sock`, in the first of `TriggerSocket.directories` that
/// the agent can use. A client writes one line — `record` or `record <seconds>` — and reads
/// one back: `ok: …` (taken), `unavailable: …` (the agent cannot record now: no camera, or too
/// many clients at once) or `error: …` (the request is wrong).
///
/// Beside the socket, `<camera.name>.lock`: the agent holds an exclusive lock on it for its
/// life, taken before anything else at start, so a second agent with the same camera name on
/// this machine — which would share the socket and the MQTT topics — is refused (exit 75),
/// naming the first one's pid, configuration and storage. A socket left by an agent that is
/// gone (its lock let go) is replaced.
///
/// The socket is the agent's user's and group's (mode 0660): root, and members of the agent's
/// group (`vigil` from the package), may trigger it. A directory in a place anyone may write
/// (the `/tmp/vigil-<uid>` fallback) is made with mode 0700 and used — by the agent and by
/// `vigil trigger` — only while it is this user's and closed to everyone else: another local
/// user could otherwise make it first and answer, or catch, the requests.
///
/// One thread serves every client at once (`LineServer`): each has `readDeadline` seconds to
/// send its line, at most `maximumClients` are read at once (one more is answered
/// `unavailable: busy` at once), and stopping does not wait for any of them.
public enum TriggerSocket {
    /// Where the socket may be, in order: `$VIGIL_RUNTIME_DIR`, `/run/vigil` (the units'
    /// `RuntimeDirectory`), `$XDG_RUNTIME_DIR/vigil`, `<temporary>/vigil-<uid>`.
    public static func directories(
        environment: [String: String] = ProcessInfo.processInfo.environment, temporary: String = "/tmp"
    ) -> [String] {
        if let dir = environment["VIGIL_RUNTIME_DIR"], !dir.isEmpty { return [dir] }
        var dirs = ["/run/vigil"]
        if let xdg = environment["XDG_RUNTIME_DIR"], !xdg.isEmpty { dirs.append(xdg + "/vigil") }
        dirs.append(temporary + "/vigil-\(ProcessID.userID)")
        return dirs
    }

    /// The socket's path in `directory`.
    public static func path(directory: String, camera: String) -> String { directory + "/" + camera + ".sock" }

    /// The lock file's name: the camera's, beside its socket.
    static func lockName(camera: String) -> String { camera + ".lock" }

    /// The longest request or reply.
    static let lineLimit = 256
    /// Seconds a client has, from its connection, to send its whole line.
    public static let readDeadline = 2.0
    /// Clients read at once; one more is answered `unavailable: busy` at once.
    public static let maximumClients = 16

    /// Why `directory` must not be used, or nil: it lies in a directory anyone may write to
    /// (`/tmp`), and it is not a directory of this user's closed to everyone else — someone
    /// else could have made it to answer or catch the requests. Nil also when it is not there.
    static func untrusted(_ directory: String) -> String? {
        let parent = directory.withoutLastPathComponent.isEmpty ? "/" : directory.withoutLastPathComponent
        guard let above = try? Paths.status(parent), above.permissions & 0o002 != 0 else { return nil }
        guard let status = try? Paths.status(ofLink: directory) else { return nil }
        let me = ProcessID.userID
        if status.kind != .directory {
            return
                "\(directory) is not a directory (a link or a file someone put there) — remove it; the agent makes the directory itself, with mode 0700"
        }
        if status.owner != me {
            return
                "\(directory) belongs to user id \(status.owner), not to this user (\(me)), in \(parent), where anyone may make it — someone else could answer or catch the requests: remove it; the agent makes it itself, with mode 0700"
        }
        if status.permissions & 0o077 != 0 {
            return
                "\(directory) has mode \(String(status.permissions, radix: 8)), which lets other users in, in \(parent), where anyone may write — chmod 700 it, or remove it and let the agent make it"
        }
        return nil
    }

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
            guard (try? Paths.status(ofLink: path)) != nil else { continue }
            if let problem = untrusted(directory) {
                throw ClientError(description: "not using \(path): \(problem)")
            }
            tried.append(path)
            let socket: FileDescriptor
            do { socket = try LocalSocket.connect(to: path, timeout: 5) } catch {
                if error.isPermissionDenied {
                    throw ClientError(
                        description:
                            "\(path): permission denied — run vigil trigger as root or as a member of the agent's group (vigil)"
                    )
                }
                continue  // left by an agent that is gone
            }
            let line = "record" + (seconds.map { " " + DecimalText.fixed($0, 3) } ?? "") + "\n"
            do { try socket.send(line) } catch {
                throw ClientError(description: "\(path): the agent did not take the request: \(error)")
            }
            guard let reply = try? socket.receiveLine(limit: lineLimit) else {
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

    /// Who holds a camera name's lock, as its lock file says.
    public struct Holder: Sendable, Equatable {
        public var pid: Int32?
        public var config: String?
        public var storage: String?

        /// The lock file's text for this agent.
        var text: String {
            "pid=\(pid.map(String.init) ?? "")\nconfig=\(config ?? "")\nstorage=\(storage ?? "")\n"
        }

        init(pid: Int32?, config: String?, storage: String?) {
            self.pid = pid
            self.config = config
            self.storage = storage
        }

        /// Reads a lock file's text; what it lacks stays nil.
        init(parsing text: String) {
            var fields: [String: String] = [:]
            for line in text.split(separator: "\n") {
                guard let equals = line.firstIndex(of: "=") else { continue }
                let value = String(line[line.index(after: equals)...])
                if !value.isEmpty { fields[String(line[..<equals])] = value }
            }
            self.init(pid: fields["pid"].flatMap { Int32($0) }, config: fields["config"], storage: fields["storage"])
        }
    }

    /// What `claim` found.
    enum Claim: Sendable {
        /// This agent holds the camera name here; the socket goes beside the lock.
        case claimed(Claimed)
        /// Another agent on this machine records a camera of this name.
        case inUse(Holder, lock: String)
        /// No directory could take the lock: the agent runs without `vigil trigger`.
        case nowhere(problems: [String])
    }

    /// The camera name's lock, held for the agent's life, and the directory of its socket.
    final class Claimed: Sendable {
        let directory: String
        let camera: String
        private let lock: LockFile

        init(directory: String, camera: String, lock: LockFile) {
            self.directory = directory
            self.camera = camera
            self.lock = lock
        }

        var lockPath: String { lock.path }
    }

    /// Claims `camera` for this agent on this machine: the lock beside the socket, in the first
    /// of `directories` that takes it (made when missing: mode 0770, or 0700 where anyone may
    /// write; one there that `untrusted` refuses is passed over).
    static func claim(camera: String, directories: [String], holder: Holder) -> Claim {
        var problems: [String] = []
        for directory in directories {
            let parent = directory.withoutLastPathComponent.isEmpty ? "/" : directory.withoutLastPathComponent
            let shared = ((try? Paths.status(parent))?.permissions ?? 0) & 0o002 != 0
            do { try Paths.makeDirectory(directory, permissions: shared ? 0o700 : 0o770) } catch {
                if !error.alreadyExists {
                    problems.append("\(directory): \(error)")
                    continue
                }
            }
            if let problem = untrusted(directory) {
                problems.append(problem)
                continue
            }
            guard path(directory: directory, camera: camera).utf8.count <= LocalSocket.longestPath else {
                problems.append("\(path(directory: directory, camera: camera)): longer than a socket's name may be")
                continue
            }
            do {
                switch try LockFile.claim(lockName(camera: camera), in: directory, writing: holder.text) {
                case .held(let lock):
                    return .claimed(Claimed(directory: directory, camera: camera, lock: lock))
                case .heldElsewhere(let text):
                    return .inUse(Holder(parsing: text), lock: directory + "/" + lockName(camera: camera))
                }
            } catch {
                problems.append("\(directory)/\(lockName(camera: camera)): \(error)")
            }
        }
        return .nowhere(problems: problems)
    }

    /// The listening socket and the thread that serves it.
    final class Listener: Sendable {
        let path: String
        private let server: LineServer
        private let done = Event()

        private init(path: String, server: LineServer) {
            self.path = path
            self.server = server
        }

        /// Binds the socket in the claimed directory, replacing one an agent that is gone left
        /// (this agent holds the lock: no other answers there); nil, said in the log, when it
        /// cannot.
        static func open(_ claimed: Claimed, log: Logger) -> Listener? {
            let path = TriggerSocket.path(directory: claimed.directory, camera: claimed.camera)
            do {
                if (try? Paths.status(ofLink: path)) != nil { try Paths.removeFile(path) }
                let socket = try LocalSocket.listen(at: path, permissions: 0o660)
                let server = try LineServer(
                    listening: socket, maximumClients: TriggerSocket.maximumClients,
                    readDeadline: TriggerSocket.readDeadline, lineLimit: TriggerSocket.lineLimit)
                return Listener(path: path, server: server)
            } catch {
                log.warning(
                    "`vigil trigger` will not reach this agent: its socket cannot be made",
                    [("socket", .string(path)), ("error", .string(error.description))])
                return nil
            }
        }

        /// Answers requests on a thread of its own until `close`: `answer` makes each reply.
        func start(_ answer: @escaping @Sendable (LineServer.Request) -> String) {
            _ = startThread("trigger") { [self] in
                defer { done.signal() }
                server.serve(answer)
            }
        }

        /// Stops answering (at once, whatever the clients do) and removes the socket.
        func close() {
            server.stop()
            done.wait()
            try? Paths.removeFile(path)
        }
    }

    /// The reply to `request`: an outside recording asked of `control` — refused while
    /// `noCamera` says why the camera delivers nothing — or what is wrong with the request.
    /// Each refusal for want of a camera is logged.
    static func answer(
        _ request: LineServer.Request, control: AgentControl, noCamera: () -> String?, log: Logger
    ) -> String {
        let line: String
        switch request {
        case .line(let text): line = text
        case .silent:
            return
                "error: no request line within \(DecimalText.fixed(readDeadline, 0)) s — send \"record\" or \"record SECONDS\" and a newline"
        case .tooLong:
            return "error: the request is longer than \(lineLimit) bytes — send \"record\" or \"record SECONDS\""
        case .busy:
            return
                "unavailable: busy — \(maximumClients) requests are being read already; try again in a few seconds"
        }
        let words = line.split(separator: " ")
        guard words.first == "record", words.count <= 2 else {
            return "error: unknown request \"\(line)\" — send \"record\" or \"record SECONDS\""
        }
        let seconds: Double
        switch OutsideRequest.seconds(words.count == 2 ? words[1] : nil) {
        case .success(let asked): seconds = asked
        case .failure(let error): return "error: \(error)"
        }
        if let problem = noCamera() {
            log.warning(
                "outside trigger refused: no camera",
                [("asked_by", .string("vigil trigger")), ("reason", .string(problem))])
            return "unavailable: no camera: \(problem)"
        }
        control.ask(.record(seconds: seconds), by: "vigil trigger")
        return "ok: recording for \(DecimalText.fixed(seconds, 1)) s, then the post-roll"
    }
}
