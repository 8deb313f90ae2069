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
