import Logging
import Media

/// What the housekeeping thread does, as a step on the clock: every `log.stats_interval` the
/// stats line and the `stats` event, every minute retention (`.housekeeping`, for the writer),
/// and the watchdog ping while frames keep coming. `step` does what is due at the time it is
/// given and `due` says when the next task is; the thread waits on its wake token until then
/// (a reload rings it: the stats interval may have changed), a stepped test moves its clock.
///
/// `@unchecked Sendable`: made before the housekeeping thread starts, then stepped by that
/// thread alone (or by a test's own thread).
final class Housekeeping: @unchecked Sendable {
    /// What a step gives back, in order.
    enum Output {
        /// For the writer's queue.
        case writer(WriterItem)
        /// For the event sinks.
        case event(AgentEvent)
        /// systemd's watchdog: the agent is alive (frames came since the last ping).
        case watchdog
    }

    /// Retention is applied this often (and after each clip).
    static let sweepInterval = 60.0

    let stats: Stats
    let log: Logger
    /// The upload queue, asked its backlog for the stats; nil without uploads.
    let uploads: (any UploadStatus)?
    /// How often systemd wants a ping; nil: it does not watch.
    let watchdogInterval: Double?
    /// The stats interval in effect (a reload may change it); nil: no stats lines.
    let statsInterval: @Sendable () -> Double?
    private var previous: Counters
    private var lastStats: Timestamp
    private var lastSweep: Timestamp
    private var lastPing: Timestamp
    private var lastFrames: Int

    /// Housekeeping from `now` on: each task is first due an interval later.
    init(
        stats: Stats, log: Logger, uploads: (any UploadStatus)?, watchdogInterval: Double?,
        statsInterval: @escaping @Sendable () -> Double?, at now: Timestamp
    ) {
        self.stats = stats
        self.log = log
        self.uploads = uploads
        self.watchdogInterval = watchdogInterval
        self.statsInterval = statsInterval
        previous = stats.snapshot
        lastFrames = previous.framesIn
        lastStats = now
        lastSweep = now
        lastPing = now
    }

    /// What is due at `now`.
    func step(at now: Timestamp) -> [Output] {
        var outputs: [Output] = []
        let current = stats.snapshot
        if let interval = watchdogInterval, (now - lastPing).seconds >= interval {
            // Only while the pipeline makes progress: a stall lets systemd restart us.
            if current.framesIn != lastFrames { outputs.append(.watchdog) }
            lastFrames = current.framesIn
            lastPing = now
        }
        if (now - lastSweep).seconds >= Housekeeping.sweepInterval {
            outputs.append(.writer(.housekeeping))
            lastSweep = now
        }
        if let interval = statsInterval(), (now - lastStats).seconds >= interval {
            var report = StatsReport(now: stats.closeInterval(), previous: previous, seconds: (now - lastStats).seconds)
            report.uploadWaiting = uploads?.uploadCounts.waiting
            log.info("stats", Stats.line(report))
            outputs.append(.event(.stats(report)))
            previous = report.now
            lastStats = now
        }
        return outputs
    }

    /// When the next task is due.
    var due: Timestamp {
        let sweep = lastSweep + .init(seconds: Housekeeping.sweepInterval)
        return [
            watchdogInterval.map { lastPing + .init(seconds: $0) },
            sweep,
            statsInterval().map { lastStats + .init(seconds: $0) },
        ].compactMap { $0 }.min() ?? sweep
    }
}
