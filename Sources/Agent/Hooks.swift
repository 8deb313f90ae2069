import Capture
import Configuration
import FoundationEssentials
import Logging
import Media
import POSIX
import Recorder
import Synchronization

/// The two kinds of hook. Each kind has its own limit of hooks running at once, so hooks of
/// one kind that hang (an `on_clip_saved` upload to a server that is down) never keep the
/// other kind from running.
enum HookKind: String, Sendable {
    /// `hooks.on_event_start`.
    case eventStart = "event_start"
    /// `hooks.on_clip_saved`.
    case clipSaved = "clip_saved"
    /// `hooks.on_upload`.
    case upload = "upload"
}

/// What a hook runs for, as its log lines name it: the kind, the clip (relative to the
/// storage directory, as the other log lines give it) and the camera.
struct HookEvent: Sendable {
    var kind: HookKind
    var file: String
    var camera: String

    var fields: [(String, LogValue)] {
        [("event", .string(kind.rawValue)), ("file", .string(file)), ("camera", .string(camera))]
    }
}

/// Runs the user's hook programs (`hooks.on_event_start`, `hooks.on_clip_saved`,
/// `hooks.on_upload`) without a shell: the program gets the facts as arguments and as `VIGIL_*` environment variables, so
/// no file name is ever interpolated into a command line. Each run is watched on its own
/// thread and killed after the timeout; recording never waits for a hook. A hook runs in a
/// process group of its own, and the group goes with it: when the program exits, what it
/// left running there (`sleep 100 &`) is sent SIGTERM, then SIGKILL `killGrace` later — a
/// hook that starts work in the background must wait for it (`wait`), within its timeout. At most
/// `maxRunningPerKind` hooks of each kind run at once; beyond that a run is skipped and
/// logged. None outlives the agent: `drain` kills what is still running when it stops. A
/// hook's time is read on `clock` (the agent's); its watcher looks every 20 ms of real time.
final class HookRunner: @unchecked Sendable {
    let log: Logger
    let clock: Clock
    private struct State {
        var running: [HookKind: Int] = [:]
        /// Set when the agent stops: each watcher then kills its hook.
        var stopping = false
        /// Set when the drain begins: no hook starts after it.
        var closed = false
        var total: Int { running.values.reduce(0, +) }
    }
    /// `state`, and the broadcast each hook's end makes (for `drain`).
    private let condition = Condition()
    nonisolated(unsafe) private var state = State()
    private let timeoutSeconds: Mutex<Double>
    /// Hooks of one kind running at once; one more is skipped.
    static let maxRunningPerKind = 4
    /// Seconds between SIGTERM to a hook's process group and SIGKILL.
    static let killGrace = 0.5
    /// How long running hooks may go on once the agent stops, before they are killed.
    static let stopGrace = 1.0

    init(timeout: Double, log: Logger, clock: Clock) {
        timeoutSeconds = Mutex(timeout)
        self.log = log.with(("component", "hooks"))
        self.clock = clock
    }

    /// How long a hook may run before it is killed (a reload changes it for the next run).
    var timeout: Double {
        get { timeoutSeconds.withLock { $0 } }
        set { timeoutSeconds.withLock { $0 = newValue } }
    }

    /// Hooks running now.
    var runningCount: Int { condition.withLock { state.total } }

    /// Called when the agent stops. Waits for running hooks to finish, at most `seconds` (the
    /// watchers kill those past their own timeout meanwhile); then kills those still running —
    /// SIGTERM to each one's process group, SIGKILL `killGrace` later, each logged with its
    /// event — and waits until they are gone, so that no hook outlives the agent.
    func drain(seconds: Double) {
        condition.withLock { state.closed = true }
        waitForHooks(seconds: seconds)
        let left = runningCount
        guard left > 0 else { return }
        log.warning("hooks still running at exit", [("count", .int(left))])
        // Each watcher kills its own hook: it alone reaps the process, so the process group it
        // signals cannot be someone else's yet.
        condition.withLock {
            state.stopping = true
            condition.broadcast()
        }
        waitForHooks(seconds: HookRunner.killGrace + 2)
        let stuck = runningCount
        if stuck > 0 { log.error("hooks did not end after SIGKILL", [("count", .int(stuck))]) }
    }

    /// Waits until no hook runs, at most `seconds` (of the real monotonic clock: a wait): woken
    /// by each hook's end.
    private func waitForHooks(seconds: Double) {
        let deadline = Clock.monotonic.now() + Timestamp.Duration(seconds: seconds)
        condition.withLock {
            while state.total > 0 {
                let remaining = (deadline - Clock.monotonic.now()).seconds
                if remaining <= 0 { return }
                condition.wait(seconds: remaining)
            }
        }
    }

    /// Starts `program` with `arguments` and the `VIGIL_*` variables in `facts`; returns at once.
    func run(_ program: String, for event: HookEvent, arguments: [String], facts: [(String, String)]) {
        let (admitted, closed) = condition.withLock { () -> (Bool, Bool) in
            guard !state.closed else { return (false, true) }
            guard state.running[event.kind, default: 0] < HookRunner.maxRunningPerKind else { return (false, false) }
            state.running[event.kind, default: 0] += 1
            return (true, false)
        }
        if closed {
            log.info("hook not run: the agent is stopping", [("hook", .string(program))] + event.fields)
            return
        }
        guard admitted else {
            log.warning(
                "hook skipped: too many still running",
                [("hook", .string(program))] + event.fields + [("running", .int(HookRunner.maxRunningPerKind))])
            return
        }
        let timeout = self.timeout
        let log = self.log
        var environment = ProcessInfo.processInfo.environment
        environment["VIGIL_EVENT"] = event.kind.rawValue
        for (key, value) in facts { environment["VIGIL_" + key.uppercased()] = value }
        let argv = [program, event.kind.rawValue] + arguments
        let envp = environment.map { "\($0.key)=\($0.value)" }
        do {
            try startHookThread(program: program, event: event, argv: argv, envp: envp, timeout: timeout, log: log)
        } catch {
            finished(event.kind)
            log.error(
                "hook failed to start",
                [
                    ("hook", .string(program)), ("event", .string(event.kind.rawValue)),
                    ("error", .string(error.description)),
                ])
        }
    }

    /// SIGTERM to the hook's process group, SIGKILL `killGrace` later.
    private static func killGroup(_ child: ChildProcess) {
        child.signalGroup(.terminate)
        Clock.sleep(seconds: HookRunner.killGrace)
        child.signalGroup(.kill)
    }

    private func finished(_ kind: HookKind) {
        condition.withLock {
            state.running[kind, default: 0] -= 1
            condition.broadcast()
        }
    }

    /// Why a watcher killed its hook.
    private enum KillReason {
        case timeout, agentStopping
    }

    /// The thread that spawns a hook, waits for it and kills it after `timeout`, or when the
    /// agent stops.
    private func startHookThread(
        program: String, event: HookEvent, argv: [String], envp: [String], timeout: Double,
        log: Logger
    ) throws(ThreadStartError) {
        try startDetachedThread("hook") { [self] in
            defer { self.finished(event.kind) }
            let start = clock.now()
            let child: ChildProcess
            do throws(ChildProcess.SpawnError) {
                child = try ChildProcess.spawn(program, arguments: argv, environment: envp)
            } catch {
                log.error(
                    "hook failed to start",
                    [
                        ("hook", .string(program)), ("event", .string(event.kind.rawValue)),
                        ("error", .string(error.description)),
                    ])
                return
            }
            var ending = ChildProcess.Ending.exited(0)
            var killed: KillReason?
            while true {
                // Ended? Asked without reaping it: until it is reaped its process group cannot
                // be anyone else's.
                guard let ended = child.hasEnded() else { break }  // nothing left to wait for
                if ended {
                    // What it left running in its group (`sleep 100 &`) ends with it, as it would
                    // at its timeout: SIGTERM, SIGKILL `killGrace` later. Then it is reaped.
                    if killed == nil { Self.killGroup(child) }
                    ending = child.reap()
                    break
                }
                if killed == nil {
                    if (clock.now() - start).seconds > timeout {
                        killed = .timeout
                    } else if condition.withLock({ state.stopping }) {
                        killed = .agentStopping
                    }
                    if killed != nil {
                        // Not reaped until after SIGKILL, so the group is still this hook's.
                        Self.killGroup(child)
                        continue
                    }
                }
                Clock.sleep(seconds: 0.02)
            }
            let elapsed = (clock.now() - start).seconds
            switch killed {
            case .timeout:
                log.warning(
                    "hook killed after its timeout",
                    [("hook", .string(program))] + event.fields + [("timeout", .seconds(timeout))])
            case .agentStopping:
                log.warning(
                    "hook killed: the agent stopped",
                    [("hook", .string(program))] + event.fields + [("seconds", .seconds(elapsed))])
            case nil where ending != .exited(0):
                let (key, value): (String, Int32) =
                    switch ending {
                    case .exited(let code): ("status", code)
                    case .signalled(let signal): ("signal", signal)
                    }
                log.warning(
                    "hook failed",
                    [("hook", .string(program))] + event.fields + [
                        (key, .int(Int(value))), ("seconds", .seconds(elapsed)),
                    ])
            case nil:
                log.debug(
                    "hook done",
                    [("hook", .string(program))] + event.fields + [("seconds", .seconds(elapsed))])
            }
        }
    }
}

/// The hooks as an event sink: `hooks.on_event_start` when an event's first clip opens,
/// `hooks.on_clip_saved` when a clip is closed (not for clips finished by repair: the facts a
/// hook is given died with the run that knew them), `hooks.on_upload` when a clip's upload is
/// verified. A reload changes the programs and the timeout for the next run.
final class HookSink: EventSink {
    let runner: HookRunner
    private let programs: Mutex<Settings.Hooks>

    init(_ hooks: Settings.Hooks, log: Logger, clock: Clock) {
        runner = HookRunner(timeout: hooks.timeout, log: log, clock: clock)
        programs = Mutex(hooks)
    }

    /// The agent stops: running hooks get `HookRunner.stopGrace` to end (or their own
    /// timeout, if sooner), then are killed — within `EventSinks.finishSeconds` in all.
    func finish() { runner.drain(seconds: HookRunner.stopGrace) }

    func handle(_ event: AgentEvent) {
        switch event {
        case .clipStarted(let clip):
            guard clip.part == 1, let program = programs.withLock({ $0.onEventStart }) else { return }
            let (arguments, facts) = HookSink.eventStart(clip)
            runner.run(
                program, for: HookEvent(kind: .eventStart, file: clip.file, camera: clip.camera),
                arguments: arguments, facts: facts)
        case .clipSaved(let saved):
            guard saved.origin == .closed, let program = programs.withLock({ $0.onClipSaved }) else { return }
            let (arguments, facts) = HookSink.clipSaved(saved)
            runner.run(
                program, for: HookEvent(kind: .clipSaved, file: saved.record.file, camera: saved.record.camera),
                arguments: arguments, facts: facts)
        case .clipUploaded(let uploaded):
            guard let program = programs.withLock({ $0.onUpload }) else { return }
            let (arguments, facts) = HookSink.upload(uploaded)
            runner.run(
                program, for: HookEvent(kind: .upload, file: uploaded.file, camera: uploaded.camera),
                arguments: arguments, facts: facts)
        case .reloaded(let settings):
            programs.withLock { $0 = settings.hooks }
            runner.timeout = settings.hooks.timeout
        case .motionStarted, .motionEnded, .clipsDeleted, .stats, .detection, .notice, .livePicture, .storageReady:
            break
        }
    }
}

extension HookSink {
    /// What `on_event_start` gets: the arguments, and the facts (each `VIGIL_<KEY>`) under the
    /// journal's keys (docs/reference/events.md). `score` is the old name of `peak_score`, kept for hooks
    /// written before.
    static func eventStart(_ clip: ClipStarted) -> (arguments: [String], facts: [(String, String)]) {
        let trigger = ClipRecord.timestamp(clip.trigger)
        return (
            [clip.path, clip.camera, trigger],
            [
                ("file", clip.path), ("camera", clip.camera), ("trigger", clip.cause.rawValue),
                ("trigger_time", trigger), ("preroll_s", String(clip.preRoll.rounded(toPlaces: 3))),
                ("peak_score", String(clip.score)), ("part", String(clip.part)), ("score", String(clip.score)),
            ]
        )
    }

    /// What `on_upload` gets: the arguments (the clip's full path, the camera, where it is now)
    /// and the facts, under `uploads.jsonl`'s keys.
    static func upload(_ uploaded: ClipUploaded) -> (arguments: [String], facts: [(String, String)]) {
        (
            [uploaded.path, uploaded.camera, uploaded.url],
            [
                ("file", uploaded.path), ("camera", uploaded.camera), ("url", uploaded.url),
                ("bytes", String(uploaded.bytes)), ("seconds", String(uploaded.seconds)), ("at", uploaded.at),
                ("waiting", String(uploaded.waiting)),
            ]
        )
    }

    /// What `on_clip_saved` gets: the arguments, and the facts — the journal line's every key
    /// (docs/reference/events.md), with `file` and `snapshot` as full paths. `duration` is the old name
    /// of `duration_s`, kept for hooks written before.
    static func clipSaved(_ saved: ClipSaved) -> (arguments: [String], facts: [(String, String)]) {
        let r = saved.record
        let facts = r.facts.map { key, value -> (String, String) in
            switch key {
            case "file": (key, saved.path)
            case "snapshot": (key, r.snapshot.map { saved.storage.path($0) } ?? "")
            default: (key, value)
            }
        }
        return (
            [saved.path, r.camera, r.start, r.end, String(r.durationSeconds), String(r.frames), String(r.bytes)],
            facts + [("duration", String(r.durationSeconds))]
        )
    }
}
