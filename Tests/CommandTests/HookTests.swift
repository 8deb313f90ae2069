import Foundation
import Recorder
import TestSupport
import Testing

/// Hooks, run by `vigil run` as a user runs it: children that end with the agent, and a limit
/// of hooks running at once for each kind, so hung hooks of one kind never stop the other.
@Suite struct HookTests {
    /// A hook that ignores SIGTERM and sleeps (`trap '' TERM; sleep 60`).
    static func stubbornHook(in dir: TemporaryDirectory, recordingPIDsIn pids: String) throws -> String {
        try writeScript("trap '' TERM\necho $$ >> \(pids)\nsleep 60\n", named: "stubborn.sh", in: dir)
    }

    /// Kills what a failed test left of the hooks whose ids are in `pids` (their own groups).
    static func killLeftovers(_ pids: String) {
        for group in processIDs(inFile: pids) where !livingProcesses(inGroup: group).isEmpty {
            kill(-group, SIGKILL)
        }
    }

    /// A hook still running when the agent ends (its timeout far off), which ignores SIGTERM:
    /// the agent sends its process group SIGTERM, then SIGKILL, and logs it with its event;
    /// once `vigil run` has exited, nothing of the hook is left.
    @Test func aHookStillRunningWhenTheAgentExitsIsKilled() throws {
        let (dir, footage) = try AgentTests.directory("vigil-hooks", footage: 6, objects: [AgentTests.object(1, 3)])
        defer { dir.remove() }
        let pids = dir.file("pids")
        defer { Self.killLeftovers(pids) }
        let hook = try Self.stubbornHook(in: dir, recordingPIDsIn: pids)
        let config = try AgentTests.config(
            dir, footage: footage, extra: "hooks = { on_clip_saved = \"\(hook)\"; timeout = 600.0; };")

        let agent = try AgentProcess(config: config)
        #expect(agent.waitForExit(timeout: 120) == 0, "\(agent.output)")
        let hooks = processIDs(inFile: pids)
        try #require(hooks.count == 1, "\(agent.output)")
        // The hook itself, the agent's child, was reaped before the agent exited; the sleep it
        // started had SIGKILL before then too, and is gone a moment later.
        #expect(!FileManager.default.fileExists(atPath: "/proc/\(hooks[0])/stat"), "the hook outlived the agent")
        #expect(waitForProcessGroupToEnd(hooks[0], timeout: 2).isEmpty, "the hook's processes outlived the agent")

        let record = try #require(try EventsJournal(directory: dir.file("clips")).records().records.first)
        let killed = logLines(agent.output, "hook killed: the agent stopped")
        #expect(killed.count == 1, "\(agent.output)")
        let line = killed.first ?? ""
        #expect(logValue(line, "hook") == hook && logValue(line, "event") == "clip_saved", "\(line)")
        #expect(logValue(line, "file") == record.file && logValue(line, "camera") == "yard", "\(line)")
        #expect(logLines(agent.output, "vigil stopped").count == 1)
    }

    /// A hook that starts `sleep 100 &` and exits at once: what it left running ends with it
    /// (its process group is killed when it exits), while the agent goes on recording — it
    /// does not linger until the agent stops, nor outlive it.
    @Test func whatAHookLeavesRunningEndsWithIt() throws {
        let (dir, footage) = try AgentTests.directory("vigil-hooks", footage: 20, objects: [AgentTests.object(1, 3)])
        defer { dir.remove() }
        let pids = dir.file("pids")
        let hook = try writeScript("sleep 100 &\necho $! >> \(pids)\nexit 0\n", named: "background.sh", in: dir)
        defer {
            for pid in processIDs(inFile: pids) { kill(pid, SIGKILL) }
        }
        let config = try AgentTests.config(
            dir, footage: footage, extra: "hooks = { on_event_start = \"\(hook)\"; timeout = 600.0; };", realtime: true)

        let agent = try AgentProcess(config: config)
        defer { agent.kill(SIGKILL) }
        var leftover: [Int32] = []
        let started = Date()
        while leftover.isEmpty && Date().timeIntervalSince(started) < 120 && agent.isRunning {
            leftover = processIDs(inFile: pids)
            usleep(20_000)
        }
        let sleeper = try #require(leftover.first, "the hook did not run:\n\(agent.output)")
        var gone = false
        while !gone && Date().timeIntervalSince(started) < 120 && agent.isRunning {
            gone =
                !FileManager.default.fileExists(atPath: "/proc/\(sleeper)/stat")
                || (try? String(contentsOfFile: "/proc/\(sleeper)/stat", encoding: .utf8))?.contains(") Z ") == true
            if !gone { usleep(20_000) }
        }
        #expect(gone, "the hook's `sleep 100 &` outlived the hook, the agent still running:\n\(agent.output)")
        #expect(agent.waitForExit(timeout: 120) == 0, "\(agent.output)")
        #expect(!FileManager.default.fileExists(atPath: "/proc/\(sleeper)/stat"), "it outlived the agent")
        #expect(logLines(agent.output, "hook killed: the agent stopped").isEmpty, "\(agent.output)")
    }

    /// Four `on_clip_saved` hooks that hang (the limit for that kind) do not keep the
    /// `on_event_start` hook of the next event from running; the fifth `on_clip_saved` is
    /// skipped, and the log says for which clip. The hung ones end with the agent.
    @Test func hungClipSavedHooksDoNotStopEventStartHooks() throws {
        let objects = [1.0, 6, 11, 16, 21].map { AgentTests.object($0, $0 + 1) }
        let (dir, footage) = try AgentTests.directory("vigil-hooks", footage: 25, objects: objects)
        defer { dir.remove() }
        let pids = dir.file("pids")
        defer { Self.killLeftovers(pids) }
        let saved = try Self.stubbornHook(in: dir, recordingPIDsIn: pids)
        let starts = dir.file("starts")
        let started = try writeScript("echo \"$VIGIL_FILE\" >> \(starts)\n", named: "started.sh", in: dir)
        let config = try AgentTests.config(
            dir, footage: footage,
            extra: "hooks = { on_event_start = \"\(started)\"; on_clip_saved = \"\(saved)\"; timeout = 600.0; };")

        let agent = try AgentProcess(config: config)
        #expect(agent.waitForExit(timeout: 120) == 0, "\(agent.output)")
        let records = try EventsJournal(directory: dir.file("clips")).records().records
        try #require(records.count == 5, "\(agent.output)")

        // Every event's start hook ran, the fifth too, with four clip_saved hooks hung.
        let startLines = ((try? String(contentsOfFile: starts, encoding: .utf8)) ?? "").split(separator: "\n")
        #expect(startLines.count == 5, "\(startLines)\n\(agent.output)")
        let skipped = logLines(agent.output, "hook skipped: too many still running")
        #expect(skipped.count == 1, "\(agent.output)")
        let line = skipped.first ?? ""
        #expect(logValue(line, "event") == "clip_saved" && logValue(line, "hook") == saved, "\(line)")
        #expect(logValue(line, "file") == records[4].file && logValue(line, "camera") == "yard", "\(line)")

        // The four hung hooks were killed as the agent stopped, and are gone.
        #expect(logLines(agent.output, "hook killed: the agent stopped").count == 4, "\(agent.output)")
        let hooks = processIDs(inFile: pids)
        #expect(hooks.count == 4)
        for group in hooks {
            #expect(waitForProcessGroupToEnd(group, timeout: 2).isEmpty, "hook \(group) outlived the agent")
        }
    }
}
