import Foundation
import Glibc
import POSIX
import Synchronization
import Testing

/// What Web, MQTT, Upload and `vigil` ask of the operating system, through POSIX alone.
@Suite struct TCPListenerTests {
    @Test func portZeroListensOnAFreePortThatTakesConnections() throws {
        let socket = try TCPListener.listen(address: "127.0.0.1", port: 0, backlog: 4)
        let port = try socket.localPort()
        #expect(port > 0)
        let client = try #require(connectTCP(port: port))
        defer { _ = close(client) }
        var peer = sockaddr()
        var length = socklen_t(MemoryLayout<sockaddr>.size)
        let accepted = accept(socket.rawValue, &peer, &length)
        #expect(accepted >= 0, "the listening socket took no connection")
        _ = close(accepted)
        #expect(fcntl(socket.rawValue, F_GETFD) & FD_CLOEXEC != 0, "a hook must not inherit the web server's socket")
    }

    @Test func aTakenPortIsSaidAsSuch() throws {
        let first = try TCPListener.listen(address: "127.0.0.1", port: 0, backlog: 4)
        let port = try first.localPort()
        do {
            _ = try TCPListener.listen(address: "127.0.0.1", port: port, backlog: 4)
            Issue.record("a second socket listened on a taken port")
        } catch {
            #expect(error.step == .bind(SystemError(EADDRINUSE)))
            #expect(error.error?.isAddressInUse == true)
            #expect(error.description == "cannot listen on 127.0.0.1:\(port): Address already in use (EADDRINUSE)")
        }
    }

    @Test func whatIsNotAnAddressOrAPortIsRefusedBeforeAnyCall() {
        #expect(throws: TCPListener.Failure(endpoint: "camera.local:80", step: .notAnAddress)) {
            _ = try TCPListener.listen(address: "camera.local", port: 80, backlog: 4)
        }
        #expect(throws: TCPListener.Failure(endpoint: "127.0.0.1:70000", step: .notAPort)) {
            _ = try TCPListener.listen(address: "127.0.0.1", port: 70000, backlog: 4)
        }
        #expect(TCPListener.endpoint("::1", 8080) == "[::1]:8080")
    }

    @Test func anIPv6SocketIsIPv6OnlyAndSaysItsPort() throws {
        guard let socket = try? TCPListener.listen(address: "::1", port: 0, backlog: 4) else { return }  // no IPv6 here
        var only: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        #expect(getsockopt(socket.rawValue, Int32(IPPROTO_IPV6), IPV6_V6ONLY, &only, &length) == 0 && only == 1)
        #expect(try socket.localPort() > 0)
    }

    @Test func theAddressOfASocketAddressALibraryHandsOver() {
        var v4 = sockaddr_in()
        v4.sin_family = sa_family_t(AF_INET)
        v4.sin_addr.s_addr = UInt32(0x7F00_0002).bigEndian
        #expect(withUnsafeBytes(of: &v4) { NumericAddress.bytes(ofSocketAddress: $0.baseAddress!) } == [127, 0, 0, 2])
        var v6 = sockaddr_in6()
        v6.sin6_family = sa_family_t(AF_INET6)
        withUnsafeMutableBytes(of: &v6.sin6_addr) { $0[15] = 1 }
        #expect(
            withUnsafeBytes(of: &v6) { NumericAddress.bytes(ofSocketAddress: $0.baseAddress!) }
                == NumericAddress.parse("::1"))
        var unix = sockaddr_un()
        unix.sun_family = sa_family_t(AF_UNIX)
        #expect(withUnsafeBytes(of: &unix) { NumericAddress.bytes(ofSocketAddress: $0.baseAddress!) } == nil)
    }

    @Test func aConnectionShutDownThroughAnUnownedDescriptorEndsForThePeerAndStaysOpen() throws {
        let socket = try TCPListener.listen(address: "127.0.0.1", port: 0, backlog: 4)
        let client = try #require(connectTCP(port: try socket.localPort()))
        defer { _ = close(client) }
        let server = accept(socket.rawValue, nil, nil)
        defer { _ = close(server) }
        try FileDescriptor(unowned: server).shutdownConnection()
        var byte: UInt8 = 0
        #expect(recv(client, &byte, 1, 0) == 0, "the peer did not see the end")
        #expect(fcntl(server, F_GETFD) >= 0, "the descriptor was closed; its owner closes it")
    }

    func connectTCP(port: Int) -> Int32? {
        let fd = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else {
            close(fd)
            return nil
        }
        return fd
    }
}

@Suite struct DescriptorHandOverTests {
    @Test func aDuplicateOutlivesTheOriginalAndAReleasedOneIsNotClosed() throws {
        let path = "/tmp/vigil-posix-test-\(getpid())-dup"
        defer { unlink(path) }
        let original = try FileDescriptor(opening: path, .readWrite, options: [.create, .truncate])
        try original.writeAll(Array("hello".utf8))
        let copy = try original.duplicate()
        #expect(copy.rawValue != original.rawValue)
        #expect(fcntl(copy.rawValue, F_GETFD) & FD_CLOEXEC != 0)
        try original.close()
        #expect(try copy.read(count: 5, at: 0) == Array("hello".utf8))
        let raw = copy.release()
        #expect(fcntl(raw, F_GETFD) >= 0, "released, it must stay open for its new owner")
        #expect(close(raw) == 0)
    }

    @Test func aCStringCopyHoldsTheTextWithItsNul() {
        let copy = CStringCopy("-----BEGIN PRIVATE KEY-----\né")
        #expect(String(cString: copy.pointer) == "-----BEGIN PRIVATE KEY-----\né")
        #expect(strlen(copy.pointer) == 30)
    }
}

@Suite struct DurableReplaceTests {
    static func directory() throws -> String {
        let dir = "/tmp/vigil-replace-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try Paths.makeDirectory(dir)
        return dir
    }

    static func text(_ path: String) -> String? { try? String(contentsOfFile: path, encoding: .utf8) }

    @Test func theFileIsReplacedWholeWithTheModeAskedAndNoTemporaryLeft() throws {
        let dir = try Self.directory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/web-passwords"
        try Paths.replaceFile(path, with: Array("old\n".utf8))
        // A temporary file a crash left behind is no obstacle.
        FileManager.default.createFile(atPath: path + ".new-7", contents: Data("half".utf8))
        try Paths.replaceFile(path, with: Array("new\n".utf8), temporarySuffix: ".new-7", permissions: 0o600)
        #expect(Self.text(path) == "new\n")
        #expect(try Paths.status(path).permissions & 0o777 == 0o600)
        #expect(try Paths.contents(ofDirectory: dir) == ["web-passwords"])
    }

    @Test func aFailureLeavesTheOldFileAndNoTemporaryFile() throws {
        let dir = try Self.directory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/events.jsonl"
        try Paths.replaceFile(path, with: Array("kept\n".utf8))
        // A directory with the file's name cannot be renamed over: the rename, the last step, fails.
        try Paths.makeDirectory(dir + "/latest.jpg")
        #expect(throws: SystemError(EISDIR)) {
            try FileDescriptor(openingDirectory: dir).replaceFile(
                named: "latest.jpg", with: [1, 2, 3], temporary: "latest.jpg.new")
        }
        #expect(try Set(Paths.contents(ofDirectory: dir)) == ["events.jsonl", "latest.jpg"])
        #expect(Self.text(path) == "kept\n")
    }

    @Test func theTemporaryFileIsNeverOpenedThroughALink() throws {
        let dir = try Self.directory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let victim = dir + "/victim"
        try Paths.replaceFile(victim, with: Array("untouched".utf8))
        // Planted after the leftover is removed is not possible here; planted before, it is
        // removed as a leftover and never followed.
        #expect(symlink(victim, dir + "/clip.new") == 0)
        try FileDescriptor(openingDirectory: dir).replaceFile(named: "clip", with: [9], temporary: "clip.new")
        #expect(Self.text(victim) == "untouched")
        #expect(try Paths.status(dir + "/clip").kind == .regular)
    }
}

@Suite struct ThreadSettingsTests {
    /// A field of /proc/thread-self/stat after "pid (comm)": state is field 3, nice field 19.
    static func statField(_ number: Int) throws -> Int {
        let stat = try String(contentsOfFile: "/proc/thread-self/stat", encoding: .utf8)
        let fields = stat[stat.index(after: try #require(stat.lastIndex(of: ")")))...].split(separator: " ")
        return try #require(Int(fields[number - 3]))
    }

    @Test func aLoweredThreadRunsAtNiceTenAndTheOthersDoNot() throws {
        let seen = Mutex<(nice: Int?, error: SystemError?)>((nil, nil))
        startThread("test-lowered") {
            do throws(SystemError) { try ThreadPriority.lowerForThisThread() } catch {
                seen.withLock { $0.error = error }
            }
            let nice = try? ThreadSettingsTests.statField(19)
            seen.withLock { $0.nice = nice }
        }.join()
        let (nice, error) = seen.withLock { $0 }
        #expect(error == nil)
        #expect(nice == 10)
        #expect(try Self.statField(19) != 10, "the calling thread was lowered, not the one that asked")
    }

    @Test func aThreadThatBlocksEverySignalBlocksEveryOne() throws {
        let blocked = Mutex<String?>(nil)
        startThread("test-blocked") {
            Signals.blockAllInThisThread()
            let status = try? String(contentsOfFile: "/proc/thread-self/status", encoding: .utf8)
            blocked.withLock { $0 = status?.split(separator: "\n").first { $0.hasPrefix("SigBlk:") }.map(String.init) }
        }.join()
        let line = try #require(blocked.withLock { $0 })
        // Every signal but the two the kernel never lets be blocked (SIGKILL, SIGSTOP), and the
        // two glibc keeps for itself (32, 33).
        #expect(line.hasSuffix("fffffffe7ffbfeff"), "\(line)")
    }

    @Test func aPipeIsNoTerminalAndIsReadWithTheEchoLeftAlone() {
        var ends: [Int32] = [0, 0]
        #expect(pipe(&ends) == 0)
        defer { ends.forEach { _ = close($0) } }
        #expect(!Terminal.isTerminal(ends[0]))
        #expect(Terminal.withoutEcho(ends[0]) { quiet in quiet } == false)
    }

    @Test func anErrorLeftInErrnoIsReadAndCleared() {
        SystemError.clearCurrent()
        #expect(SystemError.current.code == 0)
        #expect(close(-1) == -1)
        #expect(SystemError.current == SystemError(EBADF))
    }

    @Test func theOpenFileLimitIsTheProcesssSoftLimit() throws {
        let limits = try String(contentsOfFile: "/proc/self/limits", encoding: .utf8)
        let line = try #require(limits.split(separator: "\n").first { $0.hasPrefix("Max open files") })
        let soft = line.split(separator: " ", omittingEmptySubsequences: true)[3]
        #expect(ProcessID.openFileLimit == Int(soft))
    }
}

/// The bench's programs: POSIX's `ChildProcess`, their output kept, in the bench's own group,
/// measured.
@Suite struct MeasuredChildTests {
    @Test func theOutputGoesToAFileAndTheCPUTimeIsCounted() throws {
        let path = "/tmp/vigil-child-output-\(getpid())"
        defer { unlink(path) }
        let child = try ChildProcess.spawn(
            "/bin/sh",
            arguments: [
                "sh", "-c", "echo out; echo err >&2; i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done; exit 4",
            ],
            environment: [], output: .file(path), group: .inherited)
        child.waitUntilEnded()
        #expect(child.hasEnded() == true, "ended, and not reaped yet")
        let (ending, cpu) = child.reapMeasured()
        #expect(ending == .exited(4))
        #expect(cpu.userSeconds + cpu.systemSeconds > 0)
        #expect(try String(contentsOfFile: path, encoding: .utf8) == "out\nerr\n")
        #expect(child.hasEnded() == nil, "reaped: nothing is left to wait for")
    }

    @Test func aProgramStartedInThisGroupIsInThisGroupAndOneOfItsOwnIsNot() throws {
        for (group, same) in [(ChildProcess.ProcessGroup.inherited, true), (.own, false)] {
            let child = try ChildProcess.spawn(
                "/bin/sleep", arguments: ["sleep", "100"], environment: [], group: group)
            let stat = try String(contentsOfFile: "/proc/\(child.pid)/stat", encoding: .utf8)
            let fields = stat[stat.index(after: try #require(stat.lastIndex(of: ")")))...].split(separator: " ")
            #expect((Int32(fields[2]) == getpgrp()) == same, "\(group): process group \(fields[2])")
            child.signal(.kill)
            #expect(child.reap() == .signalled(SIGKILL))
        }
    }
}
