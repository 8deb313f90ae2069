import Capture
import Configuration
import Foundation
import Media
import Recorder
import Synchronization
import TestSupport
import Testing

@testable import Agent

/// The storage directory on a bad day, in process: read-only at start, gone while the agent
/// records, back again.
@Suite(.serialized) struct AgentStorageOutageTests {
    /// A read-only storage directory at start (a card the kernel remounted after an error):
    /// its lock file cannot be made, which is not another agent. The agent runs, waits for
    /// the storage as for a disk not mounted yet (said once, with the file system's words),
    /// and does not exit 75.
    @Test func aReadOnlyStorageDirectoryAtStartIsWaitedForNotTakenForAnotherAgent() throws {
        let storage = MemoryStorage()
        storage.writable = false
        let harness = try AgentHarness(
            config: testConfig(), storage: storage,
            openSource: { _ throws(CaptureError) in
                try synthetic(scene(seconds: 4, objects: []))
            })
        #expect(harness.runToTheEnd() == .stopped, "\(harness.output)")
        let waiting = harness.lines(
            "storage directory unavailable; clips wait for it — is the disk mounted and writable?")
        #expect(
            waiting.count == 1
                && waiting.allSatisfy { logValue($0, "error")?.contains("Read-only file system") == true },
            "\(harness.output)")
        #expect(
            harness.lines(
                "another agent records into this storage directory — stop it, or give this one another storage.path"
            ).isEmpty)
        #expect(harness.errors.isEmpty, "\(harness.errors)")
    }
}
