internal import Glibc

/// The signals the agent acts on: SIGTERM/SIGINT stop it (finishing the open clip), SIGHUP
/// reloads the configuration.
///
/// They are blocked in every thread (call `block()` before starting any) and taken by one
/// thread with `sigwait`, so no handler runs at an arbitrary point of other code. `vigil run`
/// blocks them first of all, before anything is made: one that comes while the agent starts
/// waits for the agent to take it (a reload, a clean stop), instead of ending the process.
public enum Signals {
    /// A signal the agent takes.
    public enum Taken: Sendable, Equatable, CaseIterable {
        case terminate, interrupt, hangUp

        var number: Int32 {
            switch self {
            case .terminate: SIGTERM
            case .interrupt: SIGINT
            case .hangUp: SIGHUP
            }
        }

        /// As the log names it: "SIGTERM".
        public var name: String {
            switch self {
            case .terminate: "SIGTERM"
            case .interrupt: "SIGINT"
            case .hangUp: "SIGHUP"
            }
        }
    }

    static func set() -> sigset_t {
        var set = sigset_t()
        sigemptyset(&set)
        for s in Taken.allCases { sigaddset(&set, s.number) }
        return set
    }

    /// Blocks the signals in the calling thread, and so in every thread it starts later.
    public static func block() {
        var s = set()
        pthread_sigmask(SIG_BLOCK, &s, nil)
    }

    /// Blocks every signal in the calling thread (and the threads it starts): for a thread of a
    /// library's that must never take one — the agent's signals are for the signal thread, and
    /// a SIGPIPE from a write on a closed TLS connection must not end the process.
    public static func blockAllInThisThread() {
        var all = sigset_t()
        sigfillset(&all)
        pthread_sigmask(SIG_SETMASK, &all, nil)
    }

    /// Starts the thread that waits for the signals (`sigwait`) and passes each to `handler`.
    public static func startWaiting(_ handler: @escaping @Sendable (Taken) -> Void) {
        startEssentialThread("signals") {
            var s = set()
            while true {
                var signal: Int32 = 0
                guard sigwait(&s, &signal) == 0,
                    let taken = Taken.allCases.first(where: { $0.number == signal })
                else { continue }
                handler(taken)
            }
        }
    }
}
