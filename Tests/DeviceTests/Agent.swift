import Capture
import Foundation
import Glibc
import Media
import POSIX
import TestSupport

/// `vigil run` as a child process, its stderr (the log) going to a file the test reads.
final class AgentProcess {
    let child: Child
    let logPath: String
    private var exitStatus: Int32?

    /// Runs at a lower priority than vivid's kernel thread: the VM has two emulated CPUs, and a
    /// starved vivid stamps its frames late and unevenly, which a real camera does not.
    /// `wrapper` runs it (`libcamerify`).
    init(vigil: String, config: String, logPath: String, wrapper: [String] = []) throws(Child.Failure) {
        self.logPath = logPath
        child = try Child.spawn(
            "/usr/bin/nice", ["-n", "10"] + wrapper + [vigil, "run", "--config", config], stdout: logPath,
            stderr: logPath + ".stderr")
    }

    /// The log so far (stderr, where the agent logs), one entry per line.
    var lines: [String] {
        ((try? String(contentsOfFile: logPath + ".stderr", encoding: .utf8)) ?? "").split(separator: "\n").map(
            String.init)
    }

    /// Lines whose message is `message`.
    func entries(_ message: String) -> [String] {
        lines.filter { logValue($0, "msg") == message }
    }

    var isRunning: Bool {
        if exitStatus == nil { exitStatus = child.poll() }
        return exitStatus == nil
    }

    /// Waits until `condition` holds (of the clips in the storage directory, say), or the agent
    /// has exited (then `condition` is asked once more); false if it did not hold within
    /// `timeout` seconds. Asked every 100 ms: the VM's two emulated CPUs are the agent's.
    @discardableResult
    func waitUntil(timeout: Double, _ condition: () -> Bool) -> Bool {
        var holds = false
        TestSupport.waitUntil(timeout: timeout, every: 0.1) {
            holds = condition()
            return holds || !isRunning
        }
        if !holds && !isRunning { holds = condition() }
        return holds
    }

    /// Waits until `count` lines with `message` are in the log; false after `timeout` seconds
    /// or when the agent exits first. For what only the log says (the camera lost or back, the
    /// stats): clips are waited for in the storage directory (`waitUntil`).
    @discardableResult
    func waitFor(_ message: String, count: Int = 1, timeout: Double) -> Bool {
        waitUntil(timeout: timeout) { entries(message).count >= count }
    }

    /// SIGTERM, then the exit status (nil if it did not exit within `timeout` seconds: killed).
    func stop(timeout: Double = 15) -> Int32? {
        if isRunning { child.signal(SIGTERM) }
        let end = Clock.monotonic.now() + .init(seconds: timeout)
        while isRunning && Clock.monotonic.now() < end { usleep(100_000) }
        if isRunning {
            child.signal(SIGKILL)
            exitStatus = child.wait()
            return nil
        }
        return exitStatus
    }

    deinit {
        if isRunning {
            child.signal(SIGKILL)
            child.wait()
        }
    }
}

/// What the host checks in each clip the VM wrote.
struct ClipExpectation: Codable {
    var file: String
    var scenario: String
    var width: Int
    var height: Int
    /// "25/1"
    var frameRate: String
    var audio: Bool
    /// Seconds from the tone's first sample to the pattern change, when this clip has both.
    var changeAfterOnset: Double?
}

struct Expectations: Codable {
    var clips: [ClipExpectation] = []
    /// Seconds from a pattern change to the timestamp of the first frame showing it.
    var pictureLatency: [Double] = []
}
