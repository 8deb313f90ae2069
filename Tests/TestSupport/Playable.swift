import Testing

/// Every movie a test writes goes through the independent readers: ffprobe reads it, a full
/// decode by ffmpeg prints nothing, and a full decode by GStreamer (`GStreamer.decode`) warns
/// about nothing but its documented artefacts and gives every frame ffprobe counted, in
/// increasing presentation time. Returns ffprobe's report.
@discardableResult
public func expectPlayable(
    _ path: String, _ comment: String = "", sourceLocation: SourceLocation = #_sourceLocation
) throws -> ProbeReport? {
    // A finished clip must open in every reader, GPAC's and VLC's heuristics included.
    if isFinishedMovie(path) {
        let lookLive = hiddenBoxesThatLookLive(path)
        #expect(
            lookLive.isEmpty, "\(comment) \(path) hides boxes that look live: \(lookLive)",
            sourceLocation: sourceLocation)
    }
    let decode = try FFmpeg.decodeErrors(path)
    #expect(decode.isEmpty, "\(comment) \(path) does not decode cleanly: \(decode)", sourceLocation: sourceLocation)
    var probe: ProbeReport?
    do {
        probe = try FFprobe.probe(path)
        #expect(probe?.video != nil, "\(comment) \(path) has no video stream", sourceLocation: sourceLocation)
    } catch {
        Issue.record("\(comment) ffprobe cannot read \(path): \(error)", sourceLocation: sourceLocation)
    }
    let packets = probe?.video.flatMap { Int($0["nb_read_packets"] ?? "") }
    for problem in GStreamer.problems(of: try GStreamer.decode(path), packets: packets) {
        Issue.record("\(comment) \(path): \(problem)", sourceLocation: sourceLocation)
    }
    return probe
}

extension GStreamer {
    /// What is wrong with a movie's `decode`, one sentence each: what GStreamer warned about,
    /// a frame count other than ffprobe's `packets` (when known), presentation times that do not
    /// increase. Empty for a clean movie.
    public static func problems(of decode: Decode, packets: Int?) -> [String] {
        var problems = decode.problems.map { "GStreamer: " + $0 }
        if let packets, decode.frames.count != packets {
            problems.append("GStreamer decoded \(decode.frames.count) frames, ffprobe counted \(packets) packets")
        }
        let times = decode.frames.compactMap(\.self)
        if times.count != decode.frames.count {
            problems.append("GStreamer: \(decode.frames.count - times.count) decoded frame(s) without a time")
        }
        if let bad = zip(times, times.dropFirst()).first(where: { $1 <= $0 }) {
            problems.append("GStreamer: presentation times do not increase (\(bad.0) s, then \(bad.1) s)")
        }
        return problems
    }
}

/// The sound of `path` as ffmpeg decodes it, mixed to one channel of 16-bit samples (48 kHz
/// for Opus and for 48 kHz PCM); the decode must exit 0 and print nothing.
public func decodedSound(_ path: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> [Int16] {
    let r = try runTool(
        "ffmpeg", ["-nostdin", "-v", "error", "-i", path, "-map", "0:a", "-ac", "1", "-f", "s16le", "-"])
    #expect(r.status == 0 && r.stderr.isEmpty, "\(r.stderr)", sourceLocation: sourceLocation)
    return r.stdoutData.withUnsafeBytes { Array($0.bindMemory(to: Int16.self)) }
}

/// The root mean square of 48 kHz `samples`, and how often a second they cross zero upwards
/// (a tone's frequency).
public func soundLevel(_ samples: ArraySlice<Int16>) -> (rms: Double, hertz: Double) {
    guard !samples.isEmpty else { return (0, 0) }
    let rms = (samples.reduce(0.0) { $0 + Double($1) * Double($1) } / Double(samples.count)).squareRoot()
    let ups = zip(samples, samples.dropFirst()).filter { $0 < 0 && $1 >= 0 }.count
    return (rms, Double(ups) * 48000 / Double(samples.count))
}
