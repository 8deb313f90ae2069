import Foundation
import Media
import TestSupport
import Testing

@testable import Recorder

/// `storage.max_age_days` when the wall clock was wrong: a board without a clock battery that
/// boots at a stale time (fake-hwclock's last shutdown, or 1970) and is set by NTP later, a
/// clock stepped far into the future, a clock that was ahead and set back. Chosen clocks,
/// no I/O but the journal of a `MemoryStorage`.
@Suite struct RetentionClockTests {
    static let day = 86_400.0
    let week = RetentionPolicy(maxAgeDays: 7, maxSize: nil, minFree: 0)

    static func t(_ text: String) -> Date {
        guard let date = ClipRecord.date(fromTimestamp: text) else { fatalError("not a timestamp: \(text)") }
        return date
    }

    /// A clip recorded (as its journal line says) at `recorded`, its file last written then too
    /// (the same clock wrote both).
    func clip(_ name: String, _ recorded: Date, agedFrom: Date? = nil) -> StoredFile {
        StoredFile(relativePath: name, size: 1 << 20, modified: recorded, recorded: recorded, agedFrom: agedFrom)
    }

    /// What `policy` deletes of `clips` at `now`, and the clock after.
    func decide(
        _ clips: [StoredFile], now: Date, clock: RetentionClock, policy: RetentionPolicy? = nil
    ) -> RetentionPolicy.Decision {
        (policy ?? week).decide(clips: clips, now: now, freeBytes: 1 << 40, protected: [], clock: clock)
    }

    /// fake-hwclock: the board was off for 30 days and booted at its last shutdown time S. A
    /// clip of the earlier run (5 days old at S) and one recorded after the boot with the
    /// stale clock; then NTP sets the clock. Neither is deleted the moment the clock is set:
    /// each keeps the age it had, and goes on ageing with real time.
    @Test func aBoardThatBootedAtAStaleTimeKeepsEveryClipsAge() {
        let shutdown = Self.t("2026-11-01T00:00:00Z")
        let step = ClockStep(
            from: shutdown.addingTimeInterval(120), to: shutdown.addingTimeInterval(30 * Self.day + 120))
        let earlier = clip("earlier.mov", shutdown.addingTimeInterval(-5 * Self.day))
        let stale = clip("stale.mov", shutdown.addingTimeInterval(60))
        let fresh = clip("fresh.mov", step.to.addingTimeInterval(30))
        var clock = RetentionClock()
        clock.stepped(step)

        let set = decide([earlier, stale, fresh], now: step.to.addingTimeInterval(60), clock: clock)
        #expect(set.deletions.isEmpty, "\(set.deletions)")
        // Without the step, both were older than a week.
        #expect(
            decide([earlier, stale, fresh], now: step.to.addingTimeInterval(60), clock: RetentionClock()).deletions
                .map(\.clip.relativePath) == ["earlier.mov", "stale.mov"])
        #expect(set.agedFrom["earlier.mov"] == earlier.recorded!.addingTimeInterval(step.seconds))
        #expect(set.agedFrom["stale.mov"] == stale.recorded!.addingTimeInterval(step.seconds))
        #expect(set.agedFrom["fresh.mov"] == nil, "recorded with the right clock: its line is right")

        // Three days later the earlier clip is 8 days old; the stale one 3.
        let later = decide([earlier, stale, fresh], now: step.to.addingTimeInterval(3 * Self.day), clock: set.clock)
        #expect(later.deletions.map(\.clip.relativePath) == ["earlier.mov"])
        #expect(later.deletions.first?.reason == .olderThan(days: 7))
        let week = decide([stale, fresh], now: step.to.addingTimeInterval(7 * Self.day + 60), clock: later.clock)
        #expect(week.deletions.map(\.clip.relativePath) == ["stale.mov"])
    }

    /// A board without fake-hwclock boots in 1970: the clip it records then is aged from
    /// about when it was recorded once the clock is set, and a clip of an earlier run (dated
    /// by a right clock, later than the clock said at the step) ages from the step.
    @Test func clipsRecordedIn1970AreAgedFromWhenTheClockWasSet() {
        let step = ClockStep(from: Self.t("1970-01-01T00:02:00Z"), to: Self.t("2026-12-01T12:00:00Z"))
        let earlier = clip("earlier.mov", Self.t("2026-11-28T00:00:00Z"))
        let boot = clip("boot.mov", Self.t("1970-01-01T00:01:00Z"))
        let fresh = clip("fresh.mov", step.to.addingTimeInterval(30))
        var clock = RetentionClock()
        clock.stepped(step)
        let set = decide([earlier, boot, fresh], now: step.to.addingTimeInterval(60), clock: clock)
        #expect(set.deletions.isEmpty, "\(set.deletions)")
        #expect(set.agedFrom["boot.mov"] == step.to.addingTimeInterval(-60))
        #expect(set.agedFrom["earlier.mov"] == step.to)
        let due = decide(
            [earlier, boot, fresh], now: step.to.addingTimeInterval(7 * Self.day + 3600), clock: set.clock)
        #expect(due.deletions.map(\.clip.relativePath) == ["boot.mov", "earlier.mov"])

        // An agent that did not see the step (it started after it) finds a clip dated 1970:
        // a wrong clock's date, aged from when it is first seen with a right one.
        let now = Self.t("2026-12-02T00:00:00Z")
        let unseen = decide([boot, fresh], now: now, clock: RetentionClock())
        #expect(unseen.deletions.isEmpty && unseen.agedFrom["boot.mov"] == now)
        let next = [boot, fresh, clip("next.mov", now.addingTimeInterval(Self.day))]
        #expect(decide(next, now: now.addingTimeInterval(6 * Self.day), clock: unseen.clock).deletions.isEmpty)
        #expect(
            decide(next, now: now.addingTimeInterval(7 * Self.day + 1), clock: unseen.clock).deletions
                .map(\.clip.relativePath) == ["fresh.mov", "boot.mov"])
    }

    /// The clock stepped ten years ahead: no clip is deleted for it; each ages on from the age
    /// it had, and the oldest goes when it is really a week old.
    @Test func aClockSteppedFarIntoTheFutureDoesNotWipeTheStore() {
        let now0 = Self.t("2026-12-01T00:00:00Z")
        let clips = [5.0, 3, 1, 0.01].enumerated().map {
            clip("c\($0.offset).mov", now0.addingTimeInterval(-$0.element * Self.day))
        }
        let step = ClockStep(from: now0, to: Self.t("2036-12-01T00:00:00Z"))
        var clock = RetentionClock()
        clock.stepped(step)
        let after = decide(clips, now: step.to.addingTimeInterval(3600), clock: clock)
        #expect(after.deletions.isEmpty, "\(after.deletions)")
        #expect(
            decide(clips, now: step.to.addingTimeInterval(3600), clock: RetentionClock()).deletions.count == 3,
            "without the step every clip but the newest went")
        let twoDays = decide(clips, now: step.to.addingTimeInterval(2.5 * Self.day), clock: after.clock)
        #expect(twoDays.deletions.map(\.clip.relativePath) == ["c0.mov"])
    }

    /// While the clock reads 1970 (not set yet), nothing is deleted by age, and nothing is
    /// written into the journal.
    @Test func whileTheClockReads1970NothingIsDeletedByAge() {
        let now = Self.t("1970-01-05T00:00:00Z")
        let clips = [clip("a.mov", Self.t("1970-01-01T00:00:00Z")), clip("b.mov", Self.t("1970-01-04T00:00:00Z"))]
        let d = decide(
            clips, now: now, clock: RetentionClock(), policy: RetentionPolicy(maxAgeDays: 1, maxSize: nil, minFree: 0))
        #expect(d.deletions.isEmpty && d.agedFrom.isEmpty)
        // The other rules still hold: the store's size is kept.
        let size = decide(
            clips, now: now, clock: RetentionClock(), policy: RetentionPolicy(maxAgeDays: 1, maxSize: 1, minFree: 0))
        #expect(size.deletions.map(\.clip.relativePath) == ["a.mov"])
    }

    /// A clip dated after now (the clock was ahead, then set back) ages from now.
    @Test func aClipDatedInTheFutureAgesFromNow() {
        let now = Self.t("2026-12-01T00:00:00Z")
        let clips = [clip("ahead.mov", Self.t("2027-06-01T00:00:00Z")), clip("today.mov", now.addingTimeInterval(-60))]
        let d = decide(clips, now: now, clock: RetentionClock())
        #expect(d.deletions.isEmpty && d.agedFrom == ["ahead.mov": now])
        // Nor is it the newest clip for ever, which nothing deletes: a week later the clips
        // recorded since are newer, and it goes (after the one recorded a minute before it).
        let later = clips + [clip("later.mov", now.addingTimeInterval(7 * Self.day - 10))]
        let week = decide(later, now: now.addingTimeInterval(7 * Self.day + 1), clock: d.clock)
        #expect(week.deletions.map(\.clip.relativePath) == ["today.mov", "ahead.mov"])
    }

    /// The dates decided go into the journal (`aged_from`): an agent started again, which saw
    /// no step, ages the clips as the one before did.
    @Test func theDatesWrittenIntoTheJournalOutliveARestart() throws {
        let utc = TimeZone(identifier: "UTC")!
        let naming = ClipNaming(pattern: "%Y-%m-%d/{camera}-%Y%m%d-%H%M%S.mov", camera: "shed", timeZone: utc)
        let storage = MemoryStorage()
        let shutdown = Self.t("2026-11-01T00:00:00Z")
        let step = ClockStep(from: shutdown.addingTimeInterval(120), to: shutdown.addingTimeInterval(30 * Self.day))
        var names: [String] = []
        for (i, date) in [shutdown.addingTimeInterval(-5 * Self.day), shutdown.addingTimeInterval(60), step.to]
            .enumerated()
        {
            let name = naming.relativePath(for: date)
            names.append(name)
            storage.put(name, [UInt8](repeating: UInt8(i), count: 1000), modified: date)
            try EventsJournal(storage: storage).append(
                ClipRecord(
                    file: name, camera: "shed", start: ClipRecord.timestamp(date, timeZone: utc),
                    end: ClipRecord.timestamp(date.addingTimeInterval(10), timeZone: utc), cause: .motion,
                    triggerTime: nil, triggerSourceSeconds: nil, preRollSeconds: nil, durationSeconds: 10, frames: 150,
                    audioFrames: 0, bytes: 1000, peakScore: 0.5, part: 1))
        }
        let store = ClipStore(storage: storage, naming: naming)
        var clock = RetentionClock()
        clock.stepped(step)
        let first = store.sweep(week, now: step.to.addingTimeInterval(60), protected: [], clock: clock)
        #expect(first.deleted.isEmpty && first.errors.isEmpty && first.stamped == 2, "\(first.errors)")
        let records = try EventsJournal(storage: storage).records().records
        #expect(
            records.map(\.agedFrom) == [
                ClipRecord.timestamp(shutdown.addingTimeInterval(25 * Self.day - 120), timeZone: utc),
                ClipRecord.timestamp(step.to.addingTimeInterval(-60), timeZone: utc), nil,
            ])
        // Started again four days later: the clips keep their ages (the earlier one is now 9
        // days old, the stale one 4), with no step seen.
        let restarted = store.sweep(
            week, now: step.to.addingTimeInterval(4 * Self.day), protected: [], clock: RetentionClock())
        #expect(restarted.deleted.map(\.clip.relativePath) == [names[0]] && restarted.stamped == 0)
    }

    @Test func journalTimestampsReadBack() {
        #expect(
            ClipRecord.date(fromTimestamp: "2026-11-30T11:04:05.000Z") == Date(timeIntervalSince1970: 1_796_036_645))
        #expect(
            ClipRecord.date(fromTimestamp: "2026-11-30T12:04:05.250+01:00")
                == Date(timeIntervalSince1970: 1_796_036_645.25))
        #expect(ClipRecord.date(fromTimestamp: "1970-01-01T00:00:00Z") == Date(timeIntervalSince1970: 0))
        #expect(
            ClipRecord.date(fromTimestamp: "2024-02-29T23:59:59-05:30") == Date(timeIntervalSince1970: 1_709_270_999))
        let berlin = TimeZone(identifier: "Europe/Berlin")!
        for seconds in [0.0, 951_782_400.5, 1_796_036_645.123, 2_000_000_000] {
            let date = Date(timeIntervalSince1970: seconds)
            for zone in [berlin, TimeZone(identifier: "UTC")!] {
                let text = ClipRecord.timestamp(date, timeZone: zone)
                #expect(ClipRecord.date(fromTimestamp: text) == date, "\(text)")
            }
        }
        for bad in [
            "", "2026-11-30", "2026-11-30T11:04:05", "2026-13-30T11:04:05Z", "2026-11-30T11:04:05.000Zx", "yesterday",
        ] {
            #expect(ClipRecord.date(fromTimestamp: bad) == nil, "\(bad)")
        }
    }

    /// A step is the wall clock jumping ahead of the monotonic clock by more than a minute
    /// between two looks; drift and steps back are not.
    @Test func aStepIsAJumpOfTheWallClockAheadOfTheMonotonicOne() {
        var watch = ClockWatch()
        let t0 = Self.t("2026-11-01T00:00:00Z")
        #expect(watch.look(wall: t0, monotonic: .s(100)) == nil)
        #expect(watch.look(wall: t0.addingTimeInterval(70), monotonic: .s(160)) == nil, "10 s of drift")
        #expect(
            watch.look(wall: t0.addingTimeInterval(3700), monotonic: .s(220))
                == ClockStep(from: t0.addingTimeInterval(130), to: t0.addingTimeInterval(3700)))
        #expect(watch.look(wall: t0, monotonic: .s(230)) == nil, "a step back")
    }
}
