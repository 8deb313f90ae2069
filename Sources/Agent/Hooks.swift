import Capture
import Configuration
import FoundationEssentials
import Glibc
import Logging
internal import POSIX
import Recorder
import Synchronization

/// Runs the user's hook programs (`hooks.on_event_start`, `hooks.on_clip_saved`) without a
/// shell: the program gets the facts as arguments and as `VIGIL_*` environment variables, so
/// no file name is ever interpolated into a command line. Each run is watched on its own
/// thread and killed after the timeout; recording never waits for a hook. At most
/// `maxRunning` hooks run at once; beyond that a run is skipped and logged.
final class HookRunner: Sendable {
    let log: Logger
    private let running = Mutex(0)
    private let timeoutSeconds: Mutex<Double>
    static let maxRunning = 4

    init(timeout: Double, log: Logger) {
        timeoutSeconds = Mutex(timeout)
        self.log = log.with(("component", "hooks"))
    }

    /// How long a hook may run before it is killed (a reload changes it for the next run).
    var timeout: Double {
        get { timeoutSeconds.withLock { $0 } }
        set { timeoutSeconds.withLock { $0 = newValue } }
    }

    /// Waits for running hooks to finish, at most `seconds`; the watchers kill those past their
    /// own timeout meanwhile. Called when the agent stops, so no hook outlives it for long.
    func drain(seconds: Double) {
        let deadline = MonotonicClock.now().seconds + seconds
        while running.withLock({ $0 }) > 0 && MonotonicClock.now().seconds < deadline { usleep(20_000) }
        let left = running.withLock { $0 }
        if left > 0 { log.warning("hooks still running at exit", [("count", .int(left))]) }
    }

    /// Starts `program` with `arguments` and the `VIGIL_*` variables in `facts`; returns at once.
    func run(_ program: String, event: String, arguments: [String], facts: [(String, String)]) {
        let admitted = running.withLock { count -> Bool in
            guard count < HookRunner.maxRunning else { return false }
            count += 1
            return true
        }
        guard admitted else {
            log.warning(
                "hook skipped: too many still running", [("hook", .string(program)), ("event", .string(event))])
            return
        }
        let timeout = self.timeout
        let log = self.log
        var environment = ProcessInfo.processInfo.environment
        environment["VIGIL_EVENT"] = event
        for (key, value) in facts { environment["VIGIL_" + key.uppercased()] = value }
        let argv = [program, event] + arguments
        let envp = environment.map { "\($0.key)=\($0.value)" }
        do {
            try startHookThread(program: program, event: event, argv: argv, envp: envp, timeout: timeout, log: log)
        } catch {
            running.withLock { $0 -= 1 }
            log.error(
                "hook failed to start",
                [("hook", .string(program)), ("event", .string(event)), ("error", .string(error.description))])
        }
    }

    /// The thread that spawns a hook, waits for it and kills it after `timeout`.
    private func startHookThread(
        program: String, event: String, argv: [String], envp: [String], timeout: Double,
        log: Logger
    ) throws(ThreadStartError) {
        try startDetachedThread("hook") { [self] in
            defer { self.running.withLock { $0 -= 1 } }
            let start = MonotonicClock.now().seconds
            let pid: pid_t
            switch spawn(program, argv, envp) {
            case .success(let p): pid = p
            case .failure(let error):
                log.error(
                    "hook failed to start",
                    [("hook", .string(program)), ("event", .string(event)), ("error", .string(error.description))])
                return
            }
            var status: Int32 = 0
            var killed = false
            while true {
                // Nil: waitpid failed (ECHILD), and there is nothing left to wait for.
                guard let r = (try? retryOnInterrupt { waitpid(pid, &status, WNOHANG) }), r != pid else { break }
                if !killed && MonotonicClock.now().seconds - start > timeout {
                    kill(-pid, SIGTERM)
                    usleep(500_000)
                    kill(-pid, SIGKILL)
                    if waitpid(pid, &status, WNOHANG) == pid {
                        killed = true
                        break
                    }
                    killed = true
                }
                usleep(20_000)
            }
            let elapsed = MonotonicClock.now().seconds - start
            let exited = status & 0x7F == 0
            let code = (status >> 8) & 0xFF
            if killed {
                log.warning(
                    "hook killed after its timeout",
                    [("hook", .string(program)), ("event", .string(event)), ("timeout", .seconds(timeout))])
            } else if !exited || code != 0 {
                log.warning(
                    "hook failed",
                    [
                        ("hook", .string(program)), ("event", .string(event)),
                        (exited ? "status" : "signal", .int(exited ? code : status & 0x7F)),
                        ("seconds", .seconds(elapsed)),
                    ])
            } else {
                log.debug(
                    "hook done",
                    [("hook", .string(program)), ("event", .string(event)), ("seconds", .seconds(elapsed))])
            }
        }
    }
}

/// The hooks as an event sink: `hooks.on_event_start` when an event's first clip opens,
/// `hooks.on_clip_saved` when a clip is closed (not for clips finished by repair: the facts a
/// hook is given died with the run that knew them). A reload changes the programs and the
/// timeout for the next run.
final class HookSink: EventSink {
    let runner: HookRunner
    private let programs: Mutex<Settings.Hooks>

    init(_ hooks: Settings.Hooks, log: Logger) {
        runner = HookRunner(timeout: hooks.timeout, log: log)
        programs = Mutex(hooks)
    }

    func handle(_ event: AgentEvent) {
        switch event {
        case .clipStarted(let clip):
            guard clip.part == 1, let program = programs.withLock({ $0.onEventStart }) else { return }
            let trigger = ClipRecord.timestamp(clip.trigger)
            runner.run(
                program, event: "event_start", arguments: [clip.path, clip.camera, trigger],
                facts: [
                    ("file", clip.path), ("camera", clip.camera), ("trigger", trigger), ("score", String(clip.score)),
                    ("part", String(clip.part)),
                ])
        case .clipSaved(let saved):
            guard saved.origin == .closed, let program = programs.withLock({ $0.onClipSaved }) else { return }
            let r = saved.record
            runner.run(
                program, event: "clip_saved",
                arguments: [
                    saved.path, r.camera, r.start, r.end, String(r.durationSeconds), String(r.frames), String(r.bytes),
                ],
                facts: [
                    ("file", saved.path), ("camera", r.camera), ("start", r.start), ("end", r.end),
                    ("trigger", r.trigger ?? ""),
                    ("duration", String(r.durationSeconds)), ("frames", String(r.frames)), ("bytes", String(r.bytes)),
                    ("peak_score", String(r.peakScore ?? 0)), ("part", String(r.part ?? 1)),
                ])
        case .reloaded(let settings):
            programs.withLock { $0 = settings.hooks }
            runner.timeout = settings.hooks.timeout
        case .motionStarted, .motionEnded, .clipsDeleted, .stats:
            break
        }
    }
}

struct SpawnError: Error, CustomStringConvertible {
    var description: String
}

/// Starts `path` with `argv` and `envp` directly (no shell), in a process group of its own,
/// with every signal unblocked and at its default action in the child — the agent blocks SIGTERM, SIGINT and SIGHUP in its own
/// threads, and a hook must not inherit that. Standard input and output go to /dev/null.
func spawn(_ path: String, _ argv: [String], _ envp: [String]) -> Result<pid_t, SpawnError> {
    var attributes = posix_spawnattr_t()
    posix_spawnattr_init(&attributes)
    defer { posix_spawnattr_destroy(&attributes) }
    var empty = sigset_t()
    sigemptyset(&empty)
    var all = sigset_t()
    sigfillset(&all)
    posix_spawnattr_setsigmask(&attributes, &empty)
    posix_spawnattr_setsigdefault(&attributes, &all)
    // Its own process group, so a timeout kills whatever the hook started too.
    posix_spawnattr_setpgroup(&attributes, 0)
    posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP))
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    for fd: Int32 in [0, 1, 2] {
        posix_spawn_file_actions_addopen(&actions, fd, "/dev/null", fd == 0 ? O_RDONLY : O_WRONLY, 0)
    }
    var cArgv: [UnsafeMutablePointer<CChar>?] = argv.map { strdup($0) } + [nil]
    var cEnvp: [UnsafeMutablePointer<CChar>?] = envp.map { strdup($0) } + [nil]
    defer {
        for p in cArgv { free(p) }
        for p in cEnvp { free(p) }
    }
    var pid: pid_t = 0
    let result = posix_spawn(&pid, path, &actions, &attributes, &cArgv, &cEnvp)
    guard result == 0 else {
        return .failure(SpawnError(description: "cannot run \(path): \(String(cString: strerror(result)))"))
    }
    return .success(pid)
}
