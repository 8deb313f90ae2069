import Capture
import Configuration
import FoundationEssentials
import Glibc
import Logging
import Media
import QuickTime
import Recorder
import Storage
import Synchronization

/// The running agent: its threads, their start-up and their orderly stop.
public final class Agent: @unchecked Sendable {
    // `@unchecked Sendable`: the threads share only `stop` (atomic), `stats`, the queues and the
    // pipeline's reload slot (all synchronised); everything else is set before they start.
    /// How a run ended.
    public enum Outcome: Sendable, Equatable {
        /// Stopped by a signal, or the file source was read to its end (exit 0).
        case stopped
        /// The source could not be opened at start (exit 66).
        case sourceCannotOpen
        /// The storage directory could not be created (exit 73).
        case storageCannotBeCreated
        /// The file source turned out malformed part-way; the clips before are kept (exit 65).
        case sourceFailed
    }

    private let configPath: String
    private let version: String
    /// The settings the agent started with. Camera, encoder and audio keep them until a
    /// restart; a reload reaches the pipeline and the writer through their own channels.
    private let settings: Settings
    /// Makes the encoder once the source's format is known.
    private let encoders: any VideoEncoderFactory
    private let log: Logger
    private let stats = Stats()
    private let notifier = SystemdNotifier()
    private let stop = Atomic<Bool>(false)
    /// How long a stop waits for the source to notice before ending the stream without it.
    static let stopGrace = 2.0
    private let done = Event()

    public init(configPath: String, settings: Settings, encoders: any VideoEncoderFactory, version: String) {
        self.configPath = configPath
        self.version = version
        self.settings = settings
        self.encoders = encoders
        log = Logger(level: settings.log.level, sink: StderrLogSink(), metadata: [("camera", .string(settings.camera.name))])
    }

    public func run() -> Outcome {
        Signals.block()
        log.info("vigil starting", [("version", .string(version)), ("config", .string(configPath)), ("source", .string(settings.camera.device.description)),
                                    ("storage", .string(settings.storage.path))])

        // Storage: create it, finish clips an earlier run left open, apply retention.
        do {
            try FileManager.default.createDirectory(atPath: settings.storage.path, withIntermediateDirectories: true)
        } catch {
            log.error("cannot create the storage directory — check storage.path and that this user may write there",
                      [("path", .string(settings.storage.path)), ("error", .string(describeFileError(error)))])
            return .storageCannotBeCreated
        }
        let storage = storageSettings(settings)
        repairInterruptedClips(storage)
        let hooks = HookRunner(timeout: settings.hooks.timeout, log: log)
        let clipWriter = ClipWriter(storage: storage, camera: settings.camera.name, log: log, stats: stats, hooks: hooks)
        clipWriter.sweep()

        // The source: opened before anything starts, so a bad one is reported at once. A
        // camera that is not there yet (a USB camera still enumerating at boot, or unplugged)
        // is waited for, as one that goes away later is.
        let source: (any FrameSource)?
        let live: Bool
        do {
            let (opened, isLive) = try openSource(settings)
            (source, live) = (opened, isLive)
            log.info("source open", [("source", .string(opened.name)), ("format", .string(opened.format.description))])
        } catch {
            guard case .device = settings.camera.device else {
                log.error("cannot open the source", [("source", .string(settings.camera.device.description)), ("error", .string(error.description))])
                return .sourceCannotOpen
            }
            log.warning("camera unavailable; waiting for it", [("source", .string(settings.camera.device.description)), ("error", .string(error.description))])
            (source, live) = (nil, true)
        }

        let frames = WorkQueue<CaptureItem>(capacity: live ? 3 : 8)
        let writerQueue = WorkQueue<WriterItem>(capacity: Int.max)
        let pipeline = Pipeline(settings: settings, encoders: encoders, log: log, stats: stats, writer: writerQueue)

        let writerThread = startThread("writer") { clipWriter.run(writerQueue) }
        let sourceError = Mutex<CaptureError?>(nil)
        startThread("pipeline") { [self] in
            let error = pipeline.run(frames, wallClock: { Date() })
            sourceError.withLock { $0 = error }
            writerQueue.close()
            done.signal()
        }
        let handedOver = HandOver(source)
        let captureThread = startThread("capture") { [self] in capture(handedOver.value, into: frames, live: live) }
        if settings.audio.enabled {
            _ = startThread("audio") { [self] in captureAudio(into: frames) }
        }

        Signals.startWaiting { [self] signal in
            if signal == SIGHUP {
                reload(pipeline: pipeline, writer: writerQueue)
            } else {
                log.info("stopping", [("signal", .string(Signals.name(signal)))])
                notifier.stopping()
                stop.store(true, ordering: .relaxed)
                // A source stuck inside a read (a pipe that stalled, a hung driver) never sees
                // the stop: after a grace period the stream is ended without it.
                startThread("stop") { [self] in
                    guard !captureThread.join(timeout: Agent.stopGrace) else { return }
                    log.warning("the source did not stop; finishing without it", [("source", .string(settings.camera.device.description)),
                                                                                 ("waited", .seconds(Agent.stopGrace))])
                    frames.push(.end(nil))
                    frames.close()
                }
            }
        }
        startHousekeeping(writer: writerQueue)
        notifier.ready(status: source.map { "recording from \($0.name)" } ?? "waiting for the camera \(settings.camera.device)")
        log.info("vigil running")

        done.wait()
        if !stop.load(ordering: .relaxed) { notifier.stopping() } // the source ended; a signal already said so
        writerThread.join()
        _ = captureThread.join(timeout: Agent.stopGrace) // a source stuck in a read goes with the process
        hooks.drain(seconds: min(settings.hooks.timeout + 1, 5))
        let counters = stats.snapshot
        log.info("vigil stopped", [("frames", .int(counters.framesIn)), ("lost_at_source", .int(counters.framesLostAtSource)),
                                   ("dropped_at_capture", .int(counters.framesDroppedAtCapture)), ("dropped_at_writer", .int(counters.samplesDroppedAtWriter)),
                                   ("clips", .int(counters.clipsWritten)), ("clip_errors", .int(counters.clipErrors))])
        if let error = sourceError.withLock({ $0 }) {
            log.error("the source failed", [("error", .string(error.description))])
            return .sourceFailed
        }
        return .stopped
    }

    private func storageSettings(_ s: Settings) -> StorageSettings {
        StorageSettings(root: s.storage.path,
                        naming: ClipNaming(pattern: s.storage.filePattern, camera: s.camera.name),
                        policy: RetentionPolicy(maxAgeDays: s.storage.maxAgeDays, maxSize: s.storage.maxSize, minFree: s.storage.minFree),
                        onEventStart: s.hooks.onEventStart, onClipSaved: s.hooks.onClipSaved)
    }

    private func openSource(_ s: Settings) throws(CaptureError) -> (any FrameSource, live: Bool) {
        switch s.camera.device {
        case .synthetic:
            let rate = Rational(framesPerSecond: s.camera.fps)
            // Timestamped on the monotonic clock, as a camera's frames are, so sound lines up.
            let scene = SyntheticScene(width: s.camera.width, height: s.camera.height, frameRate: rate, schedule: .demo(),
                                       startTime: MonotonicClock.now())
            // The synthetic scene stands in for a camera: always in real time.
            return (try SyntheticSource(scene: scene, realtime: true), true)
        case .file(let path):
            return (try Y4MSource(path: path, realtime: s.camera.realtime), s.camera.realtime)
        case .device(let path):
            let request = CameraRequest(width: s.camera.width, height: s.camera.height, fps: s.camera.fps)
            let camera = try V4L2Camera(path: path, request: request)
            let got = camera.negotiation
            log.info("camera negotiated", [("source", .string(path)), ("card", .string(got.device.card)), ("driver", .string(got.device.driver)),
                                           ("requested", .string("\(request.width)x\(request.height)@\(DecimalText.rate(request.frameRate))")),
                                           ("pixel_format", .string(got.fourcc.description)), ("converted", .bool(got.isEmulated)),
                                           ("size", .string("\(got.width)x\(got.height)")), ("stride", .int(got.bytesPerLine)),
                                           ("fps", .string(got.frameRate.map(DecimalText.rate) ?? "driver's own")), ("rate_settable", .bool(got.rateIsSettable)),
                                           ("buffers", .int(got.buffers))])
            if !got.matchesRequest {
                log.warning("the camera does not offer the requested size or rate; clips use what it delivers (`vigil probe` lists its modes)",
                            [("source", .string(path)), ("requested", .string("\(request.width)x\(request.height)@\(DecimalText.rate(request.frameRate))")),
                             ("delivered", .string("\(got.width)x\(got.height)@\(got.frameRate.map(DecimalText.rate) ?? "?")"))])
            }
            return (camera, true)
        }
    }

    /// The capture thread: frames into the queue until the source ends or the agent stops.
    /// A live source never waits: when the pipeline is behind, the oldest queued frame is dropped.
    /// A camera that fails is closed and reopened with backoff; the open clip is closed meanwhile.
    private func capture(_ first: (any FrameSource)?, into queue: WorkQueue<CaptureItem>, live: Bool) {
        guard var source = first ?? reopen(firstTime: true) else {
            queue.push(.end(nil))
            return
        }
        var lastSequence: UInt64?
        // YUYV and 4:2:2 become 4:2:0 here, once, for both the detector and the encoder.
        var converter = PlanarConverter(input: source.format)
        let isCamera: Bool = if case .device = settings.camera.device { true } else { false }
        while !stop.load(ordering: .relaxed) {
            let frame: VideoFrame?
            do { frame = try source.nextFrame().map(converter.convert) } catch {
                guard isCamera else {
                    log.error("reading the source failed", [("source", .string(source.name)), ("error", .string(error.description))])
                    queue.push(.end(error))
                    return
                }
                log.warning("camera lost; closing the clip and retrying", [("source", .string(source.name)), ("error", .string(error.description))])
                queue.push(.interrupted)
                guard let back = reopen(firstTime: false) else { break }
                source = back
                converter = PlanarConverter(input: source.format)
                lastSequence = nil
                continue
            }
            guard let frame else {
                log.info("end of source", [("source", .string(source.name))])
                queue.push(.end(nil))
                return
            }
            if let last = lastSequence, frame.sequence > last + 1 {
                stats.update { $0.framesLostAtSource += Int(frame.sequence - last - 1) }
            }
            lastSequence = frame.sequence
            if live {
                if queue.count >= queue.capacity, queue.dropOldest(where: { if case .frame = $0 { true } else { false } }) != nil {
                    stats.update { $0.framesDroppedAtCapture += 1 }
                }
                queue.push(.frame(frame))
            } else {
                queue.pushWaiting(.frame(frame))
            }
        }
        queue.push(.end(nil))
    }

    /// Reopens the camera with backoff (1 s doubling to 30 s), logging the outage once and
    /// the return once; nil when the agent is stopping.
    private func reopen(firstTime: Bool) -> (any FrameSource)? {
        let lostAt = MonotonicClock.now()
        var delay = 1.0
        var attempts = 0
        while !stop.load(ordering: .relaxed) {
            sleepUnlessStopping(delay)
            guard !stop.load(ordering: .relaxed) else { return nil }
            attempts += 1
            do {
                let (source, _) = try openSource(settings)
                log.info(firstTime ? "camera open" : "camera back", [("source", .string(source.name)), ("format", .string(source.format.description)),
                                         ("down", .seconds((MonotonicClock.now() - lostAt).seconds)), ("attempts", .int(attempts))])
                return source
            } catch {
                log.debug("camera still unavailable", [("error", .string(error.description)), ("retry_in", .seconds(min(delay * 2, 30)))])
                delay = min(delay * 2, 30)
            }
        }
        return nil
    }

    private func sleepUnlessStopping(_ seconds: Double) {
        let until = MonotonicClock.now() + .init(seconds: seconds)
        while !stop.load(ordering: .relaxed) && MonotonicClock.now() < until { usleep(50_000) }
    }

    /// The audio thread: microphone chunks into the pipeline's queue (never dropped: they are
    /// small). A microphone that cannot be opened or fails leaves clips with video only; it
    /// is retried with backoff, and each change is logged once.
    private func captureAudio(into queue: WorkQueue<CaptureItem>) {
        var delay = 1.0
        var failing = false
        while !stop.load(ordering: .relaxed) {
            let microphone: any AudioSource
            do {
                microphone = try openMicrophone(settings)
            } catch {
                if !failing {
                    log.warning("microphone unavailable; recording video only", [("device", .string(settings.audio.device)), ("error", .string(error.description))])
                    failing = true
                }
                sleepUnlessStopping(delay)
                delay = min(delay * 2, 60)
                continue
            }
            log.info(failing ? "microphone back" : "microphone open", [("device", .string(microphone.name)), ("rate", .int(microphone.sampleRate)),
                                                                      ("channels", .int(microphone.channels))])
            failing = false
            delay = 1.0
            // Overruns of microphones opened before, so the count only grows.
            let overrunsBefore = stats.snapshot.audioOverruns
            while !stop.load(ordering: .relaxed) {
                do {
                    guard let chunk = try microphone.read() else { break }
                    queue.push(.audio(chunk), cost: 0)
                    if let alsa = microphone as? ALSAMicrophone {
                        let total = overrunsBefore + alsa.overruns
                        stats.update { $0.audioOverruns = total }
                    }
                } catch {
                    log.warning("microphone failed; recording video only until it is back", [("device", .string(microphone.name)), ("error", .string(error.description))])
                    failing = true
                    break
                }
            }
        }
    }

    private func openMicrophone(_ s: Settings) throws(CaptureError) -> any AudioSource {
        if s.audio.device == "synthetic" {
            return SyntheticAudioSource(sampleRate: s.audio.rate, channels: s.audio.channels)
        }
        let microphone = try ALSAMicrophone(device: s.audio.device, sampleRate: s.audio.rate, channels: s.audio.channels)
        log.info("microphone negotiated", [("device", .string(microphone.name)), ("rate", .int(microphone.sampleRate)),
                                           ("requested_rate", .int(microphone.requestedRate)), ("channels", .int(microphone.channels)),
                                           ("period_frames", .int(microphone.periodFrames)), ("buffer_frames", .int(microphone.bufferFrames)),
                                           ("driver_timestamps", .bool(microphone.driverTimestamps))])
        return microphone
    }

    private func reload(pipeline: Pipeline, writer: WorkQueue<WriterItem>) {
        notifier.reloading()
        defer { notifier.ready(status: "configuration reloaded") }
        let new: Settings
        do { new = try Settings.load(path: configPath) } catch {
            log.error("configuration not reloaded; the settings in use are kept", [("error", .string(error.description))])
            return
        }
        if new.camera != settings.camera || new.encoder != settings.encoder || new.audio != settings.audio {
            log.warning("camera, encoder and audio settings take effect after a restart (systemctl restart vigil)")
        }
        log.level = new.log.level
        pipeline.pendingReload.withLock { $0 = new }
        writer.push(.storage(storageSettings(new)), cost: 0)
        log.info("configuration reloaded; it applies from the next clip", [("config", .string(configPath))])
    }

    /// Every minute: retention; every stats interval: the stats line; and the watchdog ping
    /// while frames keep coming.
    private func startHousekeeping(writer: WorkQueue<WriterItem>) {
        let statsInterval = settings.log.statsInterval
        _ = startThread("housekeeping") { [self] in
            var previous = stats.snapshot
            var lastStats = MonotonicClock.now()
            var lastSweep = MonotonicClock.now()
            var lastFrames = previous.framesIn
            var lastPing = MonotonicClock.now()
            while !stop.load(ordering: .relaxed) {
                usleep(250_000)
                let now = MonotonicClock.now()
                let current = stats.snapshot
                if let interval = notifier.watchdogInterval, (now - lastPing).seconds >= interval {
                    // Only while the pipeline makes progress: a stall lets systemd restart us.
                    if current.framesIn != lastFrames { notifier.watchdog() }
                    lastFrames = current.framesIn
                    lastPing = now
                }
                if (now - lastSweep).seconds >= 60 {
                    writer.push(.housekeeping, cost: 0)
                    lastSweep = now
                }
                if let statsInterval, (now - lastStats).seconds >= Double(statsInterval) {
                    log.info("stats", Stats.line(current, since: previous, seconds: (now - lastStats).seconds))
                    previous = current
                    lastStats = now
                }
            }
        }
    }

    private func repairInterruptedClips(_ storage: StorageSettings) {
        let store = ClipStore(root: storage.root, naming: storage.naming)
        guard let clips = try? store.clips() else { return }
        for clip in clips {
            let path = store.absolutePath(clip.relativePath)
            do {
                // Nil for a complete clip: repair looks before it touches anything.
                if let report = try MovieRepair.repair(path: path) {
                    log.info("repaired an interrupted clip", [("file", .string(clip.relativePath)), ("fragments", .int(report.fragments)),
                                                            ("frames", .int(report.videoFrames)), ("cut_bytes", .int(report.discardedBytes))])
                    // Its journal line was never written: what the file says goes in, marked as
                    // repaired (the trigger and score died with the process that knew them).
                    let record = ClipRecord(
                        file: clip.relativePath, camera: settings.camera.name,
                        start: ClipRecord.timestamp(report.created),
                        end: ClipRecord.timestamp(report.created.addingTimeInterval(report.videoDuration.seconds)),
                        trigger: nil, triggerSourceSeconds: nil, preRollSeconds: nil,
                        durationSeconds: report.videoDuration.seconds.rounded(toPlaces: 3), frames: report.videoFrames,
                        audioFrames: report.audioFrames, bytes: report.bytes, peakScore: nil, part: nil, repaired: true)
                    do { try EventsJournal(directory: storage.root).append(record) } catch {
                        log.error("events journal not written", [("error", .string(error.description))])
                    }
                }
            } catch where error.kind == .nothingRecorded {
                // Killed between creating the file and its first fragment: no video, nothing
                // a player could open. It is ours (its name is), so it goes.
                do {
                    try store.delete(clip)
                    log.info("removed an interrupted clip with no video in it", [("file", .string(clip.relativePath)), ("bytes", .int(clip.size))])
                } catch {
                    log.warning("cannot remove an interrupted clip with no video in it", [("file", .string(clip.relativePath)), ("error", .string(error.description))])
                }
            } catch {
                log.warning("cannot repair a clip; it is left as it is", [("file", .string(clip.relativePath)), ("error", .string(error.problem))])
            }
        }
    }
}

/// A value handed to exactly one other thread, which alone uses it from then on.
/// `@unchecked Sendable`: the hand-over is the only sharing; the creator does not touch it again.
final class HandOver<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}
