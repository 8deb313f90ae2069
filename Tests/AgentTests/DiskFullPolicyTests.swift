import Media
import TestSupport
import Testing

@testable import Agent

/// `DiskFullPolicy`, driven with chosen timestamps: what the clip writer does when a write
/// finds no space, when it is said, and when retention may run again.
@Suite struct DiskFullPolicyTests {
    static let little = 1 << 20
    static let tooMuch = DiskFullPolicy.memoryLimit

    @Test func theFirstFullWriteSweepsAndSaysSoOnce() {
        var policy = DiskFullPolicy()
        #expect(!policy.isFull)
        #expect(policy.full(at: 10) == .sweepAndRetry(sayFull: true))
        #expect(policy.isFull)
    }

    /// Within a second of a sweep, no second one: the video waits in memory while there is
    /// room for it, and the clip is given up past the limit. Nothing more is said.
    @Test func withinASecondTheVideoWaitsOrTheClipIsGivenUp() {
        var policy = DiskFullPolicy()
        _ = policy.full(at: 10)
        #expect(policy.full(at: 10.2) == .keepWaiting(sayFull: false))
        #expect(policy.full(at: 10.9, buffered: Self.tooMuch - 1) == .keepWaiting(sayFull: false))
        #expect(policy.full(at: 10.95, buffered: Self.tooMuch) == .abandon)
        #expect(policy.isFull)
    }

    /// `latest.jpg` is written only with room to spare beyond `min_free_mb` (and at least the
    /// headroom) for it and the picture it replaces, and never while a write waits for space.
    @Test func theLivePictureNeverTakesSpaceAClipNeeds() {
        var policy = DiskFullPolicy()
        let mb: Int64 = 1 << 20
        #expect(policy.livePictureFits(bytes: 100_000, free: 10 * mb, minFree: 5 * mb, headroom: mb))
        #expect(policy.livePictureFits(bytes: 100_000, free: 5 * mb + 200_000, minFree: 5 * mb, headroom: mb))
        #expect(!policy.livePictureFits(bytes: 100_000, free: 5 * mb + 199_999, minFree: 5 * mb, headroom: mb))
        #expect(!policy.livePictureFits(bytes: 100_000, free: mb, minFree: 0, headroom: mb))
        #expect(!policy.livePictureFits(bytes: 100_000, free: nil, minFree: 0, headroom: mb))
        _ = policy.full(at: 10)
        #expect(!policy.livePictureFits(bytes: 100_000, free: 100 * mb, minFree: 0, headroom: mb))
        _ = policy.synced(at: .s(11))
        #expect(policy.livePictureFits(bytes: 100_000, free: 100 * mb, minFree: 0, headroom: mb))
    }

    /// The video kept in memory while the storage directory is not there has the bound a
    /// full disk's has (64 MB by default): past it nothing more is held until the directory is
    /// back, which is said once.
    @Test func videoWaitingForTheStorageIsBoundedLikeAFullDisksVideo() {
        #expect(DiskFullPolicy().limit == 64 << 20)
        var policy = DiskFullPolicy(limit: 1000)
        #expect(policy.hold(400, beside: 0) == .keep)
        #expect(policy.hold(600, beside: 400) == .keep)
        #expect(policy.hold(1, beside: 1000) == .full(say: true))
        #expect(policy.hold(0, beside: 0) == .full(say: false), "nothing until the directory is back")
        policy.storageBack()
        #expect(policy.hold(10, beside: 0) == .keep)
        _ = policy.full(at: 10)
        #expect(policy.full(at: 10.5, buffered: 999) == .keepWaiting(sayFull: false))
        #expect(policy.full(at: 10.6, buffered: 1000) == .abandon)
    }

    @Test func aSecondLaterRetentionRunsAgain() {
        var policy = DiskFullPolicy()
        _ = policy.full(at: 10)
        _ = policy.full(at: 10.5)
        #expect(policy.full(at: 11) == .sweepAndRetry(sayFull: false))
        #expect(policy.full(at: 11.5) == .keepWaiting(sayFull: false))
        // However long it stays full: once a second, not backing off.
        #expect(policy.full(at: 12.2) == .sweepAndRetry(sayFull: false))
        #expect(policy.full(at: 13.2) == .sweepAndRetry(sayFull: false))
    }

    @Test(arguments: [0, DiskFullPolicy.memoryLimit])
    func anyOtherWriteErrorAbandonsAtOnce(buffered: Int) {
        var policy = DiskFullPolicy()
        #expect(policy.writeFailed(outOfSpace: false, buffered: buffered, at: .s(1)) == .abandon)
        #expect(!policy.isFull, "an I/O error is not a full disk")
        _ = policy.full(at: 2)
        #expect(
            policy.writeFailed(outOfSpace: false, buffered: 0, at: .s(2.1)) == .abandon, "nor while the disk is full")
    }

    /// A retry right after a sweep that freed too little: wait while the memory allows.
    @Test func aFailedRetryAfterASweepWaitsWhileTheMemoryAllows() {
        let policy = DiskFullPolicy()
        #expect(policy.retryFailed(buffered: Self.little) == .keepWaiting(sayFull: false))
        #expect(policy.retryFailed(buffered: Self.tooMuch) == .abandon)
    }

    /// The next fragment synced ends the outage: said once, with how long it lasted; the
    /// next full write is a new outage, said again and swept at once.
    @Test func syncedEndsTheOutageOnce() {
        var policy = DiskFullPolicy()
        #expect(policy.synced(at: .s(1)) == nil, "nothing was full")
        _ = policy.full(at: 10)
        _ = policy.full(at: 10.5)
        #expect(policy.synced(at: .s(10.6)) == Retry.Recovery(down: .s(0.6), tries: 2))
        #expect(!policy.isFull)
        #expect(policy.synced(at: .s(10.7)) == nil)
        #expect(
            policy.full(at: 10.8) == .sweepAndRetry(sayFull: true),
            "a new outage within a second of the last sweep still sweeps")
    }

    @Test func creatingAClipRetriesOnceAndOnlyForWantOfSpace() {
        let policy = DiskFullPolicy()
        #expect(policy.createFailed(outOfSpace: true, attempt: 1))
        #expect(!policy.createFailed(outOfSpace: true, attempt: 2))
        #expect(!policy.createFailed(outOfSpace: false, attempt: 1))
        #expect(!policy.createFailed(outOfSpace: false, attempt: 2))
    }

    /// A shortfall clips cannot make up is said, again at most hourly while it lasts, and its
    /// end once.
    @Test func aLastingShortfallIsSaidHourlyAndItsEndOnce() {
        var policy = DiskFullPolicy()
        let minFree: Int64 = 100
        func at(_ seconds: Double) -> Timestamp { Timestamp(seconds: seconds) }
        #expect(policy.measured(free: 500, minFree: minFree, shortfall: nil, at: at(0)) == nil)
        #expect(
            policy.measured(free: 50, minFree: minFree, shortfall: nil, at: at(1)) == nil,
            "retention deleted clips to make it up")
        #expect(policy.measured(free: 50, minFree: minFree, shortfall: 50, at: at(2)) == .low(50))
        #expect(policy.measured(free: 40, minFree: minFree, shortfall: 60, at: at(60)) == nil)
        #expect(policy.measured(free: 40, minFree: minFree, shortfall: 60, at: at(3000)) == nil)
        #expect(
            policy.measured(free: 40, minFree: minFree, shortfall: 60, at: at(3602)) == .low(60),
            "an hour on: said again")
        #expect(policy.measured(free: 100, minFree: minFree, shortfall: nil, at: at(3700)) == .recovered)
        #expect(policy.measured(free: 200, minFree: minFree, shortfall: nil, at: at(3800)) == nil)
        #expect(
            policy.measured(free: 10, minFree: minFree, shortfall: 90, at: at(3900)) == .low(90),
            "short again: said again")
    }
}

extension DiskFullPolicy {
    /// A write that found no space at `t` seconds, with `buffered` bytes of video waiting.
    mutating func full(at t: Double, buffered: Int = DiskFullPolicyTests.little) -> WriteFailure {
        writeFailed(outOfSpace: true, buffered: buffered, at: .s(t))
    }
}
