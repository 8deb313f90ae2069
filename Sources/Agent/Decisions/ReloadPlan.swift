import Configuration

/// What a reloaded configuration (SIGHUP) changes, and when each change applies:
///
/// | settings | apply |
/// |---|---|
/// | `log.*`, `hooks.*` | at once (the next log line, the next hook run) |
/// | `motion.*` (and the mask file), `recording.*`, `overlay.*`, `snapshot.*` | between events: the pipeline swaps its detector, event logic, pre-roll ring, overlay and picture settings only while no event is open, so a clip never mixes two configurations |
/// | `storage.*` but `path` | from the next clip: the writer finishes the open clip under the name, and with the journal line and hooks, it began with; clips named by an earlier pattern stay known through the journal |
/// | `camera.*` (its `name` too), `encoder.*`, `audio.*`, `mqtt.*`, `web.*`, `upload.*`, `storage.path` | after a restart (said in the log): the devices and the encoder are opened once, and the storage directory is claimed, checked and repaired once |
///
/// A value computed once per reload, from the settings before and after; no side effects.
/// The agent acts on it, and hands it to the pipeline with the settings; reloads that come
/// before the pipeline could apply one are merged (`merging`). `sections` lists every section
/// of `Settings` with when it applies, and a test holds it to `Settings`.
public struct ReloadPlan: Sendable, Equatable {
    /// When a section's changes apply.
    public enum Applies: Sendable, Equatable {
        case atOnce, betweenEvents, fromTheNextClip, afterRestart
    }

    /// Every section of the settings (`storage.path` apart from the rest of `storage`), and
    /// when a change to it applies.
    public static let sections: [(section: String, applies: Applies)] = [
        ("camera", .afterRestart), ("audio", .afterRestart), ("encoder", .afterRestart), ("mqtt", .afterRestart),
        ("web", .afterRestart), ("upload", .afterRestart), ("rtsp", .afterRestart),
        ("onvif", .afterRestart),
        ("storage.path", .afterRestart), ("log", .atOnce), ("hooks", .atOnce), ("motion", .betweenEvents),
        ("recording", .betweenEvents), ("overlay", .betweenEvents), ("snapshot", .betweenEvents),
        ("storage", .fromTheNextClip),
    ]

    /// Sections (or keys) whose changes wait for a restart, in the file's order.
    public var needsRestart: [String] = []
    public var logChanged = false
    /// The detector's settings or mask changed: a new detector between events.
    public var detectionChanged = false
    /// Post-roll or max_clip changed: new event logic between events.
    public var eventsChanged = false
    /// Pre-roll or its memory bound changed: a new ring between events (the old one's
    /// contents were kept under the old bound).
    public var preRollChanged = false
    /// `overlay.*` changed: the text drawn into the picture, between events.
    public var overlayChanged = false
    /// `snapshot.*` changed: the event's picture and `latest.jpg`, between events.
    public var snapshotChanged = false
    /// Storage or hooks changed: the writer takes the storage from the next clip, the hooks
    /// sink the programs at once.
    public var storageChanged = false

    public init(from old: Settings, to new: Settings) {
        if new.camera != old.camera { needsRestart.append("camera") }
        if new.audio != old.audio { needsRestart.append("audio") }
        if new.encoder != old.encoder { needsRestart.append("encoder") }
        if new.mqtt != old.mqtt { needsRestart.append("mqtt") }
        if new.web != old.web { needsRestart.append("web") }
        if new.upload != old.upload { needsRestart.append("upload") }
        if new.storage.path != old.storage.path { needsRestart.append("storage.path") }
        logChanged = new.log != old.log
        detectionChanged = new.motion != old.motion || new.motionMask != old.motionMask
        eventsChanged =
            new.recording.postRoll != old.recording.postRoll || new.recording.maxClip != old.recording.maxClip
        preRollChanged =
            new.recording.preRoll != old.recording.preRoll
            || new.recording.preRollMaxBytes != old.recording.preRollMaxBytes
        overlayChanged = new.overlay != old.overlay
        snapshotChanged = new.snapshot != old.snapshot
        storageChanged =
            ReloadPlan.applicable(new, running: old).storage != old.storage || new.hooks != old.hooks
    }

    /// This plan and a `later` one, for settings that went from this plan's start to the
    /// later one's end without the pipeline applying the first: whatever either changed.
    public func merging(_ later: ReloadPlan) -> ReloadPlan {
        var merged = later
        merged.needsRestart = needsRestart + later.needsRestart.filter { !needsRestart.contains($0) }
        merged.logChanged = logChanged || later.logChanged
        merged.detectionChanged = detectionChanged || later.detectionChanged
        merged.eventsChanged = eventsChanged || later.eventsChanged
        merged.preRollChanged = preRollChanged || later.preRollChanged
        merged.overlayChanged = overlayChanged || later.overlayChanged
        merged.snapshotChanged = snapshotChanged || later.snapshotChanged
        merged.storageChanged = storageChanged || later.storageChanged
        return merged
    }

    /// `new` with what waits for a restart kept as in `running`: what a reload applies.
    public static func applicable(_ new: Settings, running: Settings) -> Settings {
        var applied = new
        applied.camera = running.camera
        applied.audio = running.audio
        applied.encoder = running.encoder
        applied.mqtt = running.mqtt
        applied.web = running.web
        applied.upload = running.upload
        applied.storage.path = running.storage.path
        return applied
    }

    /// Why the file a reload read is not taken, or nil when it may be: it lacks the `camera`
    /// or the `storage` group that the file in use has. Such a file is one cut short or
    /// half-written, and its defaults would replace what the owner set — a `max_age_days = 0`
    /// (keep forever) would become 30, and the next sweep delete every older clip. (A file that
    /// sets nothing, or that does not parse, is refused before this.)
    public static func refusal(of new: ConfigValues, running: ConfigValues) -> String? {
        for group in ["camera", "storage"] where running.groups.contains(group) && !new.groups.contains(group) {
            return
                "the file has no \(group) group, which the one in use has — it looks cut short or half-written, and its defaults would replace the settings in use; put the \(group) group back and reload again"
        }
        return nil
    }

    /// A retention setting that a reload changes, with its values as the file writes them.
    public struct RetentionChange: Sendable, Equatable {
        public var setting: String
        public var old: String
        public var new: String
        /// True when the new value deletes clips the old one kept (a shorter age, a smaller
        /// size, more space to keep free, or a limit where there was none).
        public var deletesMore: Bool
    }

    /// The retention settings (`storage.max_age_days`, `max_size_mb`, `min_free_mb`) that differ
    /// between `old` and `new`, in that order.
    public static func retentionChanges(from old: Settings.Storage, to new: Settings.Storage) -> [RetentionChange] {
        var changes: [RetentionChange] = []
        /// A limit where 0 (nil) means none: it deletes more when it appears or shrinks.
        func limit<T: Comparable & BinaryInteger>(_ name: String, _ old: T?, _ new: T?, _ shown: (T) -> T) {
            guard old != new else { return }
            let deletesMore = new.map { new in old.map { new < $0 } ?? true } ?? false
            changes.append(
                RetentionChange(
                    setting: name, old: old.map { String(shown($0)) } ?? "0", new: new.map { String(shown($0)) } ?? "0",
                    deletesMore: deletesMore))
        }
        limit("storage.max_age_days", old.maxAgeDays, new.maxAgeDays) { $0 }
        limit("storage.max_size_mb", old.maxSize, new.maxSize) { $0 >> 20 }
        if old.minFree != new.minFree {
            changes.append(
                RetentionChange(
                    setting: "storage.min_free_mb", old: String(old.minFree >> 20), new: String(new.minFree >> 20),
                    deletesMore: new.minFree > old.minFree))
        }
        return changes
    }

    /// True when the pipeline has something to swap between events.
    public var changesPipeline: Bool {
        detectionChanged || eventsChanged || preRollChanged || overlayChanged || snapshotChanged
    }
}
