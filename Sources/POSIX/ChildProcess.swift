internal import Glibc

/// A program the agent started (a hook), in a process group of its own: the group is what a
/// timeout kills, so whatever the program started in the background goes with it.
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

    /// A signal for the process group.
    public enum GroupSignal: Sendable {
        case terminate, kill
        var number: Int32 { self == .terminate ? SIGTERM : SIGKILL }
    }

    /// Starts `path` with `arguments` (its `argv`, the program's name first) and `environment`
    /// (`NAME=value`) directly (no shell), in a process group of its own, with every signal
    /// unblocked and at its default action in the child — the agent blocks SIGTERM, SIGINT and
    /// SIGHUP in its own threads, and a hook must not inherit that. Standard input and output
    /// go to /dev/null.
    public static func spawn(
        _ path: String, arguments: [String], environment: [String]
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
        // Its own process group, so a timeout kills whatever the hook started too.
        posix_spawnattr_setpgroup(&attributes, 0)
        posix_spawnattr_setflags(
            &attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP))
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        for fd: Int32 in [0, 1, 2] {
            posix_spawn_file_actions_addopen(&actions, fd, "/dev/null", fd == 0 ? O_RDONLY : O_WRONLY, 0)
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

    /// Waits for it to end and reaps it; `.exited(0)` when there is nothing to reap.
    public func reap() -> Ending {
        var status: Int32 = 0
        _ = try? retryOnInterrupt { waitpid(pid, &status, 0) }
        return status & 0x7F == 0 ? .exited((status >> 8) & 0xFF) : .signalled(status & 0x7F)
    }
}
