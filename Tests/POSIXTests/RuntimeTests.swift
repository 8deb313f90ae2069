import Foundation
import Glibc
import Media
import POSIX
import Synchronization
import Testing

/// What the agent's threads wait on. No test measures a duration: a wait that must end early
/// is given far longer (an hour) than any busy host needs, so only a broken token blocks it.
@Suite struct StopTokenTests {
    static let hour = 3600.0

    @Test func aStopEndsAWaitInProgressAndEveryLaterOne() {
        let token = StopToken()
        let ended = Mutex(false)
        let thread = startThread("test-waiter") {
            let stopped = token.wait(seconds: StopTokenTests.hour)
            ended.withLock { $0 = stopped }
        }
        token.stop()
        thread.join()
        #expect(ended.withLock { $0 })
        #expect(token.wait(seconds: StopTokenTests.hour), "a stop is for good")
        #expect(token.isStopped)
    }

    @Test func aRingEndsOneWaitWithoutStopping() {
        let token = StopToken()
        token.ring()  // before the wait: the wait still sees it
        #expect(token.wait(seconds: StopTokenTests.hour) == false)
        #expect(token.wait(seconds: 0.01) == false, "the ring was used up: this wait times out")
        #expect(!token.isStopped)
    }

    @Test func anEventIsWaitedForOnceAndForAll() {
        let event = Event()
        #expect(event.wait(seconds: 0.01) == false)
        #expect(!event.isSignalled)
        let thread = startThread("test-signaller") { event.signal() }
        #expect(event.wait(seconds: StopTokenTests.hour))
        thread.join()
        #expect(event.isSignalled)
    }
}

@Suite struct ChildProcessTests {
    @Test func theExitStatusAndTheSignalThatEndedIt() throws {
        let ok = try ChildProcess.spawn("/bin/sh", arguments: ["sh", "-c", "exit 3"], environment: [])
        #expect(ok.reap() == .exited(3))
        let killed = try ChildProcess.spawn("/bin/sh", arguments: ["sh", "-c", "kill -9 $$"], environment: [])
        #expect(killed.reap() == .signalled(SIGKILL))
    }

    @Test func theEnvironmentIsTheOneGivenAndNothingElse() throws {
        let child = try ChildProcess.spawn(
            "/bin/sh", arguments: ["sh", "-c", #"[ "$VIGIL_X" = yes ] && [ -z "$HOME" ] || exit 1"#],
            environment: ["VIGIL_X=yes"])
        #expect(child.reap() == .exited(0))
    }

    @Test func aProgramThatIsNotThereIsSaidByName() {
        #expect {
            _ = try ChildProcess.spawn("/nonexistent/hook", arguments: ["hook"], environment: [])
        } throws: { error in
            "\(error)".contains("/nonexistent/hook") && "\(error)".contains("No such file")
        }
    }

    /// The group goes with the program: what it left running in the background is killed too.
    @Test func killingTheGroupKillsWhatItStarted() throws {
        let pidFile = NSTemporaryDirectory() + "vigil-child-\(UUID().uuidString).pid"
        defer { try? FileManager.default.removeItem(atPath: pidFile) }
        let child = try ChildProcess.spawn(
            "/bin/sh", arguments: ["sh", "-c", "sleep 1000 & echo $! > \(pidFile); wait"], environment: [])
        var background: Int32?
        let deadline = Date().addingTimeInterval(60)
        while background == nil && Date() < deadline {
            background = (try? String(contentsOfFile: pidFile, encoding: .utf8))
                .flatMap { Int32($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
            if background == nil { usleep(10_000) }
        }
        let sleeper = try #require(background)
        #expect(child.hasEnded() == false)
        child.signalGroup(.kill)
        #expect(child.reap() == .signalled(SIGKILL))
        // The background sleep was in the same group: it is gone (or a zombie of init's).
        var gone = false
        while !gone && Date() < deadline {
            let state = (try? String(contentsOfFile: "/proc/\(sleeper)/stat", encoding: .utf8))
            gone = state == nil || state!.split(separator: " ")[2] == "Z"
            if !gone { usleep(10_000) }
        }
        #expect(gone, "the hook's background process outlived its group")
        #expect(child.hasEnded() == nil, "reaped: nothing left to wait for")
    }
}

@Suite struct CalendarTimeTests {
    static func fields(_ t: LocalTime) -> [Int] { [t.year, t.month, t.day, t.hour, t.minute, t.second, t.utcOffset] }

    @Test func utcFieldsOfAKnownMoment() {
        // 2026-12-03T14:11:21Z; the fraction is dropped.
        #expect(Self.fields(CalendarTime.utc(secondsSince1970: 1_796_307_081.75)) == [2026, 12, 3, 14, 11, 21, 0])
    }

    @Test func localTimeIsUTCPlusItsOffset() {
        let moment = 1_796_307_081.0
        let local = Self.fields(SystemTimeZone().localTime(secondsSince1970: moment))
        let shifted = Self.fields(CalendarTime.utc(secondsSince1970: moment + Double(local[6])))
        #expect(local.prefix(6) == shifted.prefix(6))
    }
}

@Suite struct DatagramTests {
    /// What sd_notify sends arrives whole, at a path and at an abstract name ("@…").
    @Test func aDatagramArrivesWholeAtAPathAndAnAbstractName() throws {
        for abstract in [false, true] {
            let name =
                abstract
                ? "@vigil-test-\(UUID().uuidString)" : NSTemporaryDirectory() + "vigil-\(UUID().uuidString).sock"
            let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
            try #require(fd >= 0)
            defer {
                close(fd)
                if !abstract { unlink(name) }
            }
            var address = sockaddr_un()
            address.sun_family = sa_family_t(AF_UNIX)
            var bytes = Array(name.utf8)
            if abstract { bytes[0] = 0 }
            withUnsafeMutableBytes(of: &address.sun_path) { raw in
                for (i, b) in bytes.enumerated() { raw[i] = b }
            }
            let length = socklen_t(MemoryLayout<sa_family_t>.size + bytes.count)
            let bound = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) }
            }
            try #require(bound == 0)
            try LocalSocket.sendDatagram("READY=1\nSTATUS=recording", to: name)
            var buffer = [UInt8](repeating: 0, count: 256)
            let n = recv(fd, &buffer, buffer.count, 0)
            #expect(String(decoding: buffer.prefix(max(n, 0)), as: UTF8.self) == "READY=1\nSTATUS=recording")
        }
    }

    @Test func theNotifierSaysNothingWithoutASocket() {
        let notifier = SystemdNotifier(environment: [:])
        #expect(!notifier.isActive && notifier.watchdogInterval == nil)
        notifier.ready(status: "nowhere")  // no socket: nothing happens
        let watched = SystemdNotifier(environment: ["NOTIFY_SOCKET": "/run/x", "WATCHDOG_USEC": "10000000"])
        #expect(watched.isActive && watched.watchdogInterval == 5)
    }
}
