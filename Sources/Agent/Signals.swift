import Glibc

/// The signals the agent acts on: SIGTERM/SIGINT stop it (finishing the open clip), SIGHUP
/// reloads the configuration.
///
/// They are blocked in every thread (call `block()` before starting any) and taken by one
/// thread with `sigwait`, so no handler runs at an arbitrary point of other code. `vigil run`
/// blocks them first of all, before anything is made: one that comes while the agent starts
/// waits for the agent to take it (a reload, a clean stop), instead of ending the process.
public enum Signals {
    static let handled: [Int32] = [SIGTERM, SIGINT, SIGHUP]

    static func set() -> sigset_t {
        var set = sigset_t()
        sigemptyset(&set)
        for s in handled { sigaddset(&set, s) }
        return set
    }

    /// Blocks the signals in the calling thread, and so in every thread it starts later.
    public static func block() {
        var s = set()
        pthread_sigmask(SIG_BLOCK, &s, nil)
    }

    /// Starts the thread that waits for the signals and passes each to `handler`.
    static func startWaiting(_ handler: @escaping @Sendable (Int32) -> Void) {
        startEssentialThread("signals") {
            var s = set()
            while true {
                var signal: Int32 = 0
                if sigwait(&s, &signal) == 0 { handler(signal) }
            }
        }
    }

    static func name(_ signal: Int32) -> String {
        switch signal {
        case SIGTERM: "SIGTERM"
        case SIGINT: "SIGINT"
        case SIGHUP: "SIGHUP"
        default: "signal \(signal)"
        }
    }
}
