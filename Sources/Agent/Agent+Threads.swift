import Capture
import Configuration
import FoundationEssentials
import Logging
import Media
import POSIX
import Recorder

/// The agent's threads that feed and tend the pipeline: capture, audio, housekeeping.
extension Agent {
    // MARK: Capture

    /// Opens the source, and says what a camera agreed to.
    func openSource() throws(CaptureError) -> OpenedSource {
        let camera = initial.camera
        let opened = try environment.openSource(camera)
        switch opened.negotiation {
        case .none:
            break
        case .v4l2(let got):
            let path = camera.device.description
            let request = got.request
            let requested = "\(request.width)x\(request.height)@\(DecimalText.rate(request.frameRate))"
            log.info(
                "camera negotiated",
                [
                    ("source", .string(path)), ("card", .string(got.device.card)),
                    ("driver", .string(got.device.driver)),
                    ("requested", .string(requested)),
                    ("pixel_format", .string(got.fourcc.description)), ("converted", .bool(got.isEmulated)),
                    ("size", .string("\(got.width)x\(got.height)")), ("stride", .int(got.bytesPerLine)),
                    ("fps", .string(got.frameRate.map(DecimalText.rate) ?? "driver's own")),
                    ("rate_settable", .bool(got.rateIsSettable)),
                    ("buffers", .int(got.buffers)),
                ])
            if !got.matchesRequest {
                warnNotAsked(
                    source: path, requested: requested,
                    delivered: "\(got.width)x\(got.height)@\(got.frameRate.map(DecimalText.rate) ?? "?")")
            }
        case .libcamera(let got):
            logNegotiated(got, camera: camera)
        }
        return opened
    }

    /// Says what a libcamera camera agreed to, and warns when that is not what was asked.
    private func logNegotiated(_ got: LibcameraNegotiation, camera: Settings.Camera) {
        let requested = "\(camera.width)x\(camera.height)@\(DecimalText.short(camera.fps, 2))"
        let delivered = got.frameDuration.map { 1e9 / Double($0.nanoseconds) }
        let fps = delivered.map { DecimalText.short($0, 2) }
        log.info(
            "camera negotiated",
            [
                ("source", .string(camera.device.description)), ("camera", .string(got.camera)),
                ("requested", .string(requested)), ("pixel_format", .string(got.pixelFormat)),
                ("size", .string("\(got.width)x\(got.height)")), ("stride", .int(got.stride)),
                ("fps", .string(fps ?? "camera's own")), ("autofocus", .bool(got.autofocus)),
                ("copied", .string(got.copied ?? "no")), ("buffers", .int(got.buffers)),
                ("libcamera", .string(got.libcameraVersion)),
            ])
        // A camera without FrameDurationLimits runs at its own rate, as the line above says.
        let rateMatches = delivered.map { abs($0 - camera.fps) < 0.01 } ?? true
        if got.width != camera.width || got.height != camera.height || !rateMatches {
            warnNotAsked(
                source: camera.device.description, requested: requested,
                delivered: "\(got.width)x\(got.height)@\(fps ?? "?")")
        }
    }

    /// The one warning for a camera, V4L2 or libcamera, that gives another size or rate than
    /// `camera.*` asks.
    private func warnNotAsked(source: String, requested: String, delivered: String) {
        log.warning(
            "the camera does not offer the requested size or rate; clips use what it delivers (`vigil probe` lists its modes)",
            [("source", .string(source)), ("requested", .string(requested)), ("delivered", .string(delivered))])
    }

    /// The capture thread: frames into the queue until the source ends or the agent stops.
    /// A live source never waits: when the pipeline is behind, the oldest queued frame is dropped.
    /// A camera that fails is closed and reopened as `Retry` says; the open clip is closed meanwhile.
    func capture(_ first: (any FrameSource)?, into queue: WorkQueue<CaptureItem>, live: Bool, sinks: EventSinks) {
        var retry = Retry(maximum: .init(seconds: 30))
        if first == nil { _ = retry.failed(at: environment.monotonicNow()) }
        guard var source = first ?? reopen(&retry, firstTime: true, sinks: sinks) else {
            queue.push(.end(nil))
            return
        }
        var lastSequence: UInt64?
        // YUYV and 4:2:2 become 4:2:0 here, once, for both the detector and the encoder.
        var converter = PlanarConverter(input: source.format)
        let isCamera = initial.camera.device.isCamera
        while !stopping.load(ordering: .relaxed) {
            let frame: VideoFrame?
            do { frame = try source.nextFrame().map(converter.convert) } catch {
                guard isCamera else {
                    log.error(
                        "reading the source failed",
                        [("source", .string(source.name)), ("error", .string(error.description))])
                    queue.push(.end(error))
                    return
                }
                let restart = if case .needsRestart = error { true } else { false }
                notify(.cameraLost(source: source.name, error: error.description, restart: restart), sinks)
                if restart {
                    queue.push(.end(error))
                    return
                }
                cameraDownSince.withLock { $0 = $0 ?? environment.wallNow() }
                queue.push(.interrupted)
                _ = retry.failed(at: environment.monotonicNow())
                guard let back = reopen(&retry, firstTime: false, sinks: sinks) else { break }
                source = back
                converter = PlanarConverter(input: source.format)
                lastSequence = nil
                continue
            }
            guard let frame else {
                notify(.endOfSource(source: source.name), sinks)
                queue.push(.end(nil))
                return
            }
            if let last = lastSequence, frame.sequence > last + 1 {
                stats.update { $0.framesLostAtSource += Int(frame.sequence - last - 1) }
            }
            lastSequence = frame.sequence
            if live {
                if queue.count >= queue.capacity,
                    queue.dropOldest(where: { if case .frame = $0 { true } else { false } }) != nil
                {
                    stats.update { $0.framesDroppedAtCapture += 1 }
                }
                queue.push(.frame(frame))
            } else {
                queue.pushWaiting(.frame(frame))
            }
        }
        queue.push(.end(nil))
    }

    /// Reopens the camera as `retry` says (it was lost, or never there), logging its return
    /// once; nil when the agent is stopping.
    func reopen(_ retry: inout Retry, firstTime: Bool, sinks: EventSinks) -> (any FrameSource)? {
        while !stopping.load(ordering: .relaxed) {
            sleepUnlessStopping(retry.delay.seconds)
            guard !stopping.load(ordering: .relaxed) else { return nil }
            do {
                let source = try openSource().source
                cameraDownSince.withLock { $0 = nil }
                let back = retry.succeeded(at: environment.monotonicNow())
                let name = source.name
                let format = source.format.description
                let attempts = back?.tries ?? 1
                notify(
                    firstTime
                        ? .cameraOpen(source: name, format: format, attempts: attempts)
                        : .cameraBack(source: name, format: format, down: back?.down.seconds ?? 0, attempts: attempts),
                    sinks)
                return source
            } catch {
                let failure = retry.failed(at: environment.monotonicNow())
                log.debug(
                    "camera still unavailable",
                    [("error", .string(error.description)), ("retry_in", .seconds(failure.retryIn.seconds))])
            }
        }
        return nil
    }

    /// Logs `notice` and hands it to the sinks.
    func notify(_ notice: Notice, _ sinks: EventSinks) {
        notice.log(to: log)
        sinks.handle(.notice(notice))
    }

    /// Waits `seconds`, returning at once when the agent stops.
    func sleepUnlessStopping(_ seconds: Double) {
        environment.pause(seconds, stopToken)
    }

    /// The audio thread: microphone chunks into the pipeline's queue (never dropped: they are
    /// small). A microphone that cannot be opened or fails leaves clips with video only; it
    /// is retried as `Retry` says, and each change is logged once.
    func captureAudio(into queue: WorkQueue<CaptureItem>, sinks: EventSinks) {
        let audio = initial.audio
        var retry = Retry(maximum: .init(seconds: 60))
        while !stopping.load(ordering: .relaxed) {
            let microphone: any AudioSource
            do {
                microphone = try environment.openMicrophone(audio, log)
            } catch {
                if retry.failed(at: environment.monotonicNow()).isFirst {
                    notify(.microphoneUnavailable(device: audio.device, error: error.description), sinks)
                }
                sleepUnlessStopping(retry.delay.seconds)
                continue
            }
            let wasFailing = retry.succeeded(at: environment.monotonicNow()) != nil
            notify(
                .microphoneOpen(
                    device: microphone.name, rate: microphone.sampleRate, channels: microphone.channels,
                    back: wasFailing),
                sinks)
            // Overruns of microphones opened before, so the count only grows.
            let overrunsBefore = stats.snapshot.audioOverruns
            while !stopping.load(ordering: .relaxed) {
                do {
                    guard let chunk = try microphone.read() else { break }
                    queue.push(.audio(chunk), cost: 0)
                    let total = overrunsBefore + microphone.overruns
                    stats.update { $0.audioOverruns = total }
                } catch {
                    notify(.microphoneFailed(device: microphone.name, error: error.description), sinks)
                    _ = retry.failed(at: environment.monotonicNow())
                    sleepUnlessStopping(retry.delay.seconds)
                    break
                }
            }
        }
    }

    // MARK: Housekeeping

    /// Every minute: retention; every stats interval: the stats line (and the `stats` event);
    /// and the watchdog ping while frames keep coming.
    func startHousekeeping(writer: WorkQueue<WriterItem>, sinks: EventSinks) {
        let notifier = environment.notifier
        startThread("housekeeping") { [self] in
            var previous = stats.snapshot
            var lastStats = environment.monotonicNow()
            var lastSweep = lastStats
            var lastFrames = previous.framesIn
            var lastPing = lastStats
            var wait = 0.0
            // Woken when the next task is due, by a reload (the stats interval may have
            // changed) and by the stop.
            while !housekeepingWake.wait(seconds: wait) {
                let now = environment.monotonicNow()
                let current = stats.snapshot
                let watchdogInterval = notifier?.watchdogInterval
                if let interval = watchdogInterval, (now - lastPing).seconds >= interval {
                    // Only while the pipeline makes progress: a stall lets systemd restart us.
                    if current.framesIn != lastFrames { notifier?.watchdog() }
                    lastFrames = current.framesIn
                    lastPing = now
                }
                if (now - lastSweep).seconds >= Agent.sweepInterval {
                    writer.push(.housekeeping, cost: 0)
                    lastSweep = now
                }
                let statsInterval = self.current.withLock({ $0.log.statsInterval }).map(Double.init)
                if let statsInterval, (now - lastStats).seconds >= statsInterval {
                    var report = StatsReport(
                        now: stats.closeInterval(), previous: previous, seconds: (now - lastStats).seconds)
                    report.uploadWaiting = uploads?.uploadCounts.waiting
                    log.info("stats", Stats.line(report))
                    sinks.handle(.stats(report))
                    previous = report.now
                    lastStats = now
                }
                let due = [
                    watchdogInterval.map { (lastPing - now).seconds + $0 },
                    (lastSweep - now).seconds + Agent.sweepInterval,
                    statsInterval.map { (lastStats - now).seconds + $0 },
                ]
                wait = max(0.001, due.compactMap { $0 }.min() ?? Agent.sweepInterval)
            }
        }
    }

    /// Retention is applied this often (and after each clip).
    static let sweepInterval = 60.0
}
