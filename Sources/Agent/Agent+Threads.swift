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
    /// A camera that fails is closed and reopened as `CameraCapture` says (its steps are this
    /// thread's logic); the open clip is closed meanwhile.
    func capture(_ first: (any FrameSource)?, into queue: WorkQueue<CaptureItem>, live: Bool, sinks: EventSinks) {
        let clock = environment.clock
        let camera = CameraCapture(
            first: first, isCamera: initial.camera.device.isCamera,
            open: { [self] () throws(CaptureError) in
                try openSource().source
            }, log: log, notify: { [self] in notify($0, sinks) }, at: clock.now())
        while !stopping.load(ordering: .relaxed) {
            switch camera.next(at: clock.now()) {
            case .frame(let frame, let lost):
                if lost > 0 { stats.update { $0.framesLostAtSource += lost } }
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
            case .interrupted:
                cameraDownSince.withLock { $0 = $0 ?? environment.wallNow() }
                queue.push(.interrupted)
            case .opened:
                // Back: `vigil trigger` is answered again.
                cameraDownSince.withLock { $0 = nil }
            case .wait(let until):
                // Until the next try, or the stop.
                stopToken.wait(seconds: (until - clock.now()).seconds)
            case .end(let error):
                queue.push(.end(error))
                return
            }
        }
        queue.push(.end(nil))
    }

    /// Logs `notice` and hands it to the sinks.
    func notify(_ notice: Notice, _ sinks: EventSinks) {
        notice.log(to: log)
        sinks.handle(.notice(notice))
    }

    /// The audio thread: microphone chunks into the pipeline's queue (never dropped: they are
    /// small). A microphone that cannot be opened or fails leaves clips with video only; it
    /// is retried as `MicrophoneCapture` says, and each change is logged once.
    func captureAudio(into queue: WorkQueue<CaptureItem>, sinks: EventSinks) {
        let clock = environment.clock
        let microphone = MicrophoneCapture(
            initial.audio, open: environment.openMicrophone, stats: stats, log: log,
            notify: { [self] in notify($0, sinks) })
        while !stopping.load(ordering: .relaxed) {
            switch microphone.next(at: clock.now()) {
            case .chunk(let chunk): queue.push(.audio(chunk), cost: 0)
            case .wait(let until): stopToken.wait(seconds: (until - clock.now()).seconds)
            }
        }
    }

    // MARK: Housekeeping

    /// Every minute: retention; every stats interval: the stats line (and the `stats` event);
    /// and the watchdog ping while frames keep coming — `Housekeeping`'s steps, each when it is
    /// due.
    func startHousekeeping(writer: WorkQueue<WriterItem>, sinks: EventSinks) {
        let notifier = environment.notifier
        let clock = environment.clock
        let housekeeping = Housekeeping(
            stats: stats, log: log, uploads: uploads, watchdogInterval: notifier?.watchdogInterval,
            statsInterval: { [self] in current.withLock({ $0.log.statsInterval }).map(Double.init) },
            at: clock.now())
        startThread("housekeeping") { [self] in
            var wait = 0.0
            // Woken when the next task is due, by a reload (the stats interval may have
            // changed) and by the stop.
            while !housekeepingWake.wait(seconds: wait) {
                for output in housekeeping.step(at: clock.now()) {
                    switch output {
                    case .writer(let item): writer.push(item, cost: 0)
                    case .event(let event): sinks.handle(event)
                    case .watchdog: notifier?.watchdog()
                    }
                }
                wait = max(0.001, (housekeeping.due - clock.now()).seconds)
            }
        }
    }
}
