// A feeder for the soak test: writes the synthetic scene as a YUV4MPEG2 stream to OUTPUT (a
// named pipe the agent reads as its `file:` source), as fast as the reader takes it, so an hour
// of camera time passes in minutes. Something crosses the picture, a parcel appears, and a
// light is switched on and off in every period, over and over.
//
// usage: y4m-feeder OUTPUT WIDTH HEIGHT FPS SECONDS [PERIOD]
//   PERIOD (default 10) is the seconds between the starts of two rounds of events.
import Capture
import Foundation
import Media

let arguments = CommandLine.arguments
guard arguments.count >= 6, let width = Int(arguments[2]), let height = Int(arguments[3]),
    let fps = Int64(arguments[4]),
    let seconds = Double(arguments[5]), let period = arguments.count > 6 ? Double(arguments[6]) : 10, period >= 8
else {
    FileHandle.standardError.write(Data("usage: y4m-feeder OUTPUT WIDTH HEIGHT FPS SECONDS [PERIOD ≥ 8]\n".utf8))
    exit(64)
}
let s = { (x: Double) in Timestamp.Duration(seconds: x) }
let schedule = SceneSchedule(
    objects: [
        SceneObject(enter: s(1), leave: s(3), path: .leftToRight(y: 0.5), width: 0.15, height: 0.25, brightness: 210),
        SceneObject(enter: s(5), leave: s(6), path: .still(x: 0.3, y: 0.7), width: 0.12, height: 0.15, brightness: 40),
    ],
    lightChanges: [LightChange(start: s(7), end: s(7.5), delta: 40)],
    period: s(period))
let scene = SyntheticScene(
    width: width, height: height, frameRate: Rational(fps, 1), pixelFormat: .i420, seed: 42,
    noiseSigma: 3, schedule: schedule, duration: s(seconds))
do {
    let source = try SyntheticSource(scene: scene)
    guard let handle = FileHandle(forWritingAtPath: arguments[1]) else {
        FileHandle.standardError.write(Data("y4m-feeder: cannot open \(arguments[1])\n".utf8))
        exit(66)
    }
    try handle.write(contentsOf: Y4MHeader.line(width: width, height: height, rate: Rational(fps, 1)))
    var bytes: [UInt8] = []
    while let frame = try source.nextFrame() {
        bytes.removeAll(keepingCapacity: true)
        Y4MHeader.appendFrame(frame, to: &bytes)
        try handle.write(contentsOf: bytes)
    }
    try handle.close()
} catch {
    FileHandle.standardError.write(Data("y4m-feeder: \(error)\n".utf8))
    exit(74)
}
