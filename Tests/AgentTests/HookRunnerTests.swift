import Foundation
import Logging
import POSIX
import TestSupport
import Testing

@testable import Agent

/// `HookRunner` on its own, with real programs: the limit of running hooks is per kind, a
/// skipped hook is logged with its event, and `drain` leaves no hook running.
@Suite struct HookRunnerTests {
    static func event(_ kind: HookKind, _ n: Int) -> HookEvent {
        HookEvent(kind: kind, file: "2026-01-01/yard-\(n).mov", camera: "yard")
    }

    @Test func eachKindHasItsOwnLimitAndDrainKillsWhatIsLeft() throws {
        let dir = try TemporaryDirectory("vigil-hook-runner")
        defer { dir.remove() }
        let pids = dir.file("pids")
        let hung = try writeScript("trap '' TERM\necho $$ >> \(pids)\nsleep 60\n", named: "hung.sh", in: dir)
        let ran = dir.file("ran")
        let quick = try writeScript("echo \"$VIGIL_FILE\" > \(ran)\n", named: "quick.sh", in: dir)
        defer {
            for group in processIDs(inFile: pids) where !livingProcesses(inGroup: group).isEmpty {
                kill(-group, SIGKILL)
            }
        }
        let logs = MemoryLogSink()
        let runner = HookRunner(timeout: 600, log: Logger(level: .debug, sink: logs), clock: .monotonic)

        for n in 1...HookRunner.maxRunningPerKind {
            runner.run(hung, for: Self.event(.clipSaved, n), arguments: [], facts: [])
        }
        // Four clip_saved hooks hang: an event_start hook still runs.
        runner.run(quick, for: Self.event(.eventStart, 9), arguments: [], facts: [("file", "started")])
        let deadline = Date().addingTimeInterval(30)
        while !FileManager.default.fileExists(atPath: ran) && Date() < deadline { usleep(10_000) }
        #expect(FileManager.default.fileExists(atPath: ran), "the event_start hook did not run")
        // A fifth clip_saved is skipped, and the log says for which clip.
        runner.run(hung, for: Self.event(.clipSaved, 5), arguments: [], facts: [])
        let skipped = logLines(logs.written.joined(separator: "\n"), "hook skipped: too many still running")
        #expect(skipped.count == 1)
        let line = skipped.first ?? ""
        #expect(logValue(line, "event") == "clip_saved" && logValue(line, "hook") == hung, "\(line)")
        #expect(logValue(line, "file") == "2026-01-01/yard-5.mov" && logValue(line, "camera") == "yard", "\(line)")

        // Wait for the four to have started (they write their ids), then stop.
        while processIDs(inFile: pids).count < HookRunner.maxRunningPerKind && Date() < deadline { usleep(10_000) }
        runner.drain(seconds: 0.2)
        #expect(runner.runningCount == 0)
        let output = logs.written.joined(separator: "\n")
        let killed = logLines(output, "hook killed: the agent stopped")
        #expect(killed.count == HookRunner.maxRunningPerKind, "\(output)")
        #expect(
            Set(killed.compactMap { logValue($0, "file") })
                == Set((1...HookRunner.maxRunningPerKind).map { "2026-01-01/yard-\($0).mov" }), "\(output)")
        #expect(killed.allSatisfy { logValue($0, "event") == "clip_saved" && logValue($0, "camera") == "yard" })
        for group in processIDs(inFile: pids) {
            #expect(!FileManager.default.fileExists(atPath: "/proc/\(group)/stat"), "hook \(group) was not reaped")
            #expect(waitForProcessGroupToEnd(group, timeout: 2).isEmpty, "hook \(group) outlived the drain")
        }
    }

    /// Once the agent's stop has drained the hooks, a hook asked for later (an upload verified
    /// meanwhile) is not started: nothing would be left to stop it.
    @Test func noHookStartsAfterTheDrain() throws {
        let dir = try TemporaryDirectory("vigil-hook-runner-closed")
        defer { dir.remove() }
        let ran = dir.file("ran")
        let quick = try writeScript("echo ran > \(ran)\n", named: "quick.sh", in: dir)
        let logs = MemoryLogSink()
        let runner = HookRunner(timeout: 600, log: Logger(level: .debug, sink: logs), clock: .monotonic)
        runner.drain(seconds: 0)
        runner.run(quick, for: Self.event(.upload, 1), arguments: [], facts: [])
        #expect(runner.runningCount == 0)
        // Had it started, a second drain would wait for it to end (it writes its file at once).
        runner.drain(seconds: 5)
        #expect(!FileManager.default.fileExists(atPath: ran), "a hook ran after the drain")
        let said = logLines(logs.written.joined(separator: "\n"), "hook not run: the agent is stopping")
        #expect(said.count == 1 && logValue(said.first ?? "", "event") == "upload", "\(logs.written)")
    }
}
