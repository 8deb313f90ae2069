import Foundation
import Glibc
import POSIX
import Synchronization
import Testing

@Suite struct RetryOnInterruptTests {
    @Test func aCallInterruptedTwiceIsCalledAThirdTime() throws {
        var calls = 0
        let result = try retryOnInterrupt { () -> Int32 in
            calls += 1
            if calls <= 2 {
                errno = EINTR
                return -1
            }
            return 7
        }
        #expect(result == 7)
        #expect(calls == 3)
    }

    @Test func anotherErrorIsThrownAtOnce() {
        var calls = 0
        #expect(throws: SystemError(EIO)) {
            try retryOnInterrupt { () -> Int in
                calls += 1
                errno = EIO
                return -1
            }
        }
        #expect(calls == 1)
    }

    /// ALSA's convention: a negative result is the error number negated, anything else a result.
    @Test func negatedErrorNumbers() throws {
        var calls = 0
        let frames = try retryOnInterrupt(.negatedErrorNumber) { () -> Int in
            calls += 1
            return calls <= 2 ? -Int(EINTR) : 480
        }
        #expect(frames == 480 && calls == 3)
        #expect(throws: SystemError(EPIPE)) { try retryOnInterrupt(.negatedErrorNumber) { -Int32(EPIPE) } }
    }

    /// clock_nanosleep's and pthread's convention: zero, or the error number.
    @Test func returnedErrorNumbers() throws {
        var calls = 0
        try retryOnInterrupt(.errorNumber) { () -> Int32 in
            calls += 1
            return calls <= 2 ? EINTR : 0
        }
        #expect(calls == 3)
        #expect(throws: SystemError(EINVAL)) { try retryOnInterrupt(.errorNumber) { EINVAL } }
    }
}

@Suite struct SystemErrorTests {
    @Test func wordsAndName() {
        #expect(SystemError(ENODEV).description == "No such device (ENODEV)")
        #expect(SystemError(EISDIR).text == "Is a directory")
        #expect(SystemError(EISDIR).name == nil)
        #expect(SystemError(EISDIR).description == "Is a directory")
        #expect(SystemError(ENOSPC).isOutOfSpace && SystemError(EDQUOT).isOutOfSpace && !SystemError(EIO).isOutOfSpace)
    }
}

/// How often each test's closing function ran (a C function pointer captures nothing).
private let explicitCloses = Atomic<Int>(0)
private let deinitCloses = Atomic<Int>(0)
private let failingCloses = Atomic<Int>(0)

@Suite struct FileDescriptorTests {
    /// A descriptor of its own (of /dev/null), to hand to `FileDescriptor(adopting:closingWith:)`.
    func rawDescriptor() -> Int32 {
        let fd = open("/dev/null", O_RDONLY | O_CLOEXEC)
        precondition(fd >= 0)
        return fd
    }

    @Test func anExplicitCloseClosesOnce() throws {
        let descriptor = FileDescriptor(
            adopting: rawDescriptor(),
            closingWith: { fd in
                explicitCloses.add(1, ordering: .relaxed)
                return close(fd)
            })
        try descriptor.close()
        #expect(explicitCloses.load(ordering: .relaxed) == 1)  // and not again when it went away
    }

    @Test func goingAwayClosesOnce() {
        do {
            let descriptor = FileDescriptor(
                adopting: rawDescriptor(),
                closingWith: { fd in
                    deinitCloses.add(1, ordering: .relaxed)
                    return close(fd)
                })
            #expect(descriptor.rawValue >= 0)
        }
        #expect(deinitCloses.load(ordering: .relaxed) == 1)
    }

    @Test func aFailedCloseIsReportedOnce() {
        let raw = rawDescriptor()
        defer { _ = close(raw) }
        let descriptor = FileDescriptor(
            adopting: raw,
            closingWith: { _ in
                failingCloses.add(1, ordering: .relaxed)
                errno = EIO
                return -1
            })
        do {
            try descriptor.close()
            Issue.record("the failed close was not reported")
        } catch {
            #expect(error == SystemError(EIO))
        }
        #expect(failingCloses.load(ordering: .relaxed) == 1)
    }

    @Test func anUnownedDescriptorIsNotClosed() throws {
        let raw = rawDescriptor()
        defer { _ = close(raw) }
        try FileDescriptor(unowned: raw).close()
        #expect(fcntl(raw, F_GETFD) >= 0)
    }

    @Test func writesReadsAndTruncates() throws {
        let path = "/tmp/vigil-posix-test-\(getpid())-rw"
        defer { unlink(path) }
        let file = try FileDescriptor(
            opening: path, .readWrite, options: [.create, .truncate, .exclusive], permissions: 0o600)
        try file.writeAll(Array(0..<10))
        try file.writeAll([0xAA, 0xBB], at: 2)
        try file.writeAll("xyz")
        try file.synchronize()
        let status = try file.status()
        #expect(status.size == 13 && !status.isDirectory)
        #expect(try file.read(count: 5, at: 0) == [0, 1, 0xAA, 0xBB, 4])
        try file.truncate(to: 4)
        #expect(try file.status().size == 4)
        try file.close()
        #expect(throws: SystemError(EEXIST)) {
            _ = try FileDescriptor(opening: path, .writeOnly, options: [.create, .exclusive])
        }
    }

    @Test func readingAtTheEndOfTheFile() throws {
        let path = "/tmp/vigil-posix-test-\(getpid())-end"
        defer { unlink(path) }
        let writer = try FileDescriptor(opening: path, .writeOnly, options: [.create, .truncate])
        try writer.writeAll(Array(repeating: 7, count: 10))
        try writer.close()

        let file = try FileDescriptor(opening: path, .readOnly)
        #expect(try file.read(count: 100, at: 4) == Array(repeating: 7, count: 6))
        #expect(try file.read(count: 10, at: 10) == [])
        #expect(try file.read(count: 10, at: 1000) == [])
        var buffer = [UInt8](repeating: 0, count: 16)
        let first = try buffer.withUnsafeMutableBytes { try file.readFully(into: $0) }
        let second = try buffer.withUnsafeMutableBytes { try file.read(into: $0) }
        #expect(first == 10 && second == 0)
    }

    @Test func aFullDiskIsENOSPC() throws {
        let full = try FileDescriptor(opening: "/dev/full", .writeOnly)
        #expect(throws: SystemError(ENOSPC)) { try full.writeAll([1, 2, 3]) }
        do {
            try full.writeAll("text")
            Issue.record("a write to /dev/full succeeded")
        } catch {
            #expect(error.isOutOfSpace)
            #expect(error.description == "No space left on device (ENOSPC)")
        }
    }

    @Test func openingErrors() throws {
        #expect(throws: SystemError(ENOENT)) { _ = try FileDescriptor(opening: "/nonexistent/file", .readOnly) }
        #expect(throws: SystemError(EISDIR)) { _ = try FileDescriptor(opening: "/tmp", .readWrite) }
        let directory = try FileDescriptor(opening: "/tmp", .readOnly)
        #expect(try directory.status().isDirectory)
    }

    @Test func descriptorsAreCloseOnExec() throws {
        let file = try FileDescriptor(opening: "/dev/null", .readOnly)
        #expect(fcntl(file.rawValue, F_GETFD) & FD_CLOEXEC != 0)
    }
}

/// `LineServer`, the trigger socket's server: every client is read at once, so one that says
/// nothing, or drips a byte at a time, holds up neither another client nor the stop.
@Suite struct LineServerTests {
    /// A connected client of the socket at `path`.
    final class Client {
        let fd: FileDescriptor
        init(_ path: String) throws { fd = try LocalSocket.connect(to: path, timeout: 30) }
        /// True when the server said something or let go (data or the end is waiting).
        var heardFrom: Bool {
            var entry = pollfd(fd: fd.rawValue, events: Int16(POLLIN), revents: 0)
            return poll(&entry, 1, 0) > 0
        }
        func line() -> String? { try? fd.receiveLine(limit: 512) }
    }

    final class Running: Sendable {
        let server: LineServer
        let path: String
        let requests = Mutex<[LineServer.Request]>([])
        let returned = Atomic<Bool>(false)

        init(deadline: Double, maximumClients: Int = 16) throws {
            path = "/tmp/vigil-line-server-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).sock"
            server = try LineServer(
                listening: try LocalSocket.listen(at: path, permissions: 0o600), maximumClients: maximumClients,
                readDeadline: deadline, lineLimit: 16)
            Thread.detachNewThread { [self] in
                server.serve { request in
                    requests.withLock { $0.append(request) }
                    if case .line(let text) = request { return "ok \(text)" }
                    return "no \(request)"
                }
                returned.store(true, ordering: .relaxed)
            }
        }

        func stop() {
            server.stop()
            while !returned.load(ordering: .relaxed) { usleep(1000) }
            unlink(path)
        }
    }

    /// With a deadline far off (60 s), six silent clients and one that has sent half a line are
    /// all still connected, unanswered, when a seventh's request is answered; so are they when
    /// `stop` returns, and only then are they let go.
    @Test func aRequestIsAnsweredWhileSilentClientsWait() throws {
        let running = try Running(deadline: 60)
        let silent = try (0..<6).map { _ in try Client(running.path) }
        let slow = try Client(running.path)
        try slow.fd.send("rec")
        let doorbell = try Client(running.path)
        try doorbell.fd.send("record 2\n")
        #expect(doorbell.line() == "ok record 2")
        #expect(!silent.contains { $0.heardFrom } && !slow.heardFrom, "answered before its deadline")
        try slow.fd.send("ord 5\n")
        #expect(slow.line() == "ok record 5")
        #expect(!silent.contains { $0.heardFrom })
        running.stop()
        #expect(running.requests.withLock { $0 } == [.line("record 2"), .line("record 5")])
        for client in silent { #expect(client.line() == nil, "let go when the server stops") }
    }

    /// A client past its deadline is answered `.silent`; a line over the limit `.tooLong`; a
    /// client that shuts its side after a line without a newline has that line taken.
    @Test func silentTooLongAndUnendedRequests() throws {
        let hurried = try Running(deadline: 0.3)
        defer { hurried.stop() }
        let quiet = try Client(hurried.path)
        #expect(quiet.line() == "no silent")
        let running = try Running(deadline: 60)
        defer { running.stop() }
        let long = try Client(running.path)
        try long.fd.send(String(repeating: "x", count: 40))
        #expect(long.line() == "no tooLong")
        let unended = try Client(running.path)
        try unended.fd.send("record")
        shutdown(unended.fd.rawValue, Int32(SHUT_WR))
        #expect(unended.line() == "ok record")
    }

    /// One client more than `maximumClients` is answered `.busy` at once, while the others are
    /// connected and unanswered; once one of them is done, a new client is read again.
    @Test func oneClientTooManyIsToldBusyAtOnce() throws {
        let running = try Running(deadline: 60, maximumClients: 3)
        defer { running.stop() }
        let first = try (0..<3).map { _ in try Client(running.path) }
        let extra = try Client(running.path)
        #expect(extra.line() == "no busy")
        #expect(!first.contains { $0.heardFrom })
        try first[0].fd.send("a\n")
        #expect(first[0].line() == "ok a")
        let next = try Client(running.path)
        try next.fd.send("b\n")
        #expect(next.line() == "ok b")
    }
}

/// `LocalSocket.listen` gives the socket exactly the mode asked for, and never touches the
/// process's umask, which every thread shares: a clip created or a hook started while the
/// trigger socket is made would take a narrowed umask with it (a CI run here saw the runtime
/// directory a spawned agent made come out 0600 instead of 0700).
@Suite struct LocalSocketModeTests {
    /// The process's umask as the kernel reports it, read without setting it.
    static func umaskNow() throws -> String {
        let status = try String(contentsOfFile: "/proc/self/status", encoding: .utf8)
        return try #require(status.split(separator: "\n").first { $0.hasPrefix("Umask:") }).description
    }

    @Test func theModeIsAsAskedAndTheUmaskIsNeverChanged() throws {
        let before = try Self.umaskNow()
        final class Watch: Sendable {
            let seen = Mutex<Set<String>>([])
            let done = Atomic<Bool>(false)
            let finished = Atomic<Bool>(false)
        }
        let watch = Watch()
        Thread.detachNewThread {
            while !watch.done.load(ordering: .relaxed) {
                if let now = try? LocalSocketModeTests.umaskNow() { watch.seen.withLock { _ = $0.insert(now) } }
            }
            watch.finished.store(true, ordering: .relaxed)
        }
        for (n, permissions) in zip(0..<200, [0o600, 0o660, 0o640].cycled) {
            let path = "/tmp/vigil-socket-mode-\(getpid())-\(n).sock"
            let socket = try LocalSocket.listen(at: path, permissions: UInt32(permissions))
            defer { unlink(path) }
            var info = stat()
            #expect(stat(path, &info) == 0)
            #expect(Int(info.st_mode) & 0o777 == permissions, "\(path): \(String(Int(info.st_mode) & 0o777, radix: 8))")
            _ = socket
        }
        watch.done.store(true, ordering: .relaxed)
        while !watch.finished.load(ordering: .relaxed) { usleep(1000) }
        #expect(try Self.umaskNow() == before)
        let seen = watch.seen.withLock { $0 }
        #expect(seen.subtracting([before]).isEmpty, "the umask changed: \(seen)")
    }
}

extension Array {
    /// The elements over and over.
    fileprivate var cycled: UnfoldSequence<Element, Int> {
        sequence(state: 0) { index in
            defer { index = (index + 1) % count }
            return self[index]
        }
    }
}
