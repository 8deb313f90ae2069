import Logging

/// What the agent says about its devices, its stream and its configuration as they change: a
/// camera lost and back, a microphone failing, a source that stalls, frame times that jump, a
/// reload taken or refused. Each is a value, logged here — its level, its constant message and
/// its fields are written once, in `line` — and handed to the event sinks as
/// `AgentEvent.notice`, so a test (and a status page) reads what happened instead of the log's
/// text. The log line is the same either way.
public enum Notice: Sendable, Equatable {
    /// The camera opened after it was missing at start; `attempts` tries in all.
    case cameraOpen(source: String, format: String, attempts: Int)
    /// The camera came back after it was lost: down `down` seconds, `attempts` tries.
    case cameraBack(source: String, format: String, down: Double, attempts: Int)
    /// No camera at start: the agent waits for it.
    case cameraUnavailable(source: String, error: String)
    /// The camera failed while recording; with `restart`, only a new process can open it again
    /// (the agent saves the clip and stops for systemd to start it anew).
    case cameraLost(source: String, error: String, restart: Bool)
    /// A file or synthetic source ended.
    case endOfSource(source: String)
    /// The source delivered nothing for `seconds`; `closingClip`: an event was being recorded.
    case sourceStalled(seconds: Double, closingClip: Bool)
    /// Frames came again after a stall.
    case framesAgain
    /// The frame times leapt `seconds` ahead; the stream starts afresh.
    case frameTimesJumped(seconds: Double, closingClip: Bool)
    /// The wall clock was stepped by `seconds` (NTP after a boot without a clock battery).
    case wallClockMoved(seconds: Double)
    /// The microphone opened (`back`: after it had failed).
    case microphoneOpen(device: String, rate: Int, channels: Int, back: Bool)
    /// No microphone: clips have video only until it is there.
    case microphoneUnavailable(device: String, error: String)
    /// The microphone failed while recording.
    case microphoneFailed(device: String, error: String)
    /// A reload was refused (the file is invalid, or would stop recording): `error` says why.
    case reloadRefused(error: String)
    /// A reload changed what retention keeps; `deletesMore`: clips kept until now may go.
    case retentionChanged(setting: String, old: String, new: String, deletesMore: Bool)
    /// A reload changed settings that apply only after a restart; the ones in use are kept.
    case restartNeeded(changed: [String])
    /// Which encoder `encoder.backend` chose and why; `unsuitable`: the hardware one cannot
    /// take this stream.
    case encoderChosen(backend: String, reason: String, unsuitable: Bool)
    /// A stream's encoder opened: the picture it takes and what the encoder says of itself
    /// (`VideoEncoder.logDescription`: its name first).
    case encoding(width: Int, height: Int, pixelFormat: String, encoder: [Fact], keyframeInterval: Double)
    /// The hardware encoder cannot open for this stream: x264 records from now on.
    case hardwareEncoderCannotOpen(error: String)
    /// The hardware encoder failed: the clip is closed and the encoder opened again.
    case hardwareEncoderFailed(error: String, failuresIn10Minutes: Int)
    /// The hardware encoder failed `failures` times in ten minutes: x264 from now on.
    case hardwareEncoderGivenUp(failures: Int)
    /// The encoder failed and no other can take over: the agent stops.
    case encoderFailed(error: String)

    /// The storage directory cannot be used (not mounted, read-only, claimed elsewhere): clips
    /// wait for it in memory. Said once per outage.
    case storageUnavailable(path: String, error: String)
    /// The storage directory is back after `down` seconds and `attempts` tries.
    case storageBack(path: String, down: Double, attempts: Int)
    /// A clip is recorded in memory while the storage directory is unavailable.
    case clipHeld(event: Int, part: Int, trigger: String, path: String, memoryBytes: Int)
    /// The video waiting in memory reached its limit: the rest of this event, and the events
    /// until the directory is back, are not recorded. Said once.
    case heldVideoFull(event: Int, part: Int, keptSeconds: Double, memoryMB: Int, waiting: Int)
    /// An event not recorded at all: the directory is unavailable and the memory full.
    case clipNotRecorded(event: Int, part: Int, trigger: String, path: String, memoryMB: Int)
    /// A clip recorded in memory became a file when the directory came back.
    case clipWrittenFromMemory(file: String, event: Int, part: Int, bytes: Int)
    /// A clip still in memory when the agent stopped, with the directory still unavailable.
    case clipLostWithTheStorage(event: Int, part: Int, start: String, end: String, path: String)
    /// The disk ran full while `during` (writing video, finishing a clip …): retention runs
    /// and the video waits in memory until there is room. Said once per outage.
    case diskFull(file: String, during: String)
    /// Room on the disk again: the clip goes on.
    case diskSpaceAgain(file: String)
    /// The free space is below `storage.min_free_mb` and deleting clips would not make it up.
    case diskLow(path: String, freeMB: Int, minFreeMB: Int, shortMB: Int)
    /// A clip is saved without its snapshot picture.
    case snapshotNotSaved(file: String, error: String)
    /// `latest.jpg` cannot be written; said once until it is written again.
    case latestPictureFailed(path: String, error: String)
    /// `latest.jpg` waits while the disk is short of space (said at most hourly).
    case latestPictureWaitsForSpace(path: String, minFreeMB: Int)
    /// A clip could not be finished (a write error): what is on disk is repaired.
    case clipUnfinished(file: String, error: String)
    /// A clip given up after a write error was repaired into a complete movie.
    case clipRepaired(file: String, frames: Int)
    /// A clip no player can open (found at start) was moved aside as `movedTo`, its bytes kept.
    case clipMovedAside(file: String, movedTo: String, bytes: Int64?, error: String)
    /// A clip found unfinished at start cannot be repaired, and is left as it is.
    case clipNotRepaired(file: String, error: String, moveError: String?)
    /// A file an interrupted write left (a picture's or the journal's new contents) was removed.
    case leftoverRemoved(file: String, bytes: Int64)
    /// The overlay's text does not fit the picture: shortened, keeping the time. Said once.
    case overlayShortened(pattern: String, charactersThatFit: Int, drawn: String)
    /// The events journal was written anew from the clips on disk at start.
    case journalRebuilt(added: Int, damagedDropped: Int, duplicatesDropped: Int, markedDamaged: Int)

    /// A name and its value, as an encoder describes itself.
    public struct Fact: Sendable, Equatable {
        public var name: String
        public var value: String
        public init(_ name: String, _ value: String) {
            self.name = name
            self.value = value
        }
    }

    public var level: LogLevel {
        switch self {
        case .cameraLost(_, _, let restart): restart ? .error : .warning
        case .cameraUnavailable, .sourceStalled, .frameTimesJumped, .microphoneUnavailable, .microphoneFailed,
            .restartNeeded, .hardwareEncoderCannotOpen, .storageUnavailable, .clipHeld, .heldVideoFull, .journalRebuilt,
            .diskFull, .diskLow, .snapshotNotSaved, .latestPictureFailed, .latestPictureWaitsForSpace,
            .clipMovedAside, .clipNotRepaired, .overlayShortened:
            .warning
        case .leftoverRemoved: .info
        case .clipUnfinished: .error
        case .clipRepaired: .info
        case .storageBack, .clipWrittenFromMemory, .diskSpaceAgain: .info
        case .clipNotRecorded, .clipLostWithTheStorage: .error
        case .encoderChosen(_, _, let unsuitable): unsuitable ? .warning : .info
        case .encoding: .info
        case .hardwareEncoderFailed, .hardwareEncoderGivenUp, .encoderFailed: .error
        case .retentionChanged(_, _, _, let deletesMore): deletesMore ? .warning : .info
        case .reloadRefused: .error
        case .cameraOpen, .cameraBack, .endOfSource, .framesAgain, .wallClockMoved, .microphoneOpen: .info
        }
    }

    /// The log line's constant message and its fields.
    public var line: (message: String, fields: [(String, LogValue)]) {
        switch self {
        case .cameraOpen(let source, let format, let attempts):
            ("camera open", Self.camera(source, format, down: 0, attempts: attempts))
        case .cameraBack(let source, let format, let down, let attempts):
            ("camera back", Self.camera(source, format, down: down, attempts: attempts))
        case .cameraUnavailable(let source, let error):
            ("camera unavailable; waiting for it", [("source", .string(source)), ("error", .string(error))])
        case .cameraLost(let source, let error, let restart):
            (
                restart
                    ? "camera lost for this process; closing the clip and stopping so that the service restarts vigil"
                    : "camera lost; closing the clip and retrying",
                [("source", .string(source)), ("error", .string(error))]
            )
        case .endOfSource(let source):
            ("end of source", [("source", .string(source))])
        case .sourceStalled(let seconds, let closingClip):
            ("the source delivered nothing", [("seconds", .seconds(seconds)), ("closing_clip", .bool(closingClip))])
        case .framesAgain:
            ("frames again", [])
        case .frameTimesJumped(let seconds, let closingClip):
            (
                "the frame times jumped; what was recorded ends before the jump and the stream starts afresh",
                [("seconds", .seconds(seconds)), ("closing_clip", .bool(closingClip))]
            )
        case .wallClockMoved(let seconds):
            ("the wall clock moved; clip names and times follow it", [("seconds", .seconds(seconds))])
        case .microphoneOpen(let device, let rate, let channels, let back):
            (
                back ? "microphone back" : "microphone open",
                [("device", .string(device)), ("rate", .int(rate)), ("channels", .int(channels))]
            )
        case .microphoneUnavailable(let device, let error):
            ("microphone unavailable; recording video only", [("device", .string(device)), ("error", .string(error))])
        case .microphoneFailed(let device, let error):
            (
                "microphone failed; recording video only until it is back",
                [("device", .string(device)), ("error", .string(error))]
            )
        case .reloadRefused(let error):
            ("configuration not reloaded; the settings in use are kept", [("error", .string(error))])
        case .retentionChanged(let setting, let old, let new, let deletesMore):
            (
                "retention changed by the reload",
                [
                    ("setting", .string(setting)), ("old", .string(old)), ("new", .string(new)),
                    ("effect", .string(deletesMore ? "deletes more clips" : "keeps more clips")),
                ]
            )
        case .restartNeeded(let changed):
            (
                "these settings take effect after a restart (systemctl restart vigil); the ones in use are kept",
                [("changed", .string(changed.joined(separator: ",")))]
            )
        case .encoderChosen(let backend, let reason, let unsuitable):
            (
                unsuitable ? "encoder chosen: the hardware encoder cannot take this stream" : "encoder chosen",
                [("backend", .string(backend)), ("reason", .string(reason))]
            )
        case .encoding(let width, let height, let pixelFormat, let encoder, let keyframeInterval):
            (
                "encoding",
                [("width", .int(width)), ("height", .int(height)), ("pixel_format", .string(pixelFormat))]
                    + encoder.map { ($0.name, .string($0.value)) } + [("keyframe_interval", .seconds(keyframeInterval))]
            )
        case .hardwareEncoderCannotOpen(let error):
            (
                "the hardware encoder cannot open for this stream; recording with x264 from now on",
                [("error", .string(error))]
            )
        case .hardwareEncoderFailed(let error, let failures):
            (
                "the hardware encoder failed; the clip is closed and the encoder opened again",
                [("error", .string(error)), ("failures_in_10_min", .int(failures))]
            )
        case .hardwareEncoderGivenUp(let failures):
            ("the hardware encoder failed \(failures) times in 10 minutes; recording with x264 from now on", [])
        case .encoderFailed(let error):
            ("encoder failed; stopping", [("error", .string(error))])
        case .storageUnavailable(let path, let error):
            (
                "storage directory unavailable; clips wait for it — is the disk mounted and writable?",
                [("path", .string(path)), ("error", .string(error))]
            )
        case .storageBack(let path, let down, let attempts):
            (
                "storage directory back",
                [("path", .string(path)), ("down", .seconds(down)), ("attempts", .int(attempts))]
            )
        case .clipHeld(let event, let part, let trigger, let path, let memoryBytes):
            (
                "the storage directory is unavailable; the clip is kept in memory until it is back",
                [
                    ("event", .int(event)), ("part", .int(part)), ("trigger", .string(trigger)),
                    ("path", .string(path)), ("memory_bytes", .int(memoryBytes)),
                ]
            )
        case .heldVideoFull(let event, let part, let keptSeconds, let memoryMB, let waiting):
            (
                "the video waiting for the storage directory fills the memory it may take; the rest of this event and the events until the directory is back are not recorded",
                [
                    ("event", .int(event)), ("part", .int(part)), ("kept_seconds", .seconds(keptSeconds)),
                    ("memory_mb", .int(memoryMB)), ("waiting", .int(waiting)),
                ]
            )
        case .clipNotRecorded(let event, let part, let trigger, let path, let memoryMB):
            (
                "clip not recorded: the storage directory is unavailable and the video waiting for it fills the memory it may take",
                [
                    ("event", .int(event)), ("part", .int(part)), ("trigger", .string(trigger)),
                    ("path", .string(path)), ("memory_mb", .int(memoryMB)),
                ]
            )
        case .clipWrittenFromMemory(let file, let event, let part, let bytes):
            (
                "clip written from memory; the storage directory is back",
                [("file", .string(file)), ("event", .int(event)), ("part", .int(part)), ("bytes", .int(bytes))]
            )
        case .clipLostWithTheStorage(let event, let part, let start, let end, let path):
            (
                "clip lost: the storage directory was still unavailable when the agent stopped",
                [
                    ("event", .int(event)), ("part", .int(part)), ("start", .string(start)), ("end", .string(end)),
                    ("path", .string(path)),
                ]
            )
        case .diskFull(let file, let during):
            (
                "disk full while \(during); running retention, keeping the video in memory until there is room",
                [("file", .string(file))]
            )
        case .diskSpaceAgain(let file):
            ("disk space again; the clip goes on", [("file", .string(file))])
        case .diskLow(let path, let freeMB, let minFreeMB, let shortMB):
            (
                "disk space low and deleting clips would not make it up; the clips are kept — free space on this file system or lower storage.min_free_mb",
                [
                    ("path", .string(path)), ("free_mb", .int(freeMB)), ("min_free_mb", .int(minFreeMB)),
                    ("short_mb", .int(shortMB)),
                ]
            )
        case .snapshotNotSaved(let file, let error):
            ("the clip is saved without its snapshot", [("file", .string(file)), ("error", .string(error))])
        case .latestPictureFailed(let path, let error):
            (
                "cannot write latest.jpg; trying again at the next interval",
                [("path", .string(path)), ("error", .string(error))]
            )
        case .latestPictureWaitsForSpace(let path, let minFreeMB):
            (
                "latest.jpg is not replaced while the disk is short of space; clips come first",
                [("path", .string(path)), ("min_free_mb", .int(minFreeMB))]
            )
        case .clipUnfinished(let file, let error):
            (
                "clip could not be finished; repairing what is on disk",
                [("file", .string(file)), ("error", .string(error))]
            )
        case .clipRepaired(let file, let frames):
            ("clip repaired", [("file", .string(file)), ("frames", .int(frames))])
        case .clipMovedAside(let file, let movedTo, let bytes, let error):
            (
                "a clip no player can open was moved aside; its bytes are kept",
                [("file", .string(file)), ("moved_to", .string(movedTo))] + (bytes.map { [("bytes", .int($0))] } ?? [])
                    + [("error", .string(error))]
            )
        case .clipNotRepaired(let file, let error, let moveError):
            (
                "cannot repair a clip; it is left as it is",
                [("file", .string(file)), ("error", .string(error))]
                    + (moveError.map { [("move_error", .string($0))] } ?? [])
            )
        case .leftoverRemoved(let file, let bytes):
            ("removed a file an interrupted write left", [("file", .string(file)), ("bytes", .int(bytes))])
        case .overlayShortened(let pattern, let fit, let drawn):
            (
                "overlay text too wide for the picture; shortened to keep the time (a shorter overlay.text, camera.name or overlay.scale fits)",
                [("pattern", .string(pattern)), ("characters_that_fit", .int(fit)), ("drawn", .string(drawn))]
            )
        case .journalRebuilt(let added, let damagedDropped, let duplicatesDropped, let markedDamaged):
            (
                "events journal rebuilt from the clips on disk",
                [
                    ("added", .int(added)), ("damaged_dropped", .int(damagedDropped)),
                    ("duplicates_dropped", .int(duplicatesDropped)), ("marked_damaged", .int(markedDamaged)),
                ]
            )
        }
    }

    private static func camera(_ source: String, _ format: String, down: Double, attempts: Int) -> [(String, LogValue)]
    {
        [
            ("source", .string(source)), ("format", .string(format)), ("down", .seconds(down)),
            ("attempts", .int(attempts)),
        ]
    }

    /// Writes the notice's line to `log`.
    public func log(to log: Logger) {
        let line = line
        log.log(level, line.message, line.fields)
    }
}
