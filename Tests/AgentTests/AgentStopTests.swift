import AgentTestSupport
import Capture
import Foundation
import POSIX
import Synchronization
import TestSupport
import Testing

@testable import Agent

/// The stop's last step: the sinks finish side by side, each on a thread of its own, so that
/// one stuck on the network (a broker, an upload server, viewers, a hook) costs the others
/// nothing and the stop stays short however many are stuck.
@Suite struct AgentStopTests {
    /// Sinks that, when told to finish, wait for every one of them to have been told: finished
    /// one after the other, the first waits in vain.
    final class Meeting: Sendable {
        let names: [String]
        let told = Mutex<Set<String>>([])
        /// Signalled when the last of them is told.
        let everyoneTold = Event()
        let sawEveryone = Mutex<[String: Bool]>([:])
        /// Made when the first sink is told to finish (what the hook looks for).
        let marker: String

        init(names: [String], marker: String) {
            self.names = names
            self.marker = marker
        }

        func sink(_ name: String) -> any EventSink { Member(meeting: self, name: name) }

        struct Member: EventSink {
            let meeting: Meeting
            let name: String
            func handle(_ event: AgentEvent) {}
            func finish() {
                FileManager.default.createFile(atPath: meeting.marker, contents: Data())
                let count = meeting.told.withLock {
                    $0.insert(name)
                    return $0.count
                }
                if count == meeting.names.count { meeting.everyoneTold.signal() }
                let all = meeting.everyoneTold.wait(seconds: 10)
                meeting.sawEveryone.withLock { $0[name] = all }
            }
        }
    }

    /// Two sinks stuck until the other is told to finish, and a hook (the last clip's) that
    /// runs on: each sink sees the other told, and the hook is killed only after the sinks began
    /// to finish — they did not wait for it, nor for each other.
    @Test func theSinksAndTheHooksFinishSideBySide() throws {
        let dir = try TemporaryDirectory("vigil-stop-side-by-side")
        defer { dir.remove() }
        let marker = dir.file("sinks-finishing")
        let termed = dir.file("termed")
        let pids = dir.file("pids")
        let hook = try writeScript(
            """
            trap 'if [ -e \(marker) ]; then echo after > \(termed); else echo before > \(termed); fi; exit 0' TERM
            echo $$ >> \(pids)
            sleep 60 &
            wait
            """, named: "hook.sh", in: dir)
        defer {
            for group in processIDs(inFile: pids) where !livingProcesses(inGroup: group).isEmpty {
                kill(-group, SIGKILL)
            }
        }
        let meeting = Meeting(names: ["broker", "viewers"], marker: marker)
        let harness = try AgentHarness(
            config: testConfig(extra: "hooks = { on_clip_saved = \"\(hook)\"; timeout = 600; };"),
            openSource: { _ throws(CaptureError) in
                try synthetic(scene(seconds: 6, width: 320, height: 240, objects: [crossing(2, 4)], period: 6))
            },
            sinks: { _, _, _ in meeting.names.map(meeting.sink) })
        #expect(harness.runToTheEnd() == .stopped, "\(harness.output)")
        #expect(harness.events.clipsSaved.count == 1, "\(harness.output)")
        #expect(meeting.sawEveryone.withLock { $0 } == ["broker": true, "viewers": true])
        #expect((try? String(contentsOfFile: termed, encoding: .utf8)) == "after\n", "\(harness.output)")
        #expect(logLines(harness.output, "hook killed: the agent stopped").count == 1, "\(harness.output)")
        #expect(logLines(harness.output, "a sink did not finish in time; stopping without it").isEmpty)
        for group in processIDs(inFile: pids) {
            #expect(waitForProcessGroupToEnd(group, timeout: 5).isEmpty, "hook \(group) outlived the stop")
        }
    }
}
