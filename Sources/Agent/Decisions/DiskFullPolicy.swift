import Media

/// What the clip writer does when the disk is full, or not there, decided without touching
/// the disk.
///
/// - A fragment that cannot be written for want of space: run retention (at most once a
///   second while the disk stays full) and try the write again; until it goes through, the
///   video waits in memory, up to `limit`. Past that, or on any other write error, the
///   clip is given up as far as it got (what is on disk stays playable and is repaired).
/// - An event while the storage directory is not there (a USB disk re-mounting, a card
///   read-only): its clip is recorded in memory the same way — the movie writer keeps the
///   GOPs its output cannot take — and written when the directory is back. The video waiting
///   in all such clips is held to `limit` (`hold`): past it the rest of the event is dropped,
///   said once, and later events are not recorded until the directory is back.
/// - A clip that cannot be created, or closed (its last fragment and index), for want of
///   space: retention once, then one more try.
/// - The disk being full is said once, and its end once (the next fragment that is synced).
/// - Free space below `min_free_mb` that deleting clips cannot make up is said (at most hourly
///   while it lasts), and its end once.
/// - A clip's picture gets what its clip gets (retention, then one more try); `latest.jpg`,
///   a live picture that the next one replaces, never takes space a clip needs
///   (`livePictureFits`): while the disk is short it is not written, said once (at most
///   hourly).
public struct DiskFullPolicy: Sendable, Equatable {
    /// Video kept in memory while the disk is full or not there, at most (`limit`'s default).
    public static let memoryLimit = 64 << 20
    /// Video kept in memory while the disk is full or not there, at most.
    public let limit: Int
    /// The limit was reached while the storage directory was not there (said once).
    private var holdingFull = false

    /// The full disk as an outage: from the first write that found no space to the next
    /// fragment synced; retention runs again at most `sweepInterval` after the last time.
    private var outage = Retry(first: DiskFullPolicy.sweepInterval, maximum: DiskFullPolicy.sweepInterval)
    private var nextSweep: Timestamp?
    public static let sweepInterval = Timestamp.Duration(seconds: 1)
    /// When a lasting shortfall was last said.
    private var lowSpaceSaid: Timestamp?

    public init(limit: Int = DiskFullPolicy.memoryLimit) {
        self.limit = limit
    }

    /// Whether `bytes` more video fit in memory beside the `held` bytes already waiting for
    /// the storage directory: `.keep`, or `.full` (`say` the first time, until `storageBack`).
    public mutating func hold(_ bytes: Int, beside held: Int) -> Hold {
        if held + bytes <= limit && !holdingFull { return .keep }
        defer { holdingFull = true }
        return .full(say: !holdingFull)
    }

    /// What `hold` says.
    public enum Hold: Sendable, Equatable {
        case keep
        case full(say: Bool)
    }

    /// The storage directory is back: what waited is written, and memory may hold again.
    public mutating func storageBack() { holdingFull = false }

    /// What to do about a write that failed.
    public enum WriteFailure: Sendable, Equatable {
        /// Run retention, then write again; `sayFull` the first time the disk is full.
        case sweepAndRetry(sayFull: Bool)
        /// Keep the video in memory and try again with the next GOP.
        case keepWaiting(sayFull: Bool)
        /// Give the clip up as far as it is on disk.
        case abandon
    }

    /// A write failed at `now` (`outOfSpace` for ENOSPC or EDQUOT) with `buffered` bytes of
    /// video waiting in memory.
    public mutating func writeFailed(outOfSpace: Bool, buffered: Int, at now: Timestamp) -> WriteFailure {
        guard outOfSpace else { return .abandon }
        let failure = outage.failed(at: now)
        if nextSweep.map({ now >= $0 }) ?? true {
            nextSweep = now + failure.retryIn
            return .sweepAndRetry(sayFull: failure.isFirst)
        }
        return buffered < limit ? .keepWaiting(sayFull: failure.isFirst) : .abandon
    }

    /// True from the first write that found the disk full to the next fragment that was synced.
    public var isFull: Bool { outage.isFailing }

    /// The retry after a sweep failed too: keep waiting while the memory allows.
    public func retryFailed(buffered: Int) -> WriteFailure {
        buffered < limit ? .keepWaiting(sayFull: false) : .abandon
    }

    /// A fragment reached the disk and was synced at `now`: the full disk it ends (say so), if any.
    public mutating func synced(at now: Timestamp) -> Retry.Recovery? {
        nextSweep = nil
        return outage.succeeded(at: now)
    }

    /// Creating a clip failed on its `attempt` (1, 2, …): retention and one more try the first
    /// time the disk is full, else the event goes unrecorded.
    public func createFailed(outOfSpace: Bool, attempt: Int) -> Bool {
        outOfSpace && attempt == 1
    }

    /// Whether `latest.jpg` (`bytes` of it) may be written now, with `free` bytes free (nil
    /// when that could not be read) and `minFree` the space retention keeps free: not while
    /// a write waits for space (`isFull`), nor when it and the picture it replaces (both are
    /// on the disk until the rename) would take free space below `minFree`, or below
    /// `headroom` whatever `minFree` says.
    public func livePictureFits(bytes: Int, free: Int64?, minFree: Int64, headroom: Int64) -> Bool {
        guard !isFull, let free else { return false }
        return free - 2 * Int64(bytes) >= max(minFree, headroom)
    }

    /// What retention's measurement of free space means.
    public enum LowSpace: Sendable, Equatable {
        /// Free space is below `min_free_mb` and deleting every clip would not make it up
        /// (other data took the space): the clips are kept; say so, and again at most every
        /// `lowSpaceRepeat` while it lasts. The shortfall in bytes.
        case low(Int64)
        /// It is above `min_free_mb` again after being low: say so once.
        case recovered
    }

    /// How often a lasting shortfall is said again.
    public static let lowSpaceRepeat = Timestamp.Duration(seconds: 3600)

    /// Retention measured `free` bytes against `minFree` at `now`; `shortfall` is what clips
    /// could not make up (nil when free space is enough, or clips were deleted to make it).
    public mutating func measured(free: Int64, minFree: Int64, shortfall: Int64?, at now: Timestamp) -> LowSpace? {
        if let shortfall {
            if let said = lowSpaceSaid, now - said < DiskFullPolicy.lowSpaceRepeat { return nil }
            lowSpaceSaid = now
            return .low(shortfall)
        }
        if free >= minFree, lowSpaceSaid != nil {
            lowSpaceSaid = nil
            return .recovered
        }
        return nil
    }
}
