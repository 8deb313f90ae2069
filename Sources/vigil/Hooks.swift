import Capture
import Foundation
import Logging
import Synchronization

/// Runs the user's hook programs (`hooks.on_event_start`, `hooks.on_clip_saved`) without a
/// shell: the program gets the facts as arguments and as `VIGIL_*` environment variables, so
/// no file name is ever interpolated into a command line. Each run is watched on its own
/// thread and killed after the timeout; recording never waits for a hook. At most
/// `maxRunning` hooks run at once; beyond that a run is skipped and logged.
final class HookRunner: Sendable {
    let timeout: Double
    let log: Logger
    private let running = Mutex(0)
    static let maxRunning = 4

    init(timeout: Double, log: Logger) {
        self.timeout = timeout
        self.log = log.with(("component", "hooks"))
    }

    /// Starts `program` with `arguments` and the `VIGIL_*` variables in `facts`; returns at once.
    func run(_ program: String, event: String, arguments: [String], facts: [(String, String)]) {
        let admitted = running.withLock { count -> Bool in
            guard count < HookRunner.maxRunning else { return false }
            count += 1
            return true
        }
        guard admitted else {
            log.warning("hook skipped: too many still running", [("hook", .string(program)), ("event", .string(event))])
            return
        }
        let timeout = self.timeout
        let log = self.log
        let thread = Thread { [self] in
            defer { self.running.withLock { $0 -= 1 } }
            let process = Process()
            process.executableURL = URL(fileURLWithPath: program)
            process.arguments = [event] + arguments
            var environment = ProcessInfo.processInfo.environment
            environment["VIGIL_EVENT"] = event
            for (key, value) in facts { environment["VIGIL_" + key.uppercased()] = value }
            process.environment = environment
            process.standardInput = FileHandle.nullDevice
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            let start = MonotonicClock.now().seconds
            do {
                try process.run()
            } catch {
                log.error("hook failed to start", [("hook", .string(program)), ("event", .string(event)), ("error", .string("\(error.localizedDescription)"))])
                return
            }
            var killed = false
            while process.isRunning {
                if MonotonicClock.now().seconds - start > timeout {
                    process.terminate()
                    usleep(500_000)
                    if process.isRunning { kill(process.processIdentifier, SIGKILL) }
                    killed = true
                    break
                }
                usleep(20_000)
            }
            process.waitUntilExit()
            let elapsed = MonotonicClock.now().seconds - start
            if killed {
                log.warning("hook killed after its timeout", [("hook", .string(program)), ("event", .string(event)), ("timeout", .seconds(timeout))])
            } else if process.terminationStatus != 0 {
                log.warning("hook failed", [("hook", .string(program)), ("event", .string(event)), ("status", .int(process.terminationStatus)), ("seconds", .seconds(elapsed))])
            } else {
                log.debug("hook done", [("hook", .string(program)), ("event", .string(event)), ("seconds", .seconds(elapsed))])
            }
        }
        thread.name = "hook"
        thread.start()
    }
}
