import Media
import TestSupport
import Testing

@testable import Recorder

/// The event state machine, driven with chosen timestamps (no clock).
@Suite struct EventStateMachineTests {
    static let settings = EventSettings(postRoll: .s(2), maxClip: .s(10))

    /// A frame with or without motion at `t`; `since` is the start of the run.
    static func frame(_ t: Double, _ motion: Bool, score: Double = 0.05, since: Double? = nil) -> EventInput {
        .frame(time: .s(t), motion: motion, score: score, motionStart: motion ? .s(since ?? t) : nil)
    }

    /// Feeds frames every 0.1 s from `from` to `to` (exclusive) with `motion`, collecting actions.
    static func feed(
        _ machine: inout EventStateMachine, _ from: Double, _ to: Double, motion: Bool,
        score: Double = 0.05
    ) -> [EventAction] {
        var actions: [EventAction] = []
        var i = 0
        while true {
            let t = from + Double(i) * 0.1
            if t >= to - 1e-9 { break }
            actions += machine.handle(frame(t, motion, score: score))
            i += 1
        }
        return actions
    }

    @Test func idleStaysIdle() {
        var m = EventStateMachine(settings: Self.settings)
        #expect(Self.feed(&m, 0, 5, motion: false).isEmpty)
        #expect(m.state == .idle)
        #expect(m.handle(.finish(at: .s(5))).isEmpty)
    }

    @Test func startCarriesTriggerAndConfirmation() {
        var m = EventStateMachine(settings: Self.settings)
        let actions = m.handle(Self.frame(1.1, true, score: 0.02, since: 1.0))
        #expect(actions == [.start(trigger: .s(1.0), confirmedAt: .s(1.1), score: 0.02)])
        #expect(m.state == .motion)
        #expect(m.trigger == .s(1.0))
    }

    /// Post-roll: the event ends `post_roll` after the last motion frame; a frame exactly at
    /// that instant still belongs to it.
    @Test func postRollEndsEvent() {
        var m = EventStateMachine(settings: Self.settings)
        #expect(m.handle(Self.frame(1, true, score: 0.03)).count == 1)
        #expect(m.handle(Self.frame(1.5, true, score: 0.08)).isEmpty)
        #expect(m.handle(Self.frame(1.6, false)).isEmpty)
        #expect(m.state == .postRoll)
        #expect(m.endDue == .s(3.5))
        #expect(m.handle(Self.frame(3.4, false)).isEmpty)
        #expect(
            m.handle(Self.frame(3.5, false, score: 0.001)) == [
                .end(at: .s(3.5), lastMotion: .s(1.5), peakScore: 0.08, parts: 1)
            ])
        #expect(m.state == .idle)
        #expect(m.handle(Self.frame(3.6, false)).isEmpty)
    }

    /// With frames that skip the due instant, the end is still at last motion + post_roll.
    @Test func endBetweenFrames() {
        var m = EventStateMachine(settings: Self.settings)
        _ = m.handle(Self.frame(1, true))
        _ = m.handle(Self.frame(2, false))
        #expect(m.handle(Self.frame(4, false)) == [.end(at: .s(3), lastMotion: .s(1), peakScore: 0.05, parts: 1)])
    }

    @Test func zeroPostRollEndsAtLastMotion() {
        var m = EventStateMachine(settings: EventSettings(postRoll: .zero, maxClip: .s(10)))
        _ = m.handle(Self.frame(1, true))
        _ = m.handle(Self.frame(1.1, true))
        #expect(m.handle(Self.frame(1.2, false)) == [.end(at: .s(1.1), lastMotion: .s(1.1), peakScore: 0.05, parts: 1)])
    }

    @Test func motionDuringPostRollContinuesTheEvent() {
        var m = EventStateMachine(settings: Self.settings)
        var actions = Self.feed(&m, 0, 1, motion: true)
        actions += Self.feed(&m, 1, 2.5, motion: false)
        actions += Self.feed(&m, 2.5, 3, motion: true, score: 0.2)
        actions += Self.feed(&m, 3, 6, motion: false)
        #expect(actions.count == 2)
        #expect(actions.first == .start(trigger: .s(0), confirmedAt: .s(0), score: 0.05))
        if case let .end(at, lastMotion, peak, parts) = actions.last {
            #expect(abs(at.seconds - 4.9) < 1e-6)
            #expect(abs(lastMotion.seconds - 2.9) < 1e-6)
            #expect(peak == 0.2)
            #expect(parts == 1)
        } else {
            Issue.record("no end: \(actions)")
        }
    }

    /// A run of motion that began inside the post-roll, but is confirmed just after it ran
    /// out, continues the event rather than starting an overlapping one.
    @Test func runBeganWithinPostRoll() {
        var m = EventStateMachine(settings: Self.settings)
        _ = m.handle(Self.frame(1, true))
        _ = m.handle(Self.frame(1.1, false))
        #expect(m.handle(Self.frame(3.1, true, since: 2.9)).isEmpty)
        #expect(m.state == .motion)
        // A run that began after the post-roll ended is a new event.
        _ = m.handle(Self.frame(3.2, false))
        #expect(
            m.handle(Self.frame(5.3, true, since: 5.25)) == [
                .end(at: .s(5.1), lastMotion: .s(3.1), peakScore: 0.05, parts: 1),
                .start(trigger: .s(5.25), confirmedAt: .s(5.3), score: 0.05),
            ])
    }

    /// max_clip: a split every 10 s counted from the trigger, in motion and in post-roll;
    /// the end reports the number of parts.
    @Test func splitsAtMaxClip() {
        var m = EventStateMachine(settings: Self.settings)
        var actions = m.handle(Self.frame(0.5, true, since: 0.3))
        actions += Self.feed(&m, 0.6, 20.5, motion: true)
        actions += Self.feed(&m, 20.5, 24, motion: false)
        let splits = actions.compactMap { a -> (Timestamp, Int)? in
            if case let .split(at, part) = a { return (at, part) } else { return nil }
        }
        #expect(splits.map(\.0) == [.s(10.3), .s(20.3)])
        #expect(splits.map(\.1) == [2, 3])
        if case let .end(_, _, _, parts) = actions.last { #expect(parts == 3) } else { Issue.record("no end") }
    }

    @Test func splitDuringPostRoll() {
        var m = EventStateMachine(settings: Self.settings)
        _ = m.handle(Self.frame(0, true))
        _ = m.handle(Self.frame(9, true))
        _ = m.handle(Self.frame(9.5, false))
        #expect(m.handle(Self.frame(10, false)) == [.split(at: .s(10), part: 2)])
        #expect(m.handle(Self.frame(11.1, false)) == [.end(at: .s(11), lastMotion: .s(9), peakScore: 0.05, parts: 2)])
    }

    /// After a long gap without frames, one split at the latest due instant, not one per
    /// max_clip of the gap (those parts would be empty).
    @Test func oneSplitAfterAGap() {
        var m = EventStateMachine(settings: Self.settings)
        _ = m.handle(Self.frame(0, true))
        #expect(m.handle(Self.frame(35, true)) == [.split(at: .s(30), part: 2)])
        #expect(m.handle(Self.frame(40, true)) == [.split(at: .s(40), part: 3)])
    }

    /// A split and the end falling due before the same frame: the end comes first when it
    /// is earlier, and then there is nothing to split.
    @Test func endBeforeSplit() {
        var m = EventStateMachine(settings: Self.settings)
        _ = m.handle(Self.frame(0, true))
        _ = m.handle(Self.frame(1, false))
        #expect(m.handle(Self.frame(12, false)) == [.end(at: .s(2), lastMotion: .s(0), peakScore: 0.05, parts: 1)])
    }

    @Test(arguments: [
        // (state before finish: motion or post-roll, finish time, expected end)
        (true, 5.0, 5.0),
        (false, 2.5, 2.5),  // post-roll cut short
        (false, 9.0, 3.0),  // finish after the due end (no frame came): end at the due time
    ])
    func finishEndsOpenEvent(inMotion: Bool, finish: Double, expected: Double) {
        var m = EventStateMachine(settings: Self.settings)
        _ = m.handle(Self.frame(0, true))
        _ = m.handle(Self.frame(1, true))
        if !inMotion { _ = m.handle(Self.frame(1.5, false)) }
        let actions = m.handle(.finish(at: .s(finish)))
        #expect(actions == [.end(at: .s(expected), lastMotion: .s(1), peakScore: 0.05, parts: 1)])
        #expect(m.state == .idle)
        #expect(m.handle(.finish(at: .s(finish + 1))).isEmpty)
    }

    @Test func finishBeforeLastFrameIsClamped() {
        var m = EventStateMachine(settings: Self.settings)
        _ = m.handle(Self.frame(0, true))
        _ = m.handle(Self.frame(1, true))
        #expect(m.handle(.finish(at: .s(0.5))) == [.end(at: .s(1), lastMotion: .s(1), peakScore: 0.05, parts: 1)])
    }

    @Test func framesGoingBackwardsAreIgnored() {
        var m = EventStateMachine(settings: Self.settings)
        _ = m.handle(Self.frame(5, false))
        #expect(m.handle(Self.frame(4, true)).isEmpty)
        #expect(m.state == .idle)
        #expect(m.handle(Self.frame(5, true)).count == 1)
    }

    /// Every short sequence of motion/no-motion frames: the actions alternate start/end, every
    /// event ends at last motion + post_roll or at the finish, and events never overlap.
    @Test func exhaustiveShortSequences() {
        let length = 10
        let settings = EventSettings(postRoll: .s(0.25), maxClip: .s(10))
        for pattern in 0..<(1 << length) {
            var m = EventStateMachine(settings: settings)
            var actions: [EventAction] = []
            var lastMotion: Double?
            for i in 0..<length {
                let motion = pattern & (1 << i) != 0
                if motion { lastMotion = Double(i) * 0.1 }
                actions += m.handle(Self.frame(Double(i) * 0.1, motion))
            }
            actions += m.handle(.finish(at: .s(Double(length) * 0.1)))
            var open = false
            var previousEnd = -1.0
            for action in actions {
                switch action {
                case let .start(trigger, _, _):
                    #expect(!open, "pattern \(pattern): start while open")
                    #expect(trigger.seconds > previousEnd, "pattern \(pattern): overlapping events")
                    open = true
                case let .end(at, last, _, _):
                    #expect(open, "pattern \(pattern): end while idle")
                    #expect(at.seconds <= last.seconds + 0.25 + 1e-9)
                    previousEnd = at.seconds
                    open = false
                case .split:
                    Issue.record("pattern \(pattern): unexpected split")
                }
            }
            #expect(!open)
            #expect((lastMotion != nil) == !actions.isEmpty)
        }
    }
}
