import Capture
import Foundation
import Media
import POSIX
import Synchronization

/// What the device tests print: a section per scenario, one line per check (`ok` or `FAIL`),
/// and the figures measured (also written to OUTDIR/figures.txt for the record).
final class Report {
    private(set) var failures: [String] = []
    private(set) var checks = 0
    private var figures: [String] = []
    private var currentSection = ""

    func section(_ title: String) {
        currentSection = title
        emit("\n== \(title)")
        figures.append("\n== \(title)")
    }

    /// Records one check; `detail` says what was seen.
    @discardableResult
    func check(_ ok: Bool, _ what: String, _ detail: @autoclosure () -> String = "") -> Bool {
        checks += 1
        let text = detail()
        emit((ok ? "ok   " : "FAIL ") + what + (text.isEmpty ? "" : " — " + text))
        if !ok { failures.append("\(currentSection): \(what)" + (text.isEmpty ? "" : " — " + text)) }
        return ok
    }

    /// A check of an emulated driver's timing against the clock (vivid's stamps against its
    /// sequence numbers, snd-aloop's against its playback side): judged while the VM has not
    /// been starved during the scenario, else shown as a note. A starved VM runs vivid's and
    /// snd-aloop's kernel timers late, which a real camera or sound card does not; what Vigil
    /// writes from them is judged on the host all the same (the clips' checks).
    func timingCheck(_ ok: Bool, _ what: String, _ detail: @autoclosure () -> String = "") {
        // A stall that has just ended may not be recorded yet: the monitor wakes every 20 ms.
        usleep(60_000)
        let delay = StarvationMonitor.shared.peek()
        if delay > StarvationMonitor.starvedAbove {
            let text = detail()
            note(
                "not judged, the VM was starved (a thread woke \(fixed(delay * 1000, 0)) ms late): \(what)"
                    + (ok ? " — would pass" : " — would fail") + (text.isEmpty ? "" : ": " + text))
        } else {
            check(ok, what, detail())
        }
    }

    /// A measured value worth keeping (negotiated formats, offsets, counts).
    func figure(_ text: String) {
        emit("     " + text)
        figures.append(text)
    }

    func note(_ text: String) { emit("     (" + text + ")") }

    func fail(_ what: String) { check(false, what) }

    /// `attempt` must fail: the error is kept as a figure (`figure` words it), then `judge`
    /// says whether it passes the check `what` — nil for an error of another kind, which fails
    /// as "`label` threw …"; an attempt that goes through fails as `ifNoError`.
    func expectError(
        _ what: String, label: String, ifNoError: String, figure: (CaptureError) -> String,
        judge: (CaptureError) -> Bool?, _ attempt: () throws(CaptureError) -> Void
    ) {
        do {
            try attempt()
            fail(ifNoError)
        } catch {
            self.figure(figure(error))
            if let passed = judge(error) {
                check(passed, what)
            } else {
                fail("\(label) threw \(error)")
            }
        }
    }

    func writeFigures(to path: String) {
        try? (figures.joined(separator: "\n") + "\n").write(toFile: path, atomically: true, encoding: .utf8)
    }

    func summary() -> String {
        failures.isEmpty
            ? "\nall \(checks) checks passed"
            : "\n\(failures.count) of \(checks) checks failed:\n" + failures.map { "  - " + $0 }.joined(separator: "\n")
    }

    private func emit(_ line: String) {
        // Written at once (the VM's console port shows progress as it happens).
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }
}

/// Seconds with a fixed number of decimals.
func fixed(_ value: Double, _ places: Int = 3) -> String { String(format: "%.\(places)f", value) }

/// Watches how late the VM wakes a sleeping thread: under emulation on a busy host the guest
/// is starved of CPU now and then, and real-time checks (frame rates, alignment) then fail
/// for that reason alone. Each scenario reports the worst delay it saw.
final class StarvationMonitor: Sendable {
    /// The one monitor of a run.
    static let shared = StarvationMonitor()
    /// A delay beyond this (seconds) is starvation: the VM's emulated devices then stamp late,
    /// by more than the timing checks allow (a frame for vivid, 5 ms for snd-aloop against its
    /// playback side, 20 ms before the microphone's timeline restarts). An idle host's VM
    /// stays under 50 ms.
    static let starvedAbove = 0.1
    private let worst = Mutex(0.0)

    init() {
        let thread = Thread { [self] in
            while true {
                let start = Clock.monotonic.now()
                usleep(20_000)
                let late = (Clock.monotonic.now() - start).seconds - 0.02
                worst.withLock { $0 = max($0, late) }
            }
        }
        thread.name = "starvation"
        thread.start()
    }

    /// The worst delay since the last `take`, in seconds, left for the next.
    func peek() -> Double { worst.withLock { $0 } }

    /// The worst delay since the last call, in seconds.
    func take() -> Double {
        worst.withLock { value in
            defer { value = 0 }
            return value
        }
    }
}
