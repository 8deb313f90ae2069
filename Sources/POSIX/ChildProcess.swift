internal import Glibc

/// A program the agent started (a hook), in a process group of its own: the group is what a
/// timeout kills, so whatever the program started in the background goes with it. The bench
/// runs its programs with it too, measured (`reapMeasured`).
public struct ChildProcess: Sendable, Equatable {
    public let pid: Int32

    /// The program could not be started.
    public struct SpawnError: Error, CustomStringConvertible {
        public var description: String
    }

    /// How it ended.
    public enum Ending: Sendable, Equatable {
        /// It exited with this status.
        case exited(Int32)
        /// A signal ended it (its number).
        case signalled(Int32)
    }

    /// A signal for the program, or its process group.
    public enum GroupSignal: Sendable {
        case terminate, kill
        var number: Int32 { self == .terminate ? SIGTERM : SIGKILL }
    }

    /// Where its standard output and error go (its standard input is /dev/null).
    public enum Output: Sendable, Equatable {
        /// /dev/null.
        case discarded
        /// Both to this file, made or emptied first (mode 0644).
        case file(String)
    }

    /// The process group it runs in.
    public enum ProcessGroup: Sendable, Equatable {
        /// One of its own: a timeout kills whatever it started too (a hook).
        case own
        /// This process's: a Ctrl-C at the terminal reaches it too (a program the bench runs).
        case inherited
    }

    /// Starts `path` with `arguments` (its `argv`, the program's name first) and `environment`
    /// (`NAME=value`) directly (no shell), with every signal unblocked and at its default action
    /// in the child — the agent blocks SIGTERM, SIGINT and SIGHUP in its own threads, and a hook
    /// must not inherit that — its output where `output` says, in a process group of its own
    /// unless `group` says otherwise.
    public static func spawn(
        _ path: String, arguments: [String], environment: [String], output: Output = .discarded,
        group: ProcessGroup = .own
    ) throws(SpawnError) -> ChildProcess {
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var empty = sigset_t()
        sigemptyset(&empty)
        var all = sigset_t()
        sigfillset(&all)
        posix_spawnattr_setsigmask(&attributes, &empty)
        posix_spawnattr_setsigdefault(&attributes, &all)
        posix_spawnattr_setpgroup(&attributes, 0)
        posix_spawnattr_setflags(
            &attributes,
            Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | (group == .own ? POSIX_SPAWN_SETPGROUP : 0)))
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        switch output {
        case .discarded:
            posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
            posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        case .file(let file):
            posix_spawn_file_actions_addopen(&actions, 2, file, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
            posix_spawn_file_actions_adddup2(&actions, 2, 1)
        }
        var cArgv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        var cEnvp: [UnsafeMutablePointer<CChar>?] = environment.map { strdup($0) } + [nil]
        defer {
            for p in cArgv { free(p) }
            for p in cEnvp { free(p) }
        }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, path, &actions, &attributes, &cArgv, &cEnvp)
        guard result == 0 else {
            throw SpawnError(description: "cannot run \(path): \(SystemError(result).text)")
        }
        return ChildProcess(pid: pid)
    }

    /// Whether it has ended, asked without reaping it (WNOWAIT): until it is reaped its pid,
    /// and so its process group, cannot be anyone else's. Nil when there is nothing to wait
    /// for (ECHILD: reaped already).
    public func hasEnded() -> Bool? {
        var info = siginfo_t()
        guard (try? retryOnInterrupt { waitid(P_PID, id_t(pid), &info, WEXITED | WNOHANG | WNOWAIT) }) != nil
        else { return nil }
        return info._sifields._sigchld.si_pid == pid
    }

    /// Sends `signal` to its process group (the program and what it started there).
    public func signalGroup(_ signal: GroupSignal) {
        kill(-pid, signal.number)
    }

    /// Sends `signal` to the program alone.
    public func signal(_ signal: GroupSignal) {
        kill(pid, signal.number)
    }

    /// Waits until it has ended, without reaping it: what /proc says of it can still be read.
    public func waitUntilEnded() {
        var info = siginfo_t()
        _ = try? retryOnInterrupt { waitid(P_PID, id_t(pid), &info, WEXITED | WNOWAIT) }
    }

    /// The CPU time a program used, as the kernel accounts it for the program and every thread
    /// it ran (`wait4`).
    public struct CPUTime: Sendable, Equatable {
        public var userSeconds: Double
        public var systemSeconds: Double
    }

    /// Waits for it to end and reaps it; `.exited(0)` when there is nothing to reap.
    public func reap() -> Ending { reapMeasured().ending }

    /// Waits for it to end and reaps it: how it ended and the CPU time it used.
    public func reapMeasured() -> (ending: Ending, cpu: CPUTime) {
        var status: Int32 = 0
        var usage = rusage()
        _ = try? retryOnInterrupt { wait4(pid, &status, 0, &usage) }
        let seconds = { (time: timeval) in Double(time.tv_sec) + Double(time.tv_usec) / 1e6 }
        return (
            status & 0x7F == 0 ? .exited((status >> 8) & 0xFF) : .signalled(status & 0x7F),
            CPUTime(userSeconds: seconds(usage.ru_utime), systemSeconds: seconds(usage.ru_stime))
        )
    }
}
