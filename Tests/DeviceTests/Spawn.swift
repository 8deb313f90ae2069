import Foundation
import Glibc

/// Child processes without Foundation's `Process`, whose run loop machinery hangs in the test
/// VM (its wakeup socket pair cannot be made there): posix_spawn, output to files, waitpid.
struct Child {
    let pid: pid_t

    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// Starts `program` with `arguments`; stdin is /dev/null, stdout and stderr go to the files
    /// named (truncated first), or to /dev/null.
    static func spawn(
        _ program: String, _ arguments: [String], stdout: String? = nil, stderr: String? = nil
    ) throws(Failure) -> Child {
        var actions = posix_spawn_file_actions_t()
        guard posix_spawn_file_actions_init(&actions) == 0 else {
            throw Failure(description: "posix_spawn_file_actions_init failed")
        }
        defer { posix_spawn_file_actions_destroy(&actions) }
        let flags = O_WRONLY | O_CREAT | O_TRUNC  // not O_CLOEXEC: these are the child's own
        guard posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0) == 0,
            posix_spawn_file_actions_addopen(&actions, 1, stdout ?? "/dev/null", flags, 0o644) == 0,
            posix_spawn_file_actions_addopen(&actions, 2, stderr ?? "/dev/null", flags, 0o644) == 0
        else {
            throw Failure(description: "posix_spawn_file_actions_addopen failed")
        }
        let argv = ([program] + arguments).map { strdup($0) }
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        let status = posix_spawn(&pid, program, &actions, nil, argv + [nil], environ)
        guard status == 0 else {
            throw Failure(description: "cannot start \(program): \(String(cString: strerror(status)))")
        }
        return Child(pid: pid)
    }

    /// Runs `program` to completion: its exit status, stdout and stderr.
    static func run(
        _ program: String, _ arguments: [String]
    ) throws(Failure) -> (status: Int32, stdout: String, stderr: String) {
        let base = NSTemporaryDirectory() + "/vigil-device-tests-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        defer {
            unlink(base + ".out")
            unlink(base + ".err")
        }
        let child = try spawn(program, arguments, stdout: base + ".out", stderr: base + ".err")
        let status = child.wait()
        let read = { (path: String) in (try? String(contentsOfFile: path, encoding: .utf8)) ?? "" }
        return (status, read(base + ".out"), read(base + ".err"))
    }

    /// Waits for the child; its exit status (128 + the signal when killed).
    @discardableResult
    func wait() -> Int32 {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 {
            if errno != EINTR { return -1 }
        }
        return Child.decode(status)
    }

    /// The exit status if the child has exited (it is then reaped), nil while it runs.
    func poll() -> Int32? {
        var status: Int32 = 0
        let r = waitpid(pid, &status, WNOHANG)
        return r == pid ? Child.decode(status) : nil
    }

    func signal(_ number: Int32) { kill(pid, number) }

    private static func decode(_ status: Int32) -> Int32 {
        // WIFEXITED / WEXITSTATUS / WTERMSIG are macros.
        let signal = status & 0x7F
        return signal == 0 ? (status >> 8) & 0xFF : 128 + signal
    }
}
