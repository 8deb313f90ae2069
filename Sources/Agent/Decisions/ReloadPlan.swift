import Configuration

/// What a reloaded configuration (SIGHUP) changes, and when each change applies:
///
/// | settings | apply |
/// |---|---|
/// | `log.*`, `hooks.*` | at once (the next log line, the next hook run) |
/// | `motion.*` (and the mask file), `recording.*` | between events: the pipeline swaps its detector, event logic and pre-roll ring only while no event is open, so a clip never mixes two configurations |
/// | `storage.*` but `path` | from the next clip: the writer finishes the open clip under the name, and with the journal line and hooks, it began with; clips named by an earlier pattern stay known through the journal |
/// | `camera.*` (its `name` too), `encoder.*`, `audio.*`, `mqtt.*`, `storage.path` | after a restart (said in the log): the devices and the encoder are opened once, and the storage directory is claimed, checked and repaired once |
///
/// A value computed from the settings before and after; no side effects.
public struct ReloadPlan: Sendable, Equatable {
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
    /// Storage or hooks changed: the writer takes the storage from the next clip, the hooks
    /// sink the programs at once.
    public var storageChanged = false

    public init(from old: Settings, to new: Settings) {
        if new.camera != old.camera { needsRestart.append("camera") }
        if new.audio != old.audio { needsRestart.append("audio") }
        if new.encoder != old.encoder { needsRestart.append("encoder") }
        if new.mqtt != old.mqtt { needsRestart.append("mqtt") }
        if new.storage.path != old.storage.path { needsRestart.append("storage.path") }
        logChanged = new.log != old.log
        detectionChanged = new.motion != old.motion || new.motionMask != old.motionMask
        eventsChanged =
            new.recording.postRoll != old.recording.postRoll || new.recording.maxClip != old.recording.maxClip
        preRollChanged =
            new.recording.preRoll != old.recording.preRoll
            || new.recording.preRollMaxBytes != old.recording.preRollMaxBytes
        storageChanged =
            ReloadPlan.applicable(new, running: old).storage != old.storage || new.hooks != old.hooks
    }

    /// `new` with what waits for a restart kept as in `running`: what a reload applies.
    public static func applicable(_ new: Settings, running: Settings) -> Settings {
        var applied = new
        applied.camera = running.camera
        applied.audio = running.audio
        applied.encoder = running.encoder
        applied.mqtt = running.mqtt
        applied.storage.path = running.storage.path
        return applied
    }

    /// True when the pipeline has something to swap between events.
    public var changesPipeline: Bool { detectionChanged || eventsChanged || preRollChanged }
}
