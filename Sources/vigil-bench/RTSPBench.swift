import Agent
import Configuration
import Foundation
import Logging
import Media
import POSIX
import QuickTime
import RTSP

/// What ten RTSP viewers cost: the agent's RTSP server (`RTSPSink`) fed the access units the
/// encoder made (`samples`, published again and again in real time, frame by frame, as the
/// pipeline publishes them), with ten `ffmpeg -c copy` clients over `transport` (tcp or udp) on
/// the loopback — this process's CPU time (every thread: the server's, and the kernel's work on
/// its sockets, which on the loopback includes delivering to the clients) over `seconds` with
/// the ten, less the same with none, as a share of the x264 encode of the frames published
/// meanwhile (`encodePerFrame`, 1 thread).
///
/// With `transport` "floor", no server: the same frames written by a bare loop to ten TCP
/// connections on the loopback (one `send` a frame to each, readers that read and drop them) —
/// what the kernel spends delivering the bytes, which any server pays.
func measureRTSPViewers(
    samples: [EncodedSample], video: VideoTrackFormat, encodePerFrame: Double, column: String, seconds: Double,
    transport: String, table: inout BenchTable
) throws {
    var gops = GOP.grouped(samples)
    guard gops.count > 1 else { return }
    gops.removeLast()  // not ended: the feed only ever gets complete GOPs
    guard let cycleEnd = gops.last?.end else { return }
    let cycle = cycleEnd - gops[0].start
    let movie = try LiveMovie(video: video)
    let feed = openedFeed(movie)
    let floor = transport == "floor"
    let sink =
        floor
        ? nil
        : try RTSPSink(
            settings: Settings.RTSP(listen: "127.0.0.1", port: 0), camera: "bench",
            log: Logger(level: .warning, sink: MemoryLogSink()))
    defer { sink?.finish() }
    sink?.start(SinkContext(live: feed))
    let url = "rtsp://127.0.0.1:\(sink?.port ?? 0)/bench"
    var connections: [StreamConnection] = []
    /// The floor's delivery: each frame written whole to each connection.
    func deliver(_ sample: EncodedSample) {
        sample.data.withUnsafeBytes { bytes in
            for connection in connections {
                var at = 0
                while at < bytes.count {
                    guard case .moved(let n) = connection.write([UnsafeRawBufferPointer(rebasing: bytes[at...])]) else {
                        break
                    }
                    at += n
                }
            }
        }
    }

    /// Publishes GOPs in real time for `seconds` (from `round`'s place in the cycle on): the
    /// CPU seconds this process used meanwhile, and the frames published.
    var round: Int64 = 0
    func publish(for seconds: Double) -> (cpu: (user: Double, system: Double), frames: Int) {
        var frames = 0
        let cpu = cpuTimes {
            let begin = DispatchTime.now().uptimeNanoseconds
            func elapsed() -> Double { Double(DispatchTime.now().uptimeNanoseconds - begin) / 1e9 }
            var published = 0.0
            while elapsed() < seconds {
                for gop in gops {
                    let shifted = gop.shifted(by: Timestamp.Duration(nanoseconds: round * cycle.nanoseconds))
                    // Each frame goes out once its time has come, and the GOP once complete, as
                    // the pipeline publishes them.
                    for (index, sample) in shifted.samples.enumerated() {
                        let next = index + 1 < shifted.samples.count ? shifted.samples[index + 1].dts : shifted.end!
                        published += Double((next - sample.dts).nanoseconds) / 1e9
                        let wait = published - elapsed()
                        if wait > 0 { usleep(UInt32(wait * 1_000_000)) }
                        if floor { deliver(sample) } else { feed.publish(frame: sample) }
                    }
                    if !floor { feed.publish(shifted) }
                    frames += gop.count
                }
                round += 1
            }
        }
        return (cpu, frames)
    }

    // A GOP first, so the clients have something to start from.
    _ = publish(for: 0.1)
    let alone = publish(for: seconds)
    var viewers: [Process] = []
    defer {
        // Killed: ffmpeg stopped mid-stream waits for a packet before it ends, and none comes
        // once publishing stopped.
        for viewer in viewers where viewer.isRunning {
            kill(viewer.processIdentifier, SIGKILL)
            viewer.waitUntilExit()
        }
    }
    if floor {
        (connections, viewers) = try loopbackReaders(10)
    } else {
        for _ in 0..<10 {
            let viewer = Process()
            viewer.executableURL = URL(fileURLWithPath: "/usr/bin/ffmpeg")
            viewer.arguments = [
                "-nostdin", "-v", "error", "-rtsp_transport", transport, "-i", url, "-c", "copy", "-f", "null", "-",
            ]
            viewer.standardInput = FileHandle.nullDevice
            viewer.standardOutput = FileHandle.nullDevice
            viewer.standardError = FileHandle.nullDevice
            do { try viewer.run() } catch {
                print("RTSP viewers: skipped (ffmpeg does not run: \(error))")
                return
            }
            viewers.append(viewer)
        }
    }
    // Until all ten are set up and fed (a few GOPs).
    _ = publish(for: 3)
    let watched = publish(for: seconds)
    // Per frame, less what publishing alone cost: the server's own work and the kernel's.
    let scale = Double(watched.frames) / Double(max(1, alone.frames))
    let user = max(0, watched.cpu.user - alone.cpu.user * scale) * 1000 / Double(watched.frames)
    let system = max(0, watched.cpu.system - alone.cpu.system * scale) * 1000 / Double(watched.frames)
    if floor {
        table.record(
            "10 sockets sent the same frames by a bare loop (the floor)", unit: "ms/frame", column: column,
            value: user + system)
        table.record(
            "10 sockets, a bare loop / x264, 1 thread", unit: "%", column: column,
            value: 100 * (user + system) / encodePerFrame)
        return
    }
    let name = transport.uppercased()
    table.record("RTSP, 10 viewers (\(name), ffmpeg -c copy)", unit: "ms/frame", column: column, value: user + system)
    table.record("RTSP, 10 viewers (\(name)): the server's own", unit: "ms/frame", column: column, value: user)
    table.record(
        "RTSP, 10 viewers (\(name)): the kernel's (sockets, loopback)", unit: "ms/frame", column: column,
        value: system)
    table.record(
        "RTSP, 10 viewers (\(name)) / x264, 1 thread", unit: "%", column: column,
        value: 100 * (user + system) / encodePerFrame)
    table.record(
        "RTSP, 10 viewers (\(name)), the server's own / x264, 1 thread", unit: "%", column: column,
        value: 100 * user / encodePerFrame)
}

extension GOP {
    /// The same GOP `offset` later.
    func shifted(by offset: Timestamp.Duration) -> GOP {
        let moved = samples.map {
            EncodedSample(data: $0.data, pts: $0.pts + offset, dts: $0.dts + offset, isKeyframe: $0.isKeyframe)
        }
        var gop = GOP(keyframe: moved[0])!
        for sample in moved.dropFirst() { _ = gop.append(sample) }
        return gop.ended(at: end.map { $0 + offset })
    }
}

/// `count` TCP connections on the loopback, each read by a process of its own (Python) that
/// drops what comes: the floor's clients.
func loopbackReaders(_ count: Int) throws -> ([StreamConnection], [Process]) {
    let listener = try TCPListener.listen(address: "127.0.0.1", port: 0, backlog: 16)
    let port = try listener.localPort()
    var readers: [Process] = []
    for _ in 0..<count {
        let reader = Process()
        reader.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        reader.arguments = [
            "-c", "import socket\ns = socket.create_connection(('127.0.0.1', \(port)))\nwhile s.recv(65536): pass",
        ]
        reader.standardInput = FileHandle.nullDevice
        reader.standardOutput = FileHandle.nullDevice
        reader.standardError = FileHandle.nullDevice
        try reader.run()
        readers.append(reader)
    }
    var connections: [StreamConnection] = []
    // The listening socket blocks: each accept waits for the next reader.
    while connections.count < count {
        if let connection = try StreamConnection.accept(from: listener) { connections.append(connection) }
    }
    return (connections, readers)
}
