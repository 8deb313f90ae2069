import AgentTestSupport
import Capture
import Foundation
import Media
import Recorder
import Synchronization
import TestSupport
import Testing

@testable import Agent

/// Retention in the agent (stepped) when the wall clock is set while it records.
@Suite(.serialized) struct AgentRetentionTests {
    /// A board without a clock battery booted at its last shutdown time (fake-hwclock), 30
    /// days behind, and records an event; then NTP sets the clock. With `max_age_days = 7`,
    /// the clip recorded before the step is not deleted the moment the clock is set (nor by an
    /// agent started again later): it ages from about when it was recorded, as its catalogue
    /// entry now says.
    @Test func aClipRecordedBeforeTheClockWasSetIsNotDeletedByAge() throws {
        let behind = Mutex(-30 * 86_400.0)
        let start = Date()
        let storage = MemoryStorage()
        let agent = try EmbeddedAgent(
            config: testConfig(storage: "max_age_days = 7;"), storage: storage,
            openSource: { _ throws(CaptureError) in
                try synthetic(scene(seconds: 24, objects: [crossing(2, 5), crossing(14, 17)]))
            },
            onEvent: { event in
                // NTP sets the clock once the first clip is saved.
                if case .clipSaved(let saved) = event, saved.record.part == 1, behind.withLock({ $0 }) != 0 {
                    behind.withLock { $0 = 0 }
                    storage.now = Date()
                }
            },
            wall: { start.addingTimeInterval($0.seconds + behind.withLock { $0 }) })
        // Files are stamped by the same clock.
        storage.now = Date().addingTimeInterval(-30 * 86_400)
        #expect(agent.runToTheEnd() == .stopped, "\(agent.output)")

        let saved = agent.events.clipsSaved.map(\.record.file)
        try #require(saved.count == 2, "\(agent.output)")
        #expect(agent.events.deletions.isEmpty, "\(agent.output)")
        #expect(agent.clipFiles == saved.sorted(), "\(agent.output)")
        // It ages from after the step: about when it was recorded, not 30 days before.
        let aged = try storage.openCatalogue().oldest(after: nil, limit: 10)
        let first = try #require(aged.first { $0.entry.file == saved[0] })
        #expect(abs(Double(first.age) / 1000 - start.timeIntervalSince1970) < 3600, "\(first)")
        #expect(agent.errors.isEmpty, "\(agent.errors)")

        // Started again a moment later, with the clock right: the clips stay.
        let again = try runAtStart(on: storage, config: testConfig(storage: "max_age_days = 7;"))
        #expect(again.events.deletions.isEmpty, "\(again.output)")
        #expect(storage.fileNames.filter { $0.hasSuffix(".mov") } == saved.sorted())
    }
}
