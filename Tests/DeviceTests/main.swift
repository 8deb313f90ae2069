import Foundation

// Real-driver tests for Vigil's cameras and microphones. `make test-devices` runs
// `inside` in a VM booted with vivid and snd-aloop (scripts/vm/run-vm.sh), then `check`
// on the host with ffprobe and ffmpeg over what the VM left behind.

let usage = """
    usage: vigil-device-tests inside OUTDIR VIGIL [SCENARIO...]
               run the scenarios against vivid and snd-aloop (in the VM, as root); VIGIL is the
               vigil binary under test; clips, logs and expectations are written to OUTDIR
           vigil-device-tests check OUTDIR
               check the clips the VM wrote (on the host): ffprobe, a full ffmpeg decode,
               size, rate, keyframes, sound and its alignment with the picture
    scenarios: \(Scenario.allCases.map(\.rawValue).joined(separator: " "))
    """

enum Scenario: String, CaseIterable {
    case probe, negotiation, strides, lost, unplug, latency, audio, record, hd, recover, codec, libcamera
}

let arguments = Array(CommandLine.arguments.dropFirst())
let report = Report()
switch (arguments.first, arguments.count) {
case ("inside", 3...):
    let out = arguments[1], vigil = arguments[2]
    var chosen: [Scenario] = []
    for name in arguments.dropFirst(3) {
        guard let s = Scenario(rawValue: name) else {
            FileHandle.standardError.write(Data("unknown scenario \(name)\n\(usage)\n".utf8))
            exit(64)
        }
        chosen.append(s)
    }
    if chosen.isEmpty { chosen = Scenario.allCases }
    // A crash should fail a scenario at once: Swift's backtracer takes minutes under emulation.
    setenv("SWIFT_BACKTRACE", "enable=no", 1)
    try? FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)
    var context = Context(out: out, vigil: vigil)
    for scenario in chosen { context.run(scenario, report) }
    context.save(report)
    report.writeFigures(to: out + "/figures-vm.txt")
case ("check", 2):
    ClipChecks.run(out: arguments[1], report)
    report.writeFigures(to: arguments[1] + "/figures-host.txt")
default:
    FileHandle.standardError.write(Data((usage + "\n").utf8))
    exit(64)
}
FileHandle.standardOutput.write(Data((report.summary() + "\n").utf8))
exit(report.failures.isEmpty ? 0 : 1)
