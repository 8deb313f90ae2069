import Capture
import Configuration
import FoundationEssentials
import Logging
import Media
import POSIX
import Recorder
import Synchronization

/// The running agent: its threads, their start-up and their orderly stop.
///
/// Threads and the queues between them (docs/ARCHITECTURE.md's table lists every thread):
///
///     capture ──frames──▶ WorkQueue<CaptureItem> ──▶ pipeline ──commands──▶ WorkQueue<WriterItem> ──▶ writer
///     audio  ──chunks──▶        (3 frames live,      (Pipeline.step) (bounded by bytes:     (ClipWriter.step)
///                               8 from a file)                  64 MB, then GOPs
///                                                               are dropped)
///     housekeeping (stats, retention every minute, watchdog: `Housekeeping`) ──▶ writer queue
///     signals (SIGTERM/SIGINT stop, SIGHUP reload), trigger (`vigil trigger`'s socket),
///     stop (the grace for a stuck source), mqtt (MQTTSink's), hook (one per running hook)
///
/// The stop, whether asked for (`stop`, SIGTERM, SIGINT) or because the source ended, is one
/// sequence, in this order (docs/ARCHITECTURE.md repeats it):
///
/// 1. **Capture stops.** The stop flag is set and the stop token stopped: the capture and audio
///    threads leave their loops at the next frame or chunk (a wait between tries ends at once),
///    and capture queues `.end`; housekeeping ends. A source stuck in a read (a stalled pipe, a
///    hung driver) is given `stopGrace` (the stop thread); then `.end` is queued without it.
/// 2. **The pipeline drains.** It takes what is queued, in order, flushes the encoder, ends an
///    open event (its post-roll cut short), sends the open clip's last GOP and its close, and
///    closes the writer queue.
/// 3. **The trigger socket closes.** `vigil trigger` is answered no more; the socket is removed.
/// 4. **The writer drains.** It writes and syncs the last fragments, indexes the clip and hides
///    the fragments (`MovieFinish`), sends `clipSaved` (the journal line, the hook), and exits.
/// 5. **The sinks finish, side by side**, each on a thread of its own, within
///    `EventSinks.finishSeconds` (1.5 s) whatever the network does: running hooks get a second
///    (or less: their own `hooks.timeout`), then those still running are killed (SIGTERM to the
///    process group, SIGKILL half a second later) and each is logged, so no hook outlives the
///    agent; MQTT delivers what it can of its queue, then "offline"; an upload under way is
///    cut (it starts again next time); the web server ends its streams and connections; the
///    RTSP server closes its clients' sessions and stops its loop.
/// 6. **The last line.** "vigil stopped" with the totals; the outcome says how it ended.
public final class Agent: @unchecked Sendable {
    // `@unchecked Sendable`: the threads share only `stopping` (atomic), `stats`, the queues,
    // the pipeline's reload slot and `settings` (behind a Mutex); everything else is set before
    // they start.

    /// How a run ended.
    public enum Outcome: Sendable, Equatable {
        /// Stopped by a signal, or the file source was read to its end (exit 0).
        case stopped
        /// The source could not be opened at start (exit 66).
        case sourceCannotOpen
        /// The storage directory could not be created (exit 73).
        case storageCannotBeCreated
        /// Another agent records into the storage directory (exit 75); its pid when it said.
        case storageInUse(pid: Int32?)
        /// Another agent on this machine records a camera of the same `camera.name` (exit 75):
        /// they would share `vigil trigger`'s socket and the MQTT topics. Its pid when it said.
        case cameraInUse(pid: Int32?)
        /// The file source turned out malformed part-way; the clips before are kept (exit 65).
        case sourceFailed
    }

    let configPath: String
    let version: String
    /// The settings the agent started with: camera, encoder and audio keep them until a
    /// restart. A reload reaches the pipeline, the writer and the sinks through their own channels.
    let initial: Settings
    /// The settings in effect (after reloads).
    let current: Mutex<Settings>
    let environment: AgentEnvironment
    let log: Logger
    let stats = Stats()
    /// The encoded stream for live viewers, which the pipeline thread publishes into (a sink
    /// opens it: the web server). Its GOPs and streams are numbered on from the wall clock's
    /// milliseconds at the start, so HLS's media sequence never goes back across a restart.
    let live: LiveFeed
    /// The upload queue, when one of the sinks sends clips: what retention keeps, what the
    /// stats line counts, what the sinks are told.
    let uploads: (any UploadStatus)?
    /// The sinks a sink's own thread hands events to (`SinkContext.announce`): the run's, from
    /// its start until they finish (step 5).
    let announcing = Mutex<EventSinks?>(nil)
    let stopping = Atomic<Bool>(false)
    /// What waits between tries (a camera, a microphone) wait on: a stop ends them at once.
    let stopToken = StopToken()
    /// What the housekeeping thread waits on: stopped with the agent, rung by a reload (the
    /// stats interval may have changed).
    let housekeepingWake = StopToken()
    let graceStarted = Atomic<Bool>(false)
    /// Since when the camera delivers no frames (missing at start, or lost); nil while it does.
    /// `vigil trigger` is refused meanwhile.
    let cameraDownSince = Mutex<Date?>(nil)
    /// Set when the run has its threads and queues: what `stop` and `reload` act on.
    private let running = Mutex<Running?>(nil)
    /// How long a stop waits for the source to notice before ending the stream without it.
    static let stopGrace = 2.0

    private struct Running: Sendable {
        var frames: WorkQueue<CaptureItem>
        var writer: WorkQueue<WriterItem>
        var pipeline: Pipeline
        var captureThread: JoinableThread
        var sinks: EventSinks
    }

    public init(configPath: String, settings: Settings, version: String, environment: AgentEnvironment) {
        self.configPath = configPath
        self.version = version
        initial = settings
        current = Mutex(settings)
        self.environment = environment
        live = LiveFeed(numberedFrom: LiveFeed.numbering(wallSeconds: environment.wallNow().timeIntervalSince1970))
        log = environment.log
        uploads = environment.sinks.lazy.compactMap { $0 as? any UploadStatus }.first
        environment.control.attachCamera { [weak self] in self?.noCamera() }
    }

    /// Records until the source ends or `stop` is called (or, with `handlesSignals`, SIGTERM or
    /// SIGINT); SIGHUP (or `reload`) reloads the configuration meanwhile.
    public func run() -> Outcome {
        if environment.handlesSignals { Signals.block() }
        let settings = initial
        log.info(
            "vigil starting",
            [
                ("version", .string(version)), ("config", .string(configPath)),
                ("source", .string(settings.camera.device.description)),
                ("storage", .string(settings.storage.path)),
            ])

        // The camera's name on this machine, before anything else: a second agent with the
        // same name would share the trigger socket and the MQTT topics.
        var claimed: TriggerSocket.Claimed?
        if let directories = environment.triggerDirectories {
            let me = TriggerSocket.Holder(
                pid: ProcessID.current, config: configPath, storage: settings.storage.path)
            switch TriggerSocket.claim(camera: settings.camera.name, directories: directories, holder: me) {
            case .claimed(let claim):
                claimed = claim
            case .inUse(let other, let lock):
                log.error(
                    "another agent on this machine records a camera of this name — give this one another camera.name (it names its trigger socket, MQTT topics and clips)",
                    [
                        ("camera_name", .string(settings.camera.name)),
                        ("pid", .string(other.pid.map(String.init) ?? "unknown")),
                        ("its_config", .string(other.config ?? "unknown")),
                        ("its_storage", .string(other.storage ?? "unknown")),
                        ("lock", .string(lock)),
                    ])
                return .cameraInUse(pid: other.pid)
            case .nowhere(let problems):
                log.warning(
                    "`vigil trigger` will not reach this agent: no directory takes its socket",
                    [("tried", .string(problems.joined(separator: "; ")))])
            }
        }

        // Storage, before anything records: made when missing, claimed (one agent per
        // directory), proven writable, then what an earlier run left open repaired and
        // retention applied. A directory that is not there yet or not writable is waited for.
        let storage = environment.storage(settings.storage.path)
        let hooks = HookSink(settings.hooks, log: log, clock: environment.clock)
        let sinks = EventSinks([JournalSink(log: log), hooks] + environment.sinks)
        // What the sinks may read and do while the run lasts, before any event: what a sink's
        // own thread tells the others (an upload verified) reaches them until they finish.
        announcing.withLock { $0 = sinks }
        defer { announcing.withLock { $0 = nil } }
        sinks.start(
            SinkContext(
                requests: environment.control, live: live, counters: { [stats] in stats.snapshot }, uploads: uploads,
                announce: { [weak self] in self?.announce($0) }))
        let clipWriter = ClipWriter(
            settings: WriterSettings(settings, storage: storage), log: log, stats: stats, events: sinks,
            uploads: uploads, clock: environment.clock, wallNow: environment.wallNow,
            memoryLimit: environment.memoryForWaitingVideo)
        switch clipWriter.bringUpStorage() {
        case .ready:
            break
        case .cannotCreate(let reason):
            log.error(
                "cannot create the storage directory — check storage.path and that this user may write there",
                [("path", .string(settings.storage.path)), ("error", .string(reason))])
            return .storageCannotBeCreated
        case .cannotClaim(let error):
            log.error(
                "cannot take the storage directory's lock — check that this user may write there",
                [("path", .string(settings.storage.path)), ("error", .string(error.description))])
            return .storageCannotBeCreated
        case .claimedElsewhere(let error):
            log.error(
                "another agent records into this storage directory — stop it, or give this one another storage.path",
                [
                    ("path", .string(settings.storage.path)),
                    ("pid", .string(error.heldBy.map(String.init) ?? "unknown")),
                    ("error", .string(error.description)),
                ])
            return .storageInUse(pid: error.heldBy)
        case .unavailable(let reason):
            clipWriter.storageUnavailable(reason)
        }

        // The source: opened before anything starts, so a bad one is reported at once. A
        // camera that is not there yet (a USB camera still enumerating at boot, or unplugged)
        // is waited for, as one that goes away later is.
        let opened: OpenedSource?
        do {
            opened = try CameraCapture.openAtStart(settings.camera, open: openSource, notify: { notify($0, sinks) })
        } catch {
            log.error(
                "cannot open the source",
                [("source", .string(settings.camera.device.description)), ("error", .string(error.description))])
            return .sourceCannotOpen
        }
        if let source = opened?.source {
            log.info("source open", [("source", .string(source.name)), ("format", .string(source.format.description))])
        } else {
            cameraDownSince.withLock { $0 = environment.wallNow() }
        }
        let live = opened?.isLive ?? true

        let frames = WorkQueue<CaptureItem>(capacity: live ? 3 : 8)
        let writerQueue = WorkQueue<WriterItem>(capacity: Int.max)
        let pipeline = Pipeline(
            settings: settings, encoders: environment.encoders, log: log,
            stats: stats, clock: environment.clock, wallNow: environment.wallNow)
        let writerThread = startThread("writer") { clipWriter.run(writerQueue) }
        environment.control.attachDeleter { file, by in
            writerQueue.push(.delete(file, by: by), cost: 0)
            return true
        }
        let sourceError = Mutex<CaptureError?>(nil)
        let pipelineDone = Event()
        let control = environment.control
        let feed = self.live
        startThread("pipeline") {
            let error = pipeline.run(frames, control: control, writer: writerQueue, sinks: sinks, live: feed)
            sourceError.withLock { $0 = error }
            // 2. The pipeline has drained: nothing more goes to the writer.
            writerQueue.close()
            pipelineDone.signal()
        }
        let handedOver = HandOver(opened?.source)
        let captureThread = startThread("capture") { [self] in
            capture(handedOver.value, into: frames, live: live, sinks: sinks)
        }
        if settings.audio.enabled {
            startThread("audio") { [self] in captureAudio(into: frames, sinks: sinks) }
        }
        running.withLock {
            $0 = Running(
                frames: frames, writer: writerQueue, pipeline: pipeline, captureThread: captureThread, sinks: sinks)
        }
        endStreamIfSourceHangs()  // a stop that came before the threads were there
        if environment.handlesSignals {
            Signals.startWaiting { [self] signal in
                if signal == .hangUp { reload() } else { stop(because: signal.name) }
            }
        }
        startHousekeeping(writer: writerQueue, sinks: sinks)
        environment.notifier?.ready(
            status: opened.map { "recording from \($0.source.name)" }
                ?? "waiting for the camera \(settings.camera.device)")
        if let choice = environment.encoders.announcement {
            notify(.encoderChosen(backend: choice.backend, reason: choice.reason, unsuitable: choice.warn), sinks)
        }
        let trigger = claimed.flatMap { TriggerSocket.Listener.open($0, log: log) }
        if let trigger {
            let control = environment.control
            trigger.start { [self] request in
                TriggerSocket.answer(request, control: control, noCamera: noCamera, log: log)
            }
            log.info("vigil running", [("trigger_socket", .string(trigger.path))])
        } else {
            log.info("vigil running")
        }

        pipelineDone.wait()
        // 3. The trigger socket closes.
        trigger?.close()
        return finish(
            writerThread: writerThread, captureThread: captureThread, sourceError: sourceError.withLock { $0 })
    }

    /// Why the camera delivers nothing now, or nil while it delivers: what `vigil trigger` is
    /// told instead of "ok".
    func noCamera() -> String? {
        guard let since = cameraDownSince.withLock({ $0 }) else { return nil }
        return
            "\(initial.camera.device) is not delivering frames since \(ClipRecord.timestamp(since)) — the agent keeps trying it and records again once it is back"
    }

    /// Asks the agent to stop (from any thread): the open clip is finished, then `run` returns.
    /// `reason` is said in the log ("SIGTERM").
    public func stop(because reason: String) {
        guard !stopping.exchange(true, ordering: .relaxed) else { return }
        stopToken.stop()
        housekeepingWake.stop()
        log.info("stopping", [("signal", .string(reason))])
        environment.notifier?.stopping()
        endStreamIfSourceHangs()
    }

    /// 1. Capture stops. A source stuck inside a read never sees the flag: after a grace period
    /// the stream is ended without it. Started once, by `stop` or by `run` when a stop came
    /// before the threads were there.
    func endStreamIfSourceHangs() {
        guard stopping.load(ordering: .relaxed), let run = running.withLock({ $0 }),
            !graceStarted.exchange(true, ordering: .relaxed)
        else { return }
        startThread("stop") { [self] in
            guard !run.captureThread.join(timeout: Agent.stopGrace) else { return }
            log.warning(
                "the source did not stop; finishing without it",
                [
                    ("source", .string(initial.camera.device.description)),
                    ("waited", .seconds(Agent.stopGrace)),
                ])
            run.frames.push(.end(nil))
            run.frames.close()
        }
    }

    /// Steps 4 to 6 of the stop (the pipeline has drained and closed the writer queue).
    func finish(
        writerThread: JoinableThread, captureThread: JoinableThread, sourceError: CaptureError?
    ) -> Outcome {
        // The source ended (a stop already told systemd it is stopping).
        if !stopping.exchange(true, ordering: .relaxed) { environment.notifier?.stopping() }
        stopToken.stop()
        housekeepingWake.stop()
        // 4. The writer drains: the last clip is finished and journaled.
        writerThread.join()
        _ = captureThread.join(timeout: Agent.stopGrace)  // a source stuck in a read goes with the process
        // 5. The sinks finish side by side: running hooks get a moment, then are killed; the
        // others deliver what they still hold (MQTT: the queue, then "offline"). An upload
        // verified from now on is in uploads.jsonl, not announced (no hook may start that
        // nothing would stop).
        announcing.withLock { $0 = nil }
        for late in running.withLock({ $0?.sinks })?.finishSideBySide() ?? [] {
            log.warning("a sink did not finish in time; stopping without it", [("sink", .string(late))])
        }
        // 6. The last line.
        log.info("vigil stopped", Stats.logged(stats.snapshot.totals))
        if let sourceError {
            log.error("the source failed", [("error", .string(sourceError.description))])
            return .sourceFailed
        }
        return .stopped
    }

    /// Hands `event` from a sink's own thread to the sinks of the run, until they finish.
    func announce(_ event: AgentEvent) {
        announcing.withLock { $0 }?.handle(event)
    }

    /// Logs `notice` and hands it to the sinks of the run (a reload's, from any thread).
    private func notify(_ notice: Notice) {
        notice.log(to: log)
        running.withLock { $0?.sinks }?.handle(.notice(notice))
    }

    /// Reloads the configuration file (from any thread); an invalid file is logged and the
    /// settings in use are kept. What applies when is `ReloadPlan`'s to say.
    public func reload() {
        environment.notifier?.reloading()
        var status = "configuration reloaded"
        defer { environment.notifier?.ready(status: status) }
        let inUse = current.withLock { $0 }
        let applied: Settings, plan: ReloadPlan
        switch Agent.reloading(configPath, inUse: inUse, initial: initial) {
        case .refused(let notice):
            notify(notice)
            status = "configuration not reloaded; the settings in use are kept"
            return
        case .applied(let settings, let changes, let notices):
            (applied, plan) = (settings, changes)
            for notice in notices { notify(notice) }
        }
        if plan.logChanged { log.level = applied.log.level }
        current.withLock { $0 = applied }
        housekeepingWake.ring()
        guard let run = running.withLock({ $0 }) else { return }
        if plan.changesPipeline { run.pipeline.reload(applied, plan: plan) }
        if plan.storageChanged {
            run.writer.push(
                .reload(WriterSettings(applied, storage: environment.storage(applied.storage.path))), cost: 0)
        }
        run.sinks.handle(.reloaded(applied))
        log.info("configuration reloaded; it applies from the next clip", [("config", .string(configPath))])
    }

    /// What reloading the configuration file comes to.
    enum Reloaded {
        /// Kept the settings in use: why (said).
        case refused(Notice)
        /// The settings to apply, what they change, and what to say first.
        case applied(Settings, plan: ReloadPlan, notices: [Notice])
    }

    /// Reads the configuration file at `path` again, with `inUse` in effect and `initial` the
    /// settings the agent started with, as `ReloadPlan` says: what `reload` applies to the
    /// threads (and a stepped test to its pipeline and writer).
    static func reloading(_ path: String, inUse: Settings, initial: Settings) -> Reloaded {
        let new: Settings
        do throws(ConfigurationError) {
            new = try Settings.load(path: path)
            if let problem = ReloadPlan.refusal(of: new.values, running: inUse.values) {
                throw ConfigurationError(file: path, line: nil, message: problem)
            }
        } catch {
            return .refused(.reloadRefused(error: error.description))
        }
        // What needs a restart stays as it began: the camera, the microphone, the encoder,
        // the storage directory.
        let applied = ReloadPlan.applicable(new, running: initial)
        let plan = ReloadPlan(from: inUse, to: new)
        // Retention decides what is deleted: never changed without a word.
        var notices = ReloadPlan.retentionChanges(from: inUse.storage, to: applied.storage).map {
            Notice.retentionChanged(setting: $0.setting, old: $0.old, new: $0.new, deletesMore: $0.deletesMore)
        }
        if !plan.needsRestart.isEmpty { notices.append(.restartNeeded(changed: plan.needsRestart)) }
        return .applied(applied, plan: plan, notices: notices)
    }
}

/// A value handed to exactly one other thread, which alone uses it from then on.
/// `@unchecked Sendable`: the hand-over is the only sharing; the creator does not touch it again.
final class HandOver<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}
